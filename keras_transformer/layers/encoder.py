"""The encoder (§3.1): a stack of N identical layers, each self-attention then FFN."""

from __future__ import annotations

import keras

from keras_transformer.layers.attention import MultiHeadAttention
from keras_transformer.layers.feed_forward import PositionwiseFeedForward
from keras_transformer.layers.sublayer import SublayerConnection

# Hyper-parameters every encoder and decoder layer takes (names follow ModelConfig).
BLOCK_ARGS = ("d_model", "d_ff", "num_heads", "d_k", "d_v", "dropout", "attention_dropout", "relu_dropout", "norm",
              "layer_norm_epsilon")


class BlockBase(keras.layers.Layer):
    """Shared construction and config of encoder and decoder layers (``decoder.DecoderLayer`` too)."""

    def __init__(self, d_model, d_ff, num_heads, d_k=None, d_v=None, dropout=0.1, attention_dropout=0.0,
                 relu_dropout=0.0, norm="post", layer_norm_epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.d_model, self.d_ff, self.num_heads, self.d_k, self.d_v = d_model, d_ff, num_heads, d_k, d_v
        self.dropout, self.attention_dropout, self.relu_dropout = dropout, attention_dropout, relu_dropout
        self.norm, self.layer_norm_epsilon = norm, layer_norm_epsilon

    def _attention(self, name):
        return MultiHeadAttention(self.d_model, self.num_heads, self.d_k, self.d_v, self.attention_dropout, name=name,
                                  dtype=self.dtype_policy)

    def _ffn(self):
        return PositionwiseFeedForward(self.d_model, self.d_ff, self.relu_dropout, name="ffn", dtype=self.dtype_policy)

    def _sublayer(self, name):
        return SublayerConnection(self.dropout, self.norm, self.layer_norm_epsilon, name=name, dtype=self.dtype_policy)

    def build(self, input_shape):
        """Build every sub-layer here (not inside the residual wrappers), so weights get flat paths."""
        for sublayer in self._own_sublayers:
            if isinstance(sublayer, MultiHeadAttention):
                sublayer.build(input_shape, input_shape)
            else:
                sublayer.build(input_shape)
        self.built = True

    @property
    def _own_sublayers(self):
        return [v for v in vars(self).values() if isinstance(v, keras.layers.Layer)]

    def get_config(self):
        config = super().get_config()
        config.update({name: getattr(self, name) for name in BLOCK_ARGS})
        return config


@keras.saving.register_keras_serializable(package="keras_transformer")
class EncoderLayer(BlockBase):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.self_attention = self._attention("self_attention")
        self.ffn = self._ffn()
        self.self_attention_residual = self._sublayer("self_attention_residual")
        self.ffn_residual = self._sublayer("ffn_residual")

    def call(self, x, mask, training=None):
        """x [B, S, D], mask [B, 1, 1, S] -> [B, S, D]."""
        x = self.self_attention_residual(
            x, sublayer_fn=lambda h: self.self_attention(h, h, mask, training=training), training=training)
        return self.ffn_residual(x, sublayer_fn=lambda h: self.ffn(h, training=training), training=training)


class StackBase(keras.layers.Layer):
    """N layers; under pre-norm a final LayerNorm closes the stack."""

    layer_class = None

    def __init__(self, num_layers, **block_kwargs):
        kwargs = {k: block_kwargs.pop(k) for k in list(block_kwargs) if k not in BLOCK_ARGS}
        super().__init__(**kwargs)
        self.num_layers = num_layers
        self.block_kwargs = block_kwargs
        # One attribute per layer (not a list): tf.train.Checkpoint tracks attributes, not Keras-wrapped lists.
        for i in range(num_layers):
            setattr(self, f"layer_{i}", self.layer_class(**block_kwargs, name=f"layer_{i}", dtype=self.dtype_policy))
        self.final_norm = None
        if block_kwargs.get("norm", "post") == "pre":
            self.final_norm = keras.layers.LayerNormalization(
                epsilon=block_kwargs.get("layer_norm_epsilon", 1e-6), name="final_norm", dtype=self.dtype_policy)

    @property
    def blocks(self):
        """The N layers, bottom to top."""
        return [getattr(self, f"layer_{i}") for i in range(self.num_layers)]

    def _finish(self, x):
        return self.final_norm(x) if self.final_norm is not None else x

    def get_config(self):
        config = super().get_config()
        config.update(num_layers=self.num_layers, **self.block_kwargs)
        return config


@keras.saving.register_keras_serializable(package="keras_transformer")
class Encoder(StackBase):
    layer_class = EncoderLayer

    def call(self, x, mask, training=None):
        """x [B, S, D] (embedded source), mask [B, 1, 1, S] -> memory [B, S, D]."""
        for layer in self.blocks:
            x = layer(x, mask, training=training)
        return self._finish(x)
