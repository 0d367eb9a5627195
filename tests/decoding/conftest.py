"""The tiny Transformer the decoding tests search with (random weights, fixed seed)."""

import pytest

from keras_transformer.config import ModelConfig
from keras_transformer.model import build_model


@pytest.fixture(scope="module")
def model():
    import keras

    keras.utils.set_random_seed(7)
    return build_model(ModelConfig(vocab_size=50, d_model=16, d_ff=32, num_heads=2, num_encoder_layers=2,
                                   num_decoder_layers=2, dropout=0.0, max_length=128))
