import math

import numpy as np

from keras_transformer.layers import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoid_table


def test_sinusoid_entries_follow_section_3_5():
    d_model = 8
    table = sinusoid_table(50, d_model)
    # PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)), interleaved.
    assert table[0, 0] == 0.0 and table[0, 1] == 1.0
    np.testing.assert_allclose(table[1, 0], math.sin(1.0), rtol=1e-6)
    np.testing.assert_allclose(table[1, 1], math.cos(1.0), rtol=1e-6)
    np.testing.assert_allclose(table[3, 2], math.sin(3 / 10000 ** (2 / 8)), rtol=1e-6)
    np.testing.assert_allclose(table[3, 3], math.cos(3 / 10000 ** (2 / 8)), rtol=1e-6)
    np.testing.assert_allclose(table[49, 6], math.sin(49 / 10000 ** (6 / 8)), rtol=1e-6)
    np.testing.assert_allclose(table[49, 7], math.cos(49 / 10000 ** (6 / 8)), rtol=1e-6)


def test_layer_adds_table_from_start_offset():
    layer = SinusoidalPositionalEncoding(max_length=20, d_model=4)
    x = np.zeros((2, 3, 4), "float32")
    np.testing.assert_allclose(layer(x, start=5)[1], sinusoid_table(20, 4)[5:8], rtol=1e-6)
    assert layer.count_params() == 0


def test_learned_positional_embedding_is_trainable_and_serializes():
    layer = LearnedPositionalEmbedding(max_length=10, d_model=4, name="pos")
    layer(np.zeros((1, 3, 4), "float32"))
    assert layer.count_params() == 40
    assert LearnedPositionalEmbedding.from_config(layer.get_config()).get_config() == layer.get_config()
