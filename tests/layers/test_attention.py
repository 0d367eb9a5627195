import numpy as np
import pytest

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


def test_self_attend_step_equals_the_causal_pass_at_its_position():
    """One row, three cached positions: the step's output is the causal pass's 4th position; the cache grows."""
    mha = MultiHeadAttention(d_model=8, num_heads=2, d_k=3, d_v=5)
    x = np.random.default_rng(2).normal(size=(2, 4, 8)).astype("float32")
    full = np.asarray(mha(x, x, masks.causal_mask(4)))  # [2, 4, 8]
    k0, v0 = mha.project_key_value(x[:, :3])  # [2, 2, 3, 3], [2, 2, 3, 5]
    out, k, v = mha.self_attend_step(x[:, 3], k0, v0)
    np.testing.assert_allclose(np.asarray(out), full[:, 3], atol=1e-5)
    expected_k, expected_v = mha.project_key_value(x)
    assert k.shape == (2, 2, 4, 3) and v.shape == (2, 2, 4, 5)
    np.testing.assert_allclose(np.asarray(k), np.asarray(expected_k), atol=1e-6)
    np.testing.assert_allclose(np.asarray(v), np.asarray(expected_v), atol=1e-6)


def test_attend_rows_equals_attention_of_one_query():
    mha = MultiHeadAttention(d_model=8, num_heads=2)
    rng = np.random.default_rng(4)
    x, memory = rng.normal(size=(3, 1, 8)).astype("float32"), rng.normal(size=(3, 5, 8)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1] * 5, [1, 0, 0, 0, 0]], bool)[:, None, None, :]  # [3, 1, 1, 5]
    expected = np.asarray(mha(x, memory, mask))[:, 0]  # [3, 8]
    k, v = mha.project_key_value(memory)
    np.testing.assert_allclose(np.asarray(mha.attend_rows(x[:, 0], k, v, mask)), expected, atol=1e-5)


def test_attend_rows_groups_the_rows_of_one_memory_row():
    """N = B*G rows, G consecutive rows per memory row (an item's beams): the same as each row with its own copy."""
    mha = MultiHeadAttention(d_model=8, num_heads=2, d_k=3, d_v=5)
    rng = np.random.default_rng(5)
    x, memory = rng.normal(size=(6, 8)).astype("float32"), rng.normal(size=(2, 5, 8)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1] * 5], bool)[:, None, None, :]  # [2, 1, 1, 5]
    expected = np.asarray(mha(x[None, 4:5], memory[1:], mask[1:]))[0, 0]  # row 4 alone, with item 1's memory
    k, v = mha.project_key_value(memory)  # [2, 2, 5, 3], [2, 2, 5, 5]
    grouped = np.asarray(mha.attend_rows(x, k, v, mask))  # [6, 8]: rows 0-2 read item 0, rows 3-5 item 1
    repeat = lambda t: np.repeat(np.asarray(t), 3, axis=0)  # noqa: E731
    per_row = np.asarray(mha.attend_rows(x, repeat(k), repeat(v), repeat(mask)))  # G = 1
    np.testing.assert_allclose(grouped, per_row, atol=1e-6)
    np.testing.assert_allclose(per_row[4], expected, atol=1e-5)
