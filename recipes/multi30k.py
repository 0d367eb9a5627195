"""Multi30k Task 1 En->De: small Transformers sized for a 2-core CPU.

29,000 training pairs of image captions (short, ~12 words), a shared BPE vocabulary of 8000.

* ``multi30k`` (the shipped model): the shape and optimisation of fairseq's ``transformer_tiny`` (d_model 128,
  4+4 layers; the Multi30k baseline of Wu et al., 2021) with pre-LN layers, for 2 hours of training.
* ``multi30k_demo`` (README command 1): the same shape tuned for 15 minutes of a CPU that trains in float32.
* ``multi30k_en_fr``: the shipped model's recipe for English->French (Task 1's French side), the paper's second pair.
* ``multi30k_multi``: one model for English->German, French and Czech (``DataConfig.target_langs``).
* ``multi30k_d256``: d_model 256, 3+3 of the paper's post-LN layers; the benchmarks' second translation model.

How the values were chosen (searches on val, with their figures): docs/notes.md.
"""

import dataclasses

from keras_transformer.config import DataConfig, DecodeConfig, ModelConfig, Recipe, TrainConfig

RECIPE = Recipe(
    name="multi30k",
    description="Multi30k En-De, small Transformer for a 2-core CPU",
    model=ModelConfig(
        vocab_size=8000,
        d_model=128,
        d_ff=256,
        num_heads=4,
        num_encoder_layers=4,
        num_decoder_layers=4,
        dropout=0.3,  # transformer_tiny's: the model keeps learning for the whole budget without overfitting
        attention_dropout=0.0,
        max_length=256,
        norm="pre",  # with the paper's post-LN these 4+4 layers stall early (val perplexity 16.4); pre-LN trains them
    ),
    data=DataConfig(
        corpus="multi30k",
        max_length=80,  # every Multi30k pair fits; longer inputs are cut to it at decoding
        tokens_per_batch=4096,  # transformer_tiny's batch
        shuffle_buffer=30000,  # more than the corpus: a full shuffle
        tokenizer_sample_lines=60000,  # every training sentence of both sides (58,000)
    ),
    train=TrainConfig(
        train_steps=40000,  # an upper bound: the time budget stops the run first on 2 cores
        max_train_minutes=118,  # 2 hours of a 2-core machine with the pipeline's start-up
        warmup_steps=2000,
        learning_rate_scale=2.53,  # peak 5.0e-3 at step 2,000 (Eq. 3 with d_model 128): fairseq's --lr 0.005
        checkpoint_every=400,  # every ~2 passes over the corpus, each scored on val
        keep_best_by="val_loss",  # the 5 best by val loss are averaged (§6.1): a late overfit cannot spoil them
        keep_checkpoints=5,
        eval_batches=0,  # all of val
        mixed_precision=True,  # bfloat16 where the hardware has it (precision.py)
        jit_compile=False,  # XLA trains no faster than the plain graph on CPU and is slower to warm up
    ),
    # α chosen on val after training (§6.1): this model's output runs short on long captions at α 0.6.
    decode=DecodeConfig(beam_size=4, alpha=0.6, extra_length=50, average_checkpoints=5,
                        alpha_grid=(0.6, 0.8, 1.0, 1.2)),
)

DEMO = dataclasses.replace(
    RECIPE,
    name="multi30k_demo",
    description="Multi30k En-De in 15 minutes of training on a 2-core CPU (the README's first command)",
    model=dataclasses.replace(RECIPE.model, dropout=0.05),  # chosen on val for 1,100 and 2,500 steps of training
    data=dataclasses.replace(RECIPE.data, tokens_per_batch=2048),  # more updates in 15 minutes learn more per token
    train=dataclasses.replace(
        RECIPE.train,
        train_steps=8000,  # an upper bound: the 15-minute budget stops it first on 2 cores
        max_train_minutes=15,
        # Below ~1,000 steps this model is no translator yet: a CPU too slow to make them in 15 minutes trains on
        # to them, and says so after 50 steps (callbacks.StopAtStep).
        min_train_steps=1000,
        warmup_steps=400,
        learning_rate_scale=1.13,  # peak 5.0e-3 at step 400 (Eq. 3 with d_model 128), as the shipped recipe's
        checkpoint_every=100,
        keep_best_by="",  # the last 3 averaged: too few checkpoints to rank
    ),
    # α 1.0, chosen on val for an early model; past 1.2 its output runs long.
    decode=dataclasses.replace(RECIPE.decode, average_checkpoints=3, alpha=1.0, alpha_grid=()),
)

EN_FR = dataclasses.replace(
    RECIPE,
    name="multi30k_en_fr",
    description="Multi30k En-Fr, small Transformer for a 2-core CPU",
    data=dataclasses.replace(RECIPE.data, target_lang="fr"),
)

MULTI = dataclasses.replace(
    RECIPE,
    name="multi30k_multi",
    description="Multi30k En-De, En-Fr and En-Cs in one model (a target tag per language), for a 2-core CPU",
    # The bilingual models' size and budget, so that each direction compares with its own model (Johnson et al.,
    # 2017): one vocabulary of 8,000 pieces for four languages, the tags <2de> <2fr> <2cs> among them.
    data=dataclasses.replace(RECIPE.data, target_langs=("de", "fr", "cs")),
)

D256 = dataclasses.replace(
    RECIPE,
    name="multi30k_d256",
    description="Multi30k En-De, d_model 256, 3+3 post-LN layers",
    model=dataclasses.replace(RECIPE.model, d_model=256, d_ff=1024, num_encoder_layers=3, num_decoder_layers=3,
                              dropout=0.2, attention_dropout=0.1, norm="post"),  # the paper's layers, ~90 passes
    data=dataclasses.replace(RECIPE.data, tokens_per_batch=2048),  # twice the updates of 4,096-token batches
    train=dataclasses.replace(
        RECIPE.train,
        max_train_minutes=110,
        warmup_steps=800,
        learning_rate_scale=1.0,  # peak 2.2e-3 at step 800 (Eq. 3 with d_model 256)
    ),
    decode=dataclasses.replace(RECIPE.decode, alpha_grid=()),
)
