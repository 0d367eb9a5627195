"""Label-smoothed, padding-masked cross entropy (§5.4) and the token statistics of a batch.

With ε = ε_ls the target distribution is q = (1 - ε) onehot(y) + ε / V (uniform
over the V vocabulary entries), and the per-token loss is

    H(q, p) = (1 - ε) (-log p_y) + ε mean_v(-log p_v),    ∂H/∂z = softmax(z) - q.

One normaliser per batch: :func:`token_statistics` computes log Σ_v exp z_v
of the float32 logits once and reads from it the smoothed loss, the
un-smoothed NLL and the argmax hit of every token (log p_v = z_v - log Σ exp z),
so the loss and every metric share the logits and no [B, T, V] log-softmax is
kept. Its gradient is written out (softmax(z) - q, times the upstream gradient)
in one buffer rather than traced through a log-softmax, a gather and a mean,
which would hold a one-hot and a broadcast [B, T, V] tensor each.

Means are over real target tokens only (labels != PAD_ID). Under
``tf.distribute`` each replica divides its token-loss sum by the *global*
number of real tokens, so summing the replicas' gradients gives exactly the
single-replica gradient of the same global batch.
"""

from __future__ import annotations

import keras
from keras import ops

from keras_transformer import PAD_ID

# Columns of token_statistics(...)[..., c].
SMOOTHED, NLL, HIT, REAL = 0, 1, 2, 3


def token_statistics(labels, logits, epsilon):
    """labels [B, T], logits [B, T, V] -> [B, T, 4] float32: smoothed loss, NLL, argmax hit, real token.

    Every column is 0 on padding. Only column SMOOTHED carries a gradient. TensorFlow ops: the
    gradient updates one [B, T, V] buffer in place (TF forwards a tensor's buffer to the next
    element-wise op when nothing else holds it), which ``keras.ops`` cannot express.
    """
    import tensorflow as tf

    labels = tf.cast(labels, tf.int32)
    mask = tf.cast(tf.not_equal(labels, PAD_ID), tf.float32)  # [B, T]

    @tf.custom_gradient
    def statistics(z):  # z: logits [B, T, V]
        z = tf.cast(z, tf.float32)  # the one float32 [B, T, V] tensor kept for the gradient
        log_norm = tf.reduce_logsumexp(z, axis=-1)  # [B, T]: log Σ_v exp z_v
        log_p = lambda v: v - log_norm  # noqa: E731  log p of gathered / reduced logits
        nll = -log_p(tf.gather(z, labels, batch_dims=2))  # [B, T]
        uniform = -log_p(tf.reduce_mean(z, axis=-1))  # [B, T]: mean_v(-log p_v)
        hit = tf.cast(tf.equal(tf.argmax(z, axis=-1, output_type=tf.int32), labels), tf.float32)  # [B, T]
        smoothed = (1.0 - epsilon) * nll + epsilon * uniform  # [B, T]
        out = tf.stack([smoothed * mask, nll * mask, hit * mask, mask], axis=-1)  # [B, T, 4]

        def grad(upstream):  # upstream [B, T, 4]
            vocab = tf.shape(z)[-1]
            g = tf.exp(z - log_norm[..., None]) - epsilon / tf.cast(vocab, tf.float32)  # softmax(z) - ε/V
            at_labels = tf.stack([tf.range(tf.size(labels)), tf.reshape(labels, [-1])], axis=1)  # [B*T, 2]
            g = tf.tensor_scatter_nd_sub(tf.reshape(g, [-1, vocab]), at_labels,
                                         tf.fill([tf.size(labels)], 1.0 - epsilon))  # softmax(z) - q
            g = tf.reshape(g, tf.shape(z)) * (upstream[..., SMOOTHED] * mask)[..., None]
            return tf.cast(g, logits.dtype)

        return out, grad

    return statistics(logits)


def _global_sum(x):
    """Sum of ``x`` over all replicas when called inside a multi-replica step (TF backend)."""
    if keras.backend.backend() != "tensorflow":
        return x
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return x
    return context.all_reduce(tf.distribute.ReduceOp.SUM, x)


def global_token_count(statistics):
    """Real target tokens of the batch on all replicas together (at least 1)."""
    return ops.maximum(_global_sum(ops.sum(statistics[..., REAL])), 1.0)


@keras.saving.register_keras_serializable(package="keras_transformer")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """§5.4 label smoothing, ε_ls = 0.1 by default; mean over real (non-padding) target tokens.

    For ``model.compile(loss=...)`` outside this package's trainer, which uses
    :func:`token_statistics` directly (``train_step.TransformerTrainer``).
    """

    def __init__(self, label_smoothing=0.1, name="label_smoothed_cross_entropy", **kwargs):
        kwargs.pop("reduction", None)
        super().__init__(name=name, reduction="sum", **kwargs)
        self.label_smoothing = label_smoothing

    def call(self, y_true, y_pred):
        stats = token_statistics(y_true, y_pred, self.label_smoothing)  # [B, T, 4]
        return stats[..., SMOOTHED] / global_token_count(stats)  # [B, T]; "sum" reduction -> token mean

    def get_config(self):
        return {"name": self.name, "label_smoothing": self.label_smoothing}


@keras.saving.register_keras_serializable(package="keras_transformer")
class TokenMetrics(keras.metrics.Metric):
    """Running token-weighted means over real target tokens, exact across replicas and batches.

    ``update_state(statistics)`` takes :func:`token_statistics`; ``result()`` is
    {loss, smoothed_loss: smoothed loss per token; nll: un-smoothed NLL per token
    (label smoothing "hurts perplexity", §5.4); perplexity: exp(nll);
    token_accuracy: argmax hits per token}. ``tokens`` is the count so far.
    """

    def __init__(self, name="token_metrics", **kwargs):
        super().__init__(name=name, **kwargs)
        self.sums = self.add_variable(shape=(4,), initializer="zeros", name="sums")  # columns of token_statistics

    def update_state(self, statistics):
        self.sums.assign_add(ops.sum(ops.reshape(statistics, (-1, 4)), axis=0))

    @property
    def tokens(self):
        return self.sums[REAL]

    def result(self):
        mean = self.sums / ops.maximum(self.sums[REAL], 1.0)  # [4]
        return {
            "loss": mean[SMOOTHED],
            "smoothed_loss": mean[SMOOTHED],
            "nll": mean[NLL],
            "perplexity": ops.exp(mean[NLL]),
            "token_accuracy": mean[HIT],
        }

    def reset_state(self):
        self.sums.assign(ops.zeros((4,)))
