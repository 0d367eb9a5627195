"""A bidirectional LSTM over a batch of word sequences, both directions in one loop: the chart parser's fenceposts
with ``ParsingConfig.chart_lstm`` (Stern et al., 2017; Gaddy et al., 2018; ``chart.py``). Not in the paper.

Per direction d (0 forward over words 0..n-1, 1 backward over words n-1..0), the LSTM of Hochreiter & Schmidhuber
(1997) with a forget gate, Keras's gate order and initialisation (``keras.layers.LSTM``):

    [i; f; g; o]_t = x_t W_d + h_{t-1} R_d + b_d                                                   [4U]
    c_t = σ(f) ⊙ c_{t-1} + σ(i) ⊙ tanh(g),   h_t = σ(o) ⊙ tanh(c_t)                                [U]

x W for every word and both directions is one matmul before the loop; the loop does the recurrent half of both
directions at once ([2, B, U] × [2, U, 4U]). The backward direction runs forward over each sentence reversed within
its own length (``tf.reverse_sequence``), so padding comes after the words in both and no step needs a mask;
outputs past a sentence's n are zeros. A Keras ``Bidirectional(LSTM)`` takes a loop per direction, each step also
multiplying x_t W and masking the state: the same outputs (a test holds them equal) in ~twice the loop's ops.
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class BidirectionalLSTM(keras.layers.Layer):
    """(x [B, N, I], lengths [B] int32) -> (forward [B, N, U], backward [B, N, U]); zeros at k >= lengths[b]."""

    def __init__(self, units: int, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        u, width = self.units, input_shape[-1]

        def each_direction(initializer):
            return lambda shape, dtype=None: ops.stack([initializer(shape[1:], dtype) for _ in range(2)])

        self.kernel = self.add_weight(shape=(2, width, 4 * u), name="kernel",
                                      initializer=each_direction(keras.initializers.GlorotUniform()))  # W_d
        self.recurrent_kernel = self.add_weight(shape=(2, u, 4 * u), name="recurrent_kernel",
                                                initializer=each_direction(keras.initializers.Orthogonal()))  # R_d
        self.bias = self.add_weight(shape=(2, 4 * u), name="bias", initializer=lambda shape, dtype=None: ops.tile(
            ops.concatenate([ops.zeros((u,)), ops.ones((u,)), ops.zeros((2 * u,))])[None, :], [2, 1]))  # f: 1

    def call(self, x, lengths):
        batch, n = tf.shape(x)[0], tf.shape(x)[1]
        lengths = tf.cast(lengths, tf.int32)
        both = tf.stack([x, tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)])  # [2, B, N, I]
        gates_in = tf.einsum("dbni,dig->ndbg", both, ops.cast(self.kernel, x.dtype)) + ops.cast(
            self.bias, x.dtype)[None, :, None, :]  # [N, 2, B, 4U]: x_t W_d + b_d, time major
        recurrent = ops.cast(self.recurrent_kernel, x.dtype)
        zeros = tf.zeros([2, batch, self.units], x.dtype)

        def step(t, h, c, outputs):
            i, f, g, o = tf.split(gates_in[t] + tf.matmul(h, recurrent), 4, axis=-1)  # [2, B, U] each
            c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
            h = tf.sigmoid(o) * tf.tanh(c)
            return t + 1, h, c, outputs.write(t, h)

        _, _, _, outputs = tf.while_loop(lambda t, *_: t < n, step,
                                         (0, zeros, zeros, tf.TensorArray(x.dtype, size=n)))
        h = tf.transpose(outputs.stack(), [1, 2, 0, 3])  # [2, B, N, U]
        present = (tf.range(n)[None, :] < lengths[:, None])[..., None]  # [B, N, 1]
        forward = tf.where(present, h[0], tf.zeros_like(h[0]))
        backward = tf.where(present, tf.reverse_sequence(h[1], lengths, seq_axis=1, batch_axis=0),
                            tf.zeros_like(h[1]))
        return forward, backward

    def get_config(self):
        return {**super().get_config(), "units": self.units}
