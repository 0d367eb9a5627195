"""The paper's WSJ-only constituency parser (§6.3, Table 4: 91.3 F1 on section 23).

§6.3: "We trained a 4-layer transformer with d_model = 1024 on the Wall Street
Journal (WSJ) portion of the Penn Treebank, about 40K training sentences ...
We performed only a small number of experiments to select the dropout, both
attention and residual (section 5.4), learning rates and beam size on the
Section 22 development set, all other parameters remained unchanged from the
English-to-German base translation model. During inference, we increased the
maximum output length to input length + 300. We used a beam size of 21 and
α = 0.3".

The dropout and learning-rate values are not in the paper; they are those of
the authors' tensor2tensor ``transformer_parsing_base``: residual and
attention dropout 0.2, 16,000 warm-up steps, learning rate 0.05 where
``transformer_base_v1`` has 0.1 (hence Eq. 3 scaled by 0.5). Departures: the
softmax is tied to one shared BPE vocabulary (t2t unties it), whose size the
paper does not give; training length is base's 100K steps, as "unchanged".

The linearization and alignment are those chosen on the sample (``ptb_sample``,
docs/parsing.md): POS tags as leaves and the encoder outputs of the next word
and of the gap before it added to the decoder input; neither is in the paper
(its tree writes every word as XX and the decoder counts them).

Time, estimated: §5.2 measured 0.4 s a step for the base model on 8 P100
GPUs (25,000 + 25,000 tokens). This model's training FLOPs per token are
about 1.6 times base's (103.5M against 63.1M parameters, each used 6 times
per token; attention over lengths of ~25 source and ~70 target tokens adds
little), so a step takes ~0.66 s on 8 P100s and the 100K steps ~18 hours; on
one P100 (8 accumulated micro-batches per update) ~5.3 s a step, ~6 days.
A GPU with ~8 P100s' throughput (an A100 or H100 in bfloat16) brings the
single-GPU figure near the 8-P100 one. 100K steps of 25,000 target tokens are
~900 passes over the ~40K trees (~2.7M target tokens): the dev F1 curve
(``bleu_samples``, ``keep_best_by=val_f1``) shows when to stop sooner.

The full treebank (LDC99T42) is licensed: point ``--treebank`` at its
``parsed/mrg/wsj`` directory (sections 02-21 train, 22 dev, 23 test).
"""

import dataclasses

from keras_transformer.config import DataConfig, DecodeConfig, ModelConfig, ParsingConfig
from keras_transformer.recipes import base

RECIPE = dataclasses.replace(
    base.RECIPE,
    name="wsj_paper",
    task="parsing",  # §6.3
    description="§6.3 WSJ-only constituency parser: 4 layers, d_model 1024 (Table 4: 91.3 F1)",
    model=ModelConfig(
        vocab_size=16000,  # ours: shared BPE over ~40K sentences and their trees (labels are single pieces)
        d_model=1024,  # §6.3
        d_ff=2048,  # base's (§6.3: other parameters unchanged)
        num_heads=8,
        num_encoder_layers=4,  # §6.3: 4 layers
        num_decoder_layers=4,
        dropout=0.2,  # residual dropout (t2t transformer_parsing_base)
        attention_dropout=0.2,  # attention dropout (t2t transformer_parsing_base)
        max_length=1024,  # positions for inputs of up to ~300 pieces plus 300 (§6.3)
    ),
    parsing=ParsingConfig(
        align_words=True,  # the decoder is told which word comes next (module docstring; not in the paper)
        word_span=True,  # ... and the last pieces of that word and of the one before it (the same)
    ),
    data=DataConfig(
        corpus="ptb",
        source_lang="en",
        target_lang="tree",
        train_split="train",  # sections 02-21
        eval_split="dev",  # section 22
        test_split="test",  # section 23
        treebank="treebank_3/parsed/mrg/wsj",  # LDC99T42's layout, in the data directory; or --treebank=PATH
        max_length=512,  # t2t transformer_parsing_base max_length
        tokens_per_batch=25000,  # §5.1, as base
        tokenizer_sample_lines=200_000,  # every sentence and tree
        tree_leaves="tag",  # POS tags as leaves (module docstring; the paper's tree writes XX)
    ),
    train=dataclasses.replace(base.RECIPE.train, warmup_steps=16000,  # t2t transformer_parsing_base
                              learning_rate_scale=0.5),  # t2t: learning rate 0.05 against base's 0.1
    decode=DecodeConfig(beam_size=21, alpha=0.3, extra_length=300, average_checkpoints=5),  # §6.3
)
