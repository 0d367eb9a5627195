"""Position-wise feed-forward network (§3.3, Eq. 2).

    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2,   W_1 in R^{d_model x d_ff}, W_2 in R^{d_ff x d_model}
"""

from __future__ import annotations

import keras


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionwiseFeedForward(keras.layers.Layer):
    """Eq. 2. ``relu_dropout`` (on the hidden activations) is not in the paper; 0 disables it."""

    def __init__(self, d_model, d_ff, relu_dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.d_ff = d_ff
        self.relu_dropout = relu_dropout
        self.inner = keras.layers.Dense(d_ff, activation="relu", name="inner", dtype=self.dtype_policy)  # W_1, b_1
        self.outer = keras.layers.Dense(d_model, name="outer", dtype=self.dtype_policy)  # W_2, b_2
        self.dropout = keras.layers.Dropout(relu_dropout) if relu_dropout > 0 else None

    def build(self, input_shape):
        self.inner.build(input_shape)
        self.outer.build(tuple(input_shape[:-1]) + (self.d_ff,))
        self.built = True

    def call(self, x, training=None):
        h = self.inner(x)  # [B, N, d_ff]
        if self.dropout is not None:
            h = self.dropout(h, training=training)
        return self.outer(h)  # [B, N, D]

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, d_ff=self.d_ff, relu_dropout=self.relu_dropout)
        return config
