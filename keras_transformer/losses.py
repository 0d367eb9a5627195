"""Label-smoothed, padding-masked cross entropy (§5.4) and token-level metrics.

With ε = ε_ls the target distribution is q = (1 - ε) onehot(y) + ε / V (uniform
over the V vocabulary entries), and the per-token loss is

    H(q, p) = (1 - ε) (-log p_y) + ε mean_v(-log p_v).

The mean is over real target tokens only (labels != PAD_ID), whatever the
padding. Under ``tf.distribute`` each replica divides its token-loss sum by
the *global* number of real tokens, so summing the replicas' gradients gives
exactly the single-replica gradient of the same global batch.
"""

from __future__ import annotations

import keras
from keras import ops

from keras_transformer import PAD_ID


def token_log_probs(logits):
    """logits [B, T, V] -> log-softmax in float32."""
    return ops.log_softmax(ops.cast(logits, "float32"), axis=-1)


def smoothed_token_losses(labels, logits, epsilon):
    """labels [B, T], logits [B, T, V] -> (smoothed loss [B, T], nll [B, T], real-token mask [B, T])."""
    log_p = token_log_probs(logits)  # [B, T, V]
    mask = ops.cast(ops.not_equal(labels, PAD_ID), "float32")  # [B, T]
    nll = -ops.squeeze(ops.take_along_axis(log_p, ops.cast(labels, "int32")[..., None], axis=-1), -1)  # [B, T]
    uniform = -ops.mean(log_p, axis=-1)  # [B, T]
    smoothed = (1.0 - epsilon) * nll + epsilon * uniform
    return smoothed * mask, nll * mask, mask


def _global_sum(x):
    """Sum of ``x`` over all replicas when called inside a multi-replica step (TF backend)."""
    if keras.backend.backend() != "tensorflow":
        return x
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return x
    return context.all_reduce(tf.distribute.ReduceOp.SUM, x)


@keras.saving.register_keras_serializable(package="keras_transformer")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """§5.4 label smoothing, ε_ls = 0.1 by default; mean over real (non-padding) target tokens."""

    def __init__(self, label_smoothing=0.1, name="label_smoothed_cross_entropy", **kwargs):
        kwargs.pop("reduction", None)
        super().__init__(name=name, reduction="sum", **kwargs)
        self.label_smoothing = label_smoothing

    def call(self, y_true, y_pred):
        losses, _, mask = smoothed_token_losses(y_true, y_pred, self.label_smoothing)
        return losses / ops.maximum(_global_sum(ops.sum(mask)), 1.0)  # [B, T]; "sum" reduction -> token mean

    def get_config(self):
        return {"name": self.name, "label_smoothing": self.label_smoothing}


class _TokenMean(keras.metrics.Metric):
    """Running mean of a per-token quantity over real target tokens."""

    def __init__(self, name, **kwargs):
        super().__init__(name=name, **kwargs)
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def _values(self, y_true, y_pred):
        raise NotImplementedError

    def update_state(self, y_true, y_pred, sample_weight=None):
        values, mask = self._values(y_true, y_pred)
        self.total.assign_add(ops.sum(values * mask))
        self.count.assign_add(ops.sum(mask))

    def result(self):
        return self.total / ops.maximum(self.count, 1.0)

    def reset_state(self):
        self.total.assign(0.0)
        self.count.assign(0.0)


@keras.saving.register_keras_serializable(package="keras_transformer")
class TokenNLL(_TokenMean):
    """Un-smoothed negative log-likelihood per real token (label smoothing "hurts perplexity", §5.4)."""

    def __init__(self, name="nll", **kwargs):
        super().__init__(name=name, **kwargs)

    def _values(self, y_true, y_pred):
        _, nll, mask = smoothed_token_losses(y_true, y_pred, 0.0)
        return nll, mask


@keras.saving.register_keras_serializable(package="keras_transformer")
class Perplexity(TokenNLL):
    """exp(NLL per real token)."""

    def __init__(self, name="perplexity", **kwargs):
        super().__init__(name=name, **kwargs)

    def result(self):
        return ops.exp(super().result())


@keras.saving.register_keras_serializable(package="keras_transformer")
class SmoothedLoss(_TokenMean):
    """The label-smoothed loss per real token, exact across replicas and batches."""

    def __init__(self, label_smoothing=0.1, name="smoothed_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        self.label_smoothing = label_smoothing

    def _values(self, y_true, y_pred):
        smoothed, _, mask = smoothed_token_losses(y_true, y_pred, self.label_smoothing)
        return smoothed, mask

    def get_config(self):
        return {**super().get_config(), "label_smoothing": self.label_smoothing}


@keras.saving.register_keras_serializable(package="keras_transformer")
class TokenAccuracy(_TokenMean):
    """Fraction of real target tokens whose argmax prediction is correct."""

    def __init__(self, name="token_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)

    def _values(self, y_true, y_pred):
        correct = ops.equal(ops.cast(ops.argmax(y_pred, axis=-1), "int32"), ops.cast(y_true, "int32"))
        return ops.cast(correct, "float32"), ops.cast(ops.not_equal(y_true, PAD_ID), "float32")
