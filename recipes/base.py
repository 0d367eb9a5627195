"""Transformer (base model), Table 3 first row: 65M parameters in the paper.

Trained for 100K steps of ~25000 source + 25000 target tokens on 8 P100s (§5.2).

Parameter count: with a 37,000-token shared vocabulary, biases on every
projection and no output bias (the softmax weight is the tied embedding,
§3.4), the closed form gives 63,082,496 against the paper's 65M. Most Table 3
rows run about 2M above our count; the paper does not state its exact
vocabulary size (a ~41k vocabulary would close the gap), so we leave the
model as the paper describes it rather than bend it to the figures.
"""

from keras_transformer.config import DataConfig, DecodeConfig, ModelConfig, Recipe, TrainConfig

RECIPE = Recipe(
    name="base",
    description="Transformer base, WMT14 En-De (Table 3, first row)",
    model=ModelConfig(
        vocab_size=37000,  # §5.1: shared source-target BPE vocabulary of about 37000 tokens
        d_model=512,
        d_ff=2048,
        num_heads=8,
        num_encoder_layers=6,
        num_decoder_layers=6,
        dropout=0.1,  # §5.4 P_drop
    ),
    data=DataConfig(
        corpus="wmt14",
        train_split="train",
        eval_split="validation",  # newstest2013
        test_split="test",  # newstest2014
        max_length=256,
        tokens_per_batch=25000,  # §5.1
    ),
    train=TrainConfig(train_steps=100_000, warmup_steps=4000, label_smoothing=0.1),
    decode=DecodeConfig(beam_size=4, alpha=0.6, extra_length=50, average_checkpoints=5),  # §6.1
)
