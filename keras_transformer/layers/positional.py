"""Positional encodings (§3.5) added to the embeddings.

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

Sine and cosine are interleaved exactly as the formula reads (even dimensions
sine, odd dimensions cosine). ``LearnedPositionalEmbedding`` is Table 3 row (E).
Both take ``(x, start)`` and add the encodings of positions start .. start+N-1,
so incremental decoding can add the encoding of one position at a time.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import ops


def sinusoid_table(max_length: int, d_model: int) -> np.ndarray:
    """[max_length, d_model] float32 table of §3.5."""
    pos = np.arange(max_length, dtype=np.float64)[:, None]  # [L, 1]
    two_i = np.arange(0, d_model, 2, dtype=np.float64)[None, :]  # [1, ceil(D/2)]
    angles = pos / np.power(10000.0, two_i / d_model)  # [L, ceil(D/2)]
    table = np.zeros((max_length, d_model), dtype=np.float64)
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : d_model // 2])
    return table.astype(np.float32)


class _PositionalBase(keras.layers.Layer):
    def __init__(self, max_length, d_model, **kwargs):
        super().__init__(**kwargs)
        self.max_length = max_length
        self.d_model = d_model

    def _table(self):
        raise NotImplementedError

    def call(self, x, start=0):
        """x [B, N, D] -> x + PE[start : start + N]."""
        positions = ops.arange(ops.shape(x)[1]) + start  # [N]
        pe = ops.take(self._table(), positions, axis=0)  # [N, D]
        return x + ops.cast(pe, x.dtype)[None, :, :]

    def get_config(self):
        config = super().get_config()
        config.update(max_length=self.max_length, d_model=self.d_model)
        return config


@keras.saving.register_keras_serializable(package="keras_transformer")
class SinusoidalPositionalEncoding(_PositionalBase):
    """Fixed sinusoids (§3.5); no trainable weights."""

    def build(self, input_shape=None):
        self._sinusoids = ops.convert_to_tensor(sinusoid_table(self.max_length, self.d_model))
        self.built = True

    def _table(self):
        return self._sinusoids


@keras.saving.register_keras_serializable(package="keras_transformer")
class LearnedPositionalEmbedding(_PositionalBase):
    """Learned positional embeddings (Table 3 row E: "nearly identical results")."""

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_length, self.d_model),
            initializer=keras.initializers.RandomNormal(stddev=self.d_model**-0.5),
        )
        self.built = True

    def _table(self):
        return self.embeddings


def make_positional(kind: str, max_length: int, d_model: int, name: str):
    cls = {"sinusoidal": SinusoidalPositionalEncoding, "learned": LearnedPositionalEmbedding}[kind]
    return cls(max_length, d_model, name=name)
