"""The tiny Transformer the decoding tests search with (random weights, fixed seed), sources of varied lengths and
the model made to end sentences (the static and hybrid searches' equivalence tests)."""

import numpy as np
import pytest

from keras_transformer import PAD_ID
from keras_transformer.config import ModelConfig
from keras_transformer.model import build_model
from tests.decoding import tables


@pytest.fixture(scope="module")
def model():
    import keras

    keras.utils.set_random_seed(7)
    return build_model(ModelConfig(vocab_size=50, d_model=16, d_ff=32, num_heads=2, num_encoder_layers=2,
                                   num_decoder_layers=2, dropout=0.0, max_length=128))


@pytest.fixture(scope="module")
def sources():
    """Lengths 2, 12, 7, 0 (an empty source: all PAD) and 5."""
    src = np.random.default_rng(0).integers(4, 50, (5, 12)).astype(np.int32)
    src[0, 2:] = PAD_ID
    src[2, 7:] = PAD_ID
    src[3, :] = PAD_ID
    src[4, 5:] = PAD_ID
    return src


@pytest.fixture(scope="module")
def eos_prone(model, sources):
    """The model made to end sentences (tables.eos_prone): items finish at different steps, some fall back to
    alive beams."""
    with tables.eos_prone(model, sources) as prone:
        yield prone
