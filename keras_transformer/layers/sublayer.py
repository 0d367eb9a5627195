"""The residual connection around every sub-layer (§3.1, §5.4).

post-norm (the paper): LayerNorm(x + Dropout(Sublayer(x)))
pre-norm (a departure, often more stable for deep stacks): x + Dropout(Sublayer(LayerNorm(x)))
"""

from __future__ import annotations

import keras


@keras.saving.register_keras_serializable(package="keras_transformer")
class SublayerConnection(keras.layers.Layer):
    """Wraps a sub-layer's output: ``call(x, sublayer_fn)`` -> [B, N, D]."""

    def __init__(self, dropout=0.1, norm="post", epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.dropout_rate = dropout
        self.norm = norm
        self.epsilon = epsilon
        self.layer_norm = keras.layers.LayerNormalization(epsilon=epsilon, name="layer_norm", dtype=self.dtype_policy)
        self.dropout = keras.layers.Dropout(dropout)

    def build(self, input_shape):
        self.layer_norm.build(input_shape)
        self.built = True

    def call(self, x, sublayer_fn, training=None):
        if self.norm == "pre":
            return x + self.dropout(sublayer_fn(self.layer_norm(x)), training=training)
        return self.layer_norm(x + self.dropout(sublayer_fn(x), training=training))

    def get_config(self):
        config = super().get_config()
        config.update(dropout=self.dropout_rate, norm=self.norm, epsilon=self.epsilon)
        return config
