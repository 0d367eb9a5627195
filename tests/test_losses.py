"""§5.4 label smoothing: hand computation, padding invariance, metrics."""

import math

import numpy as np
import pytest

from keras_transformer.losses import LabelSmoothedCrossEntropy, Perplexity, SmoothedLoss, TokenAccuracy, TokenNLL


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
    for metric, expected in [(TokenNLL(), nll), (Perplexity(), math.exp(nll)), (TokenAccuracy(), 0.5)]:
        metric.update_state(labels, logits)
        np.testing.assert_allclose(float(metric.result()), expected, rtol=1e-6)
    smoothed = SmoothedLoss(0.1)
    smoothed.update_state(labels, logits)
    np.testing.assert_allclose(float(smoothed.result()), float(LabelSmoothedCrossEntropy(0.1)(labels, logits)),
                               rtol=1e-6)


def test_loss_config_round_trip():
    loss = LabelSmoothedCrossEntropy(0.2)
    assert LabelSmoothedCrossEntropy.from_config(loss.get_config()).label_smoothing == 0.2
