"""``LogProbs``: the k best tokens of a row, normalised alone, are tf.nn.log_softmax's values to the bit; bans
remove tokens without renormalising the others."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import BOS_ID, PAD_ID
from keras_transformer.decoding import model_step
from keras_transformer.decoding.log_probs import NEG_INF, LogProbs, as_log_probs


@pytest.mark.parametrize("rows, v", [(128, 8000), (4, 8000), (3, 37)])
def test_top_k_values_are_the_log_softmax_kernels(rows, v):
    """Rows of logits at several scales (a trained model's reach ±30); the 2K = 8 best of each, in graph mode
    as the search runs, equal the log-softmax kernel's values exactly, and so do the dense ones."""
    x = tf.constant(np.random.default_rng(rows + v).normal(size=(rows, v)) * np.linspace(0.5, 12, rows)[:, None],
                    tf.float32)

    @tf.function
    def both(x):
        expected = tf.nn.log_softmax(x)
        values, ids = LogProbs.from_logits(x).top_k(8)
        return expected, values, ids, LogProbs.from_logits(x).dense()

    expected, values, ids, dense = both(x)
    want = tf.math.top_k(expected, k=8)
    np.testing.assert_array_equal(ids.numpy(), want.indices.numpy())
    np.testing.assert_array_equal(values.numpy(), want.values.numpy())
    np.testing.assert_array_equal(dense.numpy(), expected.numpy())


def test_bans_keep_the_normaliser():
    """PAD and BOS (model_step) and a constraint's bans are never chosen; the others keep their log-softmax."""
    x = tf.constant([[9.0, 1.0, 8.0, 2.0, 3.0, 0.5], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    log_probs = model_step.log_probs_from_logits(x)
    expected = tf.nn.log_softmax(x).numpy()
    values, ids = log_probs.top_k(3)
    assert not set(ids.numpy().ravel()) & {PAD_ID, BOS_ID}
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(expected, ids.numpy(), axis=1))
    banned = log_probs.ban(tf.constant([[True, True, True, False, True, True]] * 2))
    values, ids = banned.top_k(2)
    np.testing.assert_array_equal(ids.numpy(), [[4, 1], [1, 4]])
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(expected, ids.numpy(), axis=1))
    assert np.all(banned.dense().numpy()[:, [PAD_ID, BOS_ID, 3]] < NEG_INF / 2)


def test_a_plain_tensor_is_taken_as_log_probabilities():
    log_p = tf.math.log(tf.constant([[0.5, 0.25, 0.25]]))
    values, ids = as_log_probs(log_p).top_k(2)
    np.testing.assert_array_equal(values.numpy(), log_p.numpy()[:, :2])
    np.testing.assert_array_equal(ids.numpy(), [[0, 1]])
