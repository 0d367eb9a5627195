"""Constituency parsing (§6.3) on the free ~5% WSJ sample, sized for a 2-core CPU.

3,669 training trees (files wsj_0001-0179; dev 0180-0189, test 0190-0199),
about a tenth of the paper's WSJ-only set, so F1 will be far below Table 4's
91.3. The shape follows §6.3 (4 layers) at the width of the ``multi30k``
recipe (d_model 256): 8.4M parameters for 226k target tokens, so sub-layer
dropout is 0.3 (as ``multi30k``, above the WSJ run's 0.2 for ten times less
data) and attention dropout the WSJ run's 0.2 (tensor2tensor
``transformer_parsing_base``). Decoding is the paper's: beam 21, α 0.3,
output up to input + 300 tokens (a tree holds about 2.6 tokens per word: a
slot, and an open and a close per 0.8 words).

Time: a step of 4,096 tokens took 1.8 s on the 2-core VM while other jobs ran
(load ~5), so the 55-minute budget gives 1,800-2,750 steps (~30-45 passes);
decoding the 118 test trees with beam 21 takes about a minute.
"""

from keras_transformer.config import DataConfig, DecodeConfig, ModelConfig, Recipe, TrainConfig

RECIPE = Recipe(
    name="ptb_sample",
    task="parsing",  # §6.3
    description="Constituency parsing (§6.3) on the WSJ sample, 4+4 layers, d_model 256, for a 2-core CPU",
    model=ModelConfig(
        vocab_size=4000,  # 3,669 sentences: 1.58 source pieces per word; every tree token is one piece anyway
        d_model=256,
        d_ff=1024,
        num_heads=4,
        num_encoder_layers=4,  # §6.3: a 4-layer Transformer
        num_decoder_layers=4,
        dropout=0.3,  # a tenth of WSJ's data: more than the WSJ run's 0.2 (module docstring)
        attention_dropout=0.2,  # the WSJ run's attention dropout (t2t transformer_parsing_base)
        max_length=1024,  # positions: the longest tree of the sample is 573 tokens, outputs may reach input + 300
    ),
    data=DataConfig(
        corpus="ptb",
        source_lang="en",
        target_lang="tree",
        train_split="train",
        eval_split="dev",
        test_split="test",
        max_length=384,  # keeps all but the longest training trees (a 249-word sentence: 573 tokens)
        tokens_per_batch=4096,  # as multi30k: ~150 updates per pass over the 226k target tokens
        shuffle_buffer=4000,  # the whole training split
        tokenizer_sample_lines=10000,  # all 7,338 sentences and trees
    ),
    train=TrainConfig(
        train_steps=3000,  # ~50 passes over the sample, if the time budget allows
        max_train_minutes=55,  # the compute budget on a 2-core CPU; the run stops and checkpoints there
        warmup_steps=800,  # peak learning rate 2.2e-3 (Eq. 3 with d_model 256)
        learning_rate_scale=1.0,
        checkpoint_every=150,  # 5 kept checkpoints span the last ~12 passes, for averaging (§6.1)
        keep_checkpoints=5,
        eval_batches=0,  # the 127 dev trees in full
        mixed_precision=True,  # bf16 where the hardware has it (1.4x float32 on AMX; precision.py)
    ),
    decode=DecodeConfig(beam_size=21, alpha=0.3, extra_length=300, average_checkpoints=5),  # §6.3
)
