"""A biaffine bracket score over a sentence's fenceposts: the chart parser's ``ParsingConfig.chart_biaffine``
(``chart.py``), the span scorer of the outside CRF parser (Dozat & Manning, 2017; Zhang et al., 2020). Not in the
paper.

    e_g = [f_g ; b_g]                                            the fencepost vectors            [E]
    l_g = dropout(LeakyReLU_0.1(W_l e_g + c_l)),  r_g = the same with W_r, c_r                    [A] each
    β(i, j) = [l_i ; 1]ᵀ U r_j                                   U [A+1, A], zeros at first

U starts at zeros, so a parser that adds β to its span scores starts from the scores without it.
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class BiaffineBracket(keras.layers.Layer):
    """(e [B, N+1, E], pairs [M, 2] int32: spans (i, j)) -> β [B, M] float32 at those spans (module docstring);
    ``width`` A, ``dropout`` on l and r."""

    def __init__(self, width: int, dropout: float, **kwargs):
        super().__init__(**kwargs)
        self.width, self.dropout = width, dropout
        self.left = keras.layers.Dense(width, name="left")  # W_l, c_l
        self.right = keras.layers.Dense(width, name="right")  # W_r, c_r
        self.drop = keras.layers.Dropout(dropout, name="dropout")

    def build(self, input_shape):
        self.left.build(input_shape)
        self.right.build(input_shape)
        self.weight = self.add_weight(shape=(self.width + 1, self.width), initializer="zeros", name="weight")  # U

    def call(self, e, pairs, training=None):
        l, r = (self.drop(ops.leaky_relu(dense(e), negative_slope=0.1), training=training)
                for dense in (self.left, self.right))  # [B, N+1, A] each
        l = tf.concat([l, tf.ones_like(l[..., :1])], axis=-1)  # [B, N+1, A+1]
        beta = tf.einsum("bia,ac,bjc->ijb", l, ops.cast(self.weight, l.dtype), r)  # [N+1 (i), N+1 (j), B]
        return ops.cast(tf.transpose(tf.gather_nd(beta, pairs)), "float32")

    def get_config(self):
        return {**super().get_config(), "width": self.width, "dropout": self.dropout}


def parameters(fenceposts: int, width: int) -> int:
    """The layer's weights for fencepost vectors of ``fenceposts`` and ``width`` A (0: none): W_l, c_l, W_r, c_r, U."""
    return 2 * (fenceposts + 1) * width + (width + 1) * width
