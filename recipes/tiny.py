"""A tiny Transformer that trains in seconds on a CPU: for tests and smoke runs."""

from keras_transformer.config import DataConfig, ModelConfig, Recipe, TrainConfig

RECIPE = Recipe(
    name="tiny",
    description="2+2 layers, d_model 64: seconds on a CPU (tests, smoke runs)",
    model=ModelConfig(
        vocab_size=1000,  # enough subwords for Multi30k-style captions at this size
        d_model=64,
        d_ff=256,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dropout=0.1,
        max_length=256,
    ),
    data=DataConfig(
        corpus="multi30k",
        max_length=64,  # Multi30k captions rarely exceed 40 subwords
        tokens_per_batch=2048,  # small batches: many fast steps
        shuffle_buffer=4096,
        tokenizer_sample_lines=30000,
    ),
    train=TrainConfig(
        train_steps=300,
        warmup_steps=100,  # short run: reach the peak learning rate early
        learning_rate_scale=2.0,
        checkpoint_every=100,
        eval_batches=10,
    ),
)

