"""Shared embedding tied to the pre-softmax projection (§3.4).

"We share the same weight matrix between the two embedding layers and the
pre-softmax linear transformation ... In the embedding layers, we multiply
those weights by sqrt(d_model)."
"""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class SharedEmbedding(keras.layers.Layer):
    """E in R^{V x D}. ``call(ids)`` -> E[ids] * sqrt(D); ``logits(x)`` -> x E^T (no bias); ``transposed()`` -> E^T."""

    def __init__(self, vocab_size, d_model, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.d_model = d_model

    def build(self, ids_shape=None):
        # std d_model^-0.5, so that E * sqrt(d_model) has unit scale (as in tensor2tensor).
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.vocab_size, self.d_model),
            initializer=keras.initializers.RandomNormal(stddev=self.d_model**-0.5),
        )
        self.built = True

    def call(self, ids):
        x = ops.take(self.embeddings, ids, axis=0)  # [B, N, D]
        return x * ops.cast(self.d_model**0.5, x.dtype)

    def transposed(self, dtype="float32"):
        """E^T [D, V], laid out for ``logits``: a decoder computes it once before its steps (a product with a
        stored [D, V] matrix takes ~0.8x the time of one that reads E [V, D] transposed, on a CPU)."""
        return ops.transpose(ops.cast(self.embeddings, dtype))

    def logits(self, x, projection=None):
        """x [..., D] -> [..., V], the pre-softmax linear transformation with E^T (``projection``: E^T as
        ``transposed()`` made it; computed here when None)."""
        return ops.matmul(x, self.transposed(x.dtype) if projection is None else projection)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, d_model=self.d_model)
        return config
