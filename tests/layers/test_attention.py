import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import MultiHeadAttention, scaled_dot_product_attention
from keras_transformer.layers import masks


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_eq1_matches_hand_computation():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(1, 1, 3, 4)).astype("float32")
    k = rng.normal(size=(1, 1, 5, 4)).astype("float32")
    v = rng.normal(size=(1, 1, 5, 2)).astype("float32")
    out, weights = scaled_dot_product_attention(q, k, v)
    expected_w = _softmax(q[0, 0] @ k[0, 0].T / np.sqrt(4.0))
    np.testing.assert_allclose(weights[0, 0], expected_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[0, 0], expected_w @ v[0, 0], rtol=1e-5, atol=1e-6)


def test_padding_mask_gives_zero_weight_and_ignores_padded_values():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(1, 2, 3, 4)).astype("float32")
    k = rng.normal(size=(1, 2, 5, 4)).astype("float32")
    v = rng.normal(size=(1, 2, 5, 4)).astype("float32")
    ids = np.array([[7, 8, 9, 0, 0]])
    mask = masks.padding_mask(ids)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    np.testing.assert_array_equal(np.asarray(weights)[..., 3:], 0.0)
    v2 = v.copy()
    v2[..., 3:, :] = 1e3  # garbage in padded positions changes nothing
    out2, _ = scaled_dot_product_attention(q, k, v2, mask)
    np.testing.assert_allclose(out, out2, atol=1e-6)


def test_causal_mask_is_lower_triangular():
    np.testing.assert_array_equal(np.asarray(masks.causal_mask(4))[0, 0], np.tril(np.ones((4, 4), bool)))


@pytest.mark.parametrize("num_heads,d_k,d_v", [(4, None, None), (2, 3, 5)])
def test_multi_head_shapes_and_parameter_count(num_heads, d_k, d_v):
    mha = MultiHeadAttention(d_model=8, num_heads=num_heads, d_k=d_k, d_v=d_v)
    x = np.ones((2, 3, 8), "float32")
    m = np.ones((2, 6, 8), "float32")
    assert tuple(mha(x, m).shape) == (2, 3, 8)
    dk = d_k or 8 // num_heads
    dv = d_v or 8 // num_heads
    h = num_heads
    assert mha.count_params() == 2 * (8 * h * dk + h * dk) + (8 * h * dv + h * dv) + (h * dv * 8 + 8)
    assert tuple(mha.attention_weights(x, m).shape) == (2, h, 3, 6)


def test_get_config_round_trip():
    mha = MultiHeadAttention(d_model=8, num_heads=2, d_k=3, d_v=5, attention_dropout=0.1, name="mha")
    clone = MultiHeadAttention.from_config(mha.get_config())
    assert clone.get_config() == mha.get_config()


@pytest.mark.filterwarnings("ignore:You are using a softmax over axis -1")  # one cached position
def test_append_cache_adds_one_position_after_the_others():
    mha = MultiHeadAttention(d_model=8, num_heads=2)
    x = np.random.default_rng(2).normal(size=(1, 1, 8)).astype("float32")
    mha(x, x)
    k0 = np.random.default_rng(3).normal(size=(1, 2, 3, 4)).astype("float32")  # [B, H, t=3, d]
    k, v = mha.append_cache(k0, 2 * k0, x)
    expected_k, expected_v = mha.project_key_value(x)
    assert k.shape == v.shape == (1, 2, 4, 4)
    np.testing.assert_array_equal(np.asarray(k)[:, :, :3], k0)
    np.testing.assert_array_equal(np.asarray(v)[:, :, :3], 2 * k0)
    np.testing.assert_allclose(np.asarray(k)[:, :, 3], np.asarray(expected_k)[:, :, 0], atol=1e-6)
    np.testing.assert_allclose(np.asarray(v)[:, :, 3], np.asarray(expected_v)[:, :, 0], atol=1e-6)
