"""Helpers for the inference tests: the tiny recipe and running an entry point."""

import dataclasses

from keras_transformer import recipes
from tests.support import run_cli  # noqa: F401  (the inference tests import it from here)

VOCAB = 400  # 256 byte pieces + 4 reserved + ~76 characters, plus some merges
MAX_SOURCE = 24  # recipe.data.max_length: sources are cut to 23 subwords + EOS


def inference_recipe():
    tiny = recipes.get("tiny")
    return dataclasses.replace(
        tiny,
        name="tiny_inference",
        model=dataclasses.replace(tiny.model, vocab_size=VOCAB, d_model=32, d_ff=64, num_heads=2,
                                  num_encoder_layers=1, num_decoder_layers=1, max_length=96),
        data=dataclasses.replace(tiny.data, max_length=MAX_SOURCE),
        train=dataclasses.replace(tiny.train, train_steps=12, checkpoint_every=4, keep_checkpoints=5,
                                  eval_batches=1, warmup_steps=4),
    )

