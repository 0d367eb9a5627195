"""§5.4 label smoothing: hand computation, padding invariance, metrics, the written-out gradient."""

import math

import numpy as np
import pytest

from keras_transformer.losses import LabelSmoothedCrossEntropy, TokenMetrics, token_statistics


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


LOGITS = np.array([[[2.0, 0.5, -1.0, 0.0], [0.1, 0.2, 3.0, -2.0]]], "float32")  # [B=1, T=2, V=4]
LABELS = np.array([[1, 2]])


def test_smoothed_loss_equals_hand_computation():
    eps, V = 0.1, 4
    log_p = _log_softmax(LOGITS.astype("float64"))[0]
    per_token = [-(1 - eps) * log_p[t, y] - eps / V * log_p[t].sum() for t, y in enumerate(LABELS[0])]
    loss = LabelSmoothedCrossEntropy(eps)(LABELS, LOGITS)
    np.testing.assert_allclose(float(loss), np.mean(per_token), rtol=1e-6)


def test_zero_smoothing_is_plain_cross_entropy():
    log_p = _log_softmax(LOGITS.astype("float64"))[0]
    expected = -(log_p[0, 1] + log_p[1, 2]) / 2
    np.testing.assert_allclose(float(LabelSmoothedCrossEntropy(0.0)(LABELS, LOGITS)), expected, rtol=1e-6)


@pytest.mark.parametrize("pad", [1, 5])
def test_padding_does_not_change_the_loss(pad):
    logits = np.concatenate([LOGITS, np.random.default_rng(pad).normal(size=(1, pad, 4)).astype("float32")], 1)
    labels = np.concatenate([LABELS, np.zeros((1, pad), int)], 1)
    loss = LabelSmoothedCrossEntropy(0.1)
    np.testing.assert_allclose(float(loss(labels, logits)), float(loss(LABELS, LOGITS)), rtol=1e-6)


def test_mean_is_over_real_tokens_across_rows():
    # Row 0 has 2 real tokens, row 1 has 1: the mean weights every real token equally.
    logits = np.concatenate([LOGITS, LOGITS], 0)
    labels = np.array([[1, 2], [1, 0]])
    log_p = _log_softmax(LOGITS.astype("float64"))[0]
    expected = -(log_p[0, 1] + log_p[1, 2] + log_p[0, 1]) / 3
    np.testing.assert_allclose(float(LabelSmoothedCrossEntropy(0.0)(labels, logits)), expected, rtol=1e-6)


def test_metrics_nll_perplexity_accuracy():
    labels = np.array([[1, 2, 0]])
    logits = np.concatenate([LOGITS, np.zeros((1, 1, 4), "float32")], 1)
    log_p = _log_softmax(LOGITS.astype("float64"))[0]
    nll = -(log_p[0, 1] + log_p[1, 2]) / 2
    metrics = TokenMetrics()
    metrics.update_state(token_statistics(labels, logits, 0.1))
    result = {k: float(v) for k, v in metrics.result().items()}
    np.testing.assert_allclose([result["nll"], result["perplexity"], result["token_accuracy"]],
                               [nll, math.exp(nll), 0.5], rtol=1e-6)
    smoothed = float(LabelSmoothedCrossEntropy(0.1)(labels, logits))
    np.testing.assert_allclose([result["smoothed_loss"], result["loss"]], [smoothed, smoothed], rtol=1e-6)
    assert float(metrics.tokens) == 2


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_written_out_gradient_equals_autodiff_of_the_formula(eps):
    """∂H/∂z = softmax(z) - q (masked): the hand-written gradient equals TF's autodiff of H."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    logits = tf.constant(rng.normal(size=(2, 5, 7)).astype("float32"))
    labels = tf.constant([[1, 2, 3, 0, 0], [6, 5, 4, 3, 0]])
    weights = tf.constant(rng.uniform(size=(2, 5)).astype("float32"))  # an arbitrary upstream gradient
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(logits)
        ours = tf.reduce_sum(token_statistics(labels, logits, eps)[..., 0] * weights)
        log_p = tf.nn.log_softmax(logits)
        nll = -tf.gather(log_p, labels, batch_dims=2)
        formula = tf.reduce_sum(((1 - eps) * nll - eps * tf.reduce_mean(log_p, -1))
                                * tf.cast(labels != 0, tf.float32) * weights)
    np.testing.assert_allclose(float(ours), float(formula), rtol=1e-6)
    np.testing.assert_allclose(tape.gradient(ours, logits).numpy(), tape.gradient(formula, logits).numpy(),
                               atol=1e-7)


def test_loss_config_round_trip():
    loss = LabelSmoothedCrossEntropy(0.2)
    assert LabelSmoothedCrossEntropy.from_config(loss.get_config()).label_smoothing == 0.2
