"""Scaled dot-product attention (§3.2.1, Eq. 1) and multi-head attention (§3.2.2).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V                    (Eq. 1)
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
        head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Masks are explicit boolean tensors broadcastable to [B, H, T, S], True where a
query may attend to a key (see ``masks.py``). Incremental decoding works on
rows, one new position per row ([N, D]): its self-attention key/value cache
grows by one position per step ([N, H, t, d_k] -> [N, H, t + 1, d_k]), so a
step attends over, and copies, only the positions decoded so far; its cost
follows the tokens decoded, not the longest output allowed.
"""

from __future__ import annotations


import keras
from keras import ops

# Large negative logit for masked positions; finite so fully masked rows stay NaN-free.
_MASKED_LOGIT = -1e9


def scaled_dot_product_attention(q, k, v, mask=None, dropout=None, training=None):
    """Eq. 1. q [B, H, T, d_k], k [B, H, S, d_k], v [B, H, S, d_v] -> ([B, H, T, d_v], [B, H, T, S])."""
    d_k = ops.shape(q)[-1]
    logits = ops.einsum("bhtd,bhsd->bhts", q, k) / ops.sqrt(ops.cast(d_k, q.dtype))  # [B, H, T, S]
    logits = ops.cast(logits, "float32")  # softmax in float32, also under mixed precision
    if mask is not None:
        logits = ops.where(mask, logits, _MASKED_LOGIT)
    weights = ops.softmax(logits, axis=-1)  # [B, H, T, S]
    weights = ops.cast(weights, v.dtype)
    if dropout is not None:
        weights = dropout(weights, training=training)
    return ops.einsum("bhts,bhsd->bhtd", weights, v), weights  # [B, H, T, d_v]


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(keras.layers.Layer):
    """§3.2.2 with h heads; d_k = d_v = d_model / h unless given (Table 3 row B).

    Public paths, each with one return signature:
      ``call(query, memory, mask)``            -> [B, T, D]
      ``project_key_value(memory)``            -> (k [B, H, S, d_k], v [B, H, S, d_v])
      ``attend(query, k, v, mask)``            -> [B, T, D]   (precomputed keys/values)
      ``attention_weights(query, memory, mask)`` -> [B, H, T, S] (for plots)
      ``attend_rows(x, k, v, mask)``         -> [N, D]      (one query per row, rows grouped per memory row)
      ``self_attend_step(x, cache_k, cache_v, qkv)`` -> ([N, D], k, v one position longer)
      ``self_attend_at(x, cache_k, cache_v, step, qkv)`` -> ([N, D], k, v with position step written)
    """

    def __init__(self, d_model, num_heads, d_k=None, d_v=None, attention_dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_k if d_k is not None else d_model // num_heads
        self.d_v = d_v if d_v is not None else d_model // num_heads
        self.attention_dropout = attention_dropout
        dense = dict(kernel_initializer="glorot_uniform", dtype=self.dtype_policy)
        # W^Q, W^K in R^{d_model x h d_k}; W^V in R^{d_model x h d_v}; W^O in R^{h d_v x d_model}.
        self.query_dense = keras.layers.Dense(num_heads * self.d_k, name="query", **dense)
        self.key_dense = keras.layers.Dense(num_heads * self.d_k, name="key", **dense)
        self.value_dense = keras.layers.Dense(num_heads * self.d_v, name="value", **dense)
        self.output_dense = keras.layers.Dense(d_model, name="output", **dense)
        self.dropout = keras.layers.Dropout(attention_dropout) if attention_dropout > 0 else None

    def build(self, query_shape, memory_shape=None, mask_shape=None):
        memory_shape = memory_shape or query_shape
        self.query_dense.build(query_shape)
        self.key_dense.build(memory_shape)
        self.value_dense.build(memory_shape)
        self.output_dense.build(tuple(query_shape[:-1]) + (self.num_heads * self.d_v,))
        self.built = True

    def _split_heads(self, x, depth):
        b, n = ops.shape(x)[0], ops.shape(x)[1]
        x = ops.reshape(x, (b, n, self.num_heads, depth))  # [B, N, H, depth]
        return ops.transpose(x, (0, 2, 1, 3))  # [B, H, N, depth]

    def _merge_heads(self, x):
        b, n = ops.shape(x)[0], ops.shape(x)[2]
        x = ops.transpose(x, (0, 2, 1, 3))  # [B, T, H, d_v]
        return ops.reshape(x, (b, n, self.num_heads * self.d_v))  # [B, T, H d_v]

    def project_key_value(self, memory):
        k = self._split_heads(self.key_dense(memory), self.d_k)  # [B, H, S, d_k]
        v = self._split_heads(self.value_dense(memory), self.d_v)  # [B, H, S, d_v]
        return k, v

    def attend(self, query, k, v, mask=None, training=None):
        q = self._split_heads(self.query_dense(query), self.d_k)  # [B, H, T, d_k]
        heads, _ = scaled_dot_product_attention(q, k, v, mask, self.dropout, training)
        return self.output_dense(self._merge_heads(heads))  # [B, T, D]

    def call(self, query, memory, mask=None, training=None):
        k, v = self.project_key_value(memory)
        return self.attend(query, k, v, mask, training)

    def attention_weights(self, query, memory, mask=None):
        q = self._split_heads(self.query_dense(query), self.d_k)
        k, v = self.project_key_value(memory)
        _, weights = scaled_dot_product_attention(q, k, v, mask)
        return weights  # [B, H, T, S]

    def _rows_to_heads(self, x, depth):
        """[N, H depth] -> [N, H, 1, depth]: one position per row (no transpose needed)."""
        return ops.reshape(x, (-1, self.num_heads, 1, depth))

    def _heads_to_rows(self, heads):
        """[N, H, 1, d_v] (or [B, G, H, d_v], N = B G) -> [N, D] through W^O."""
        return self.output_dense(ops.reshape(heads, (-1, self.num_heads * self.d_v)))

    def attend_rows(self, x, k, v, mask=None):
        """One query per row (decoding), G = N / B consecutive rows per memory row (the K beams of an item).

        x [N, D]; k [B, H, S, d_k], v [B, H, S, d_v], mask [B, 1, 1, S] -> [N, D]. The G queries of a memory
        row attend together ([G, d_k] x [d_k, S] per head), so the memory is never repeated per beam.
        """
        b = ops.shape(k)[0]
        q = ops.reshape(self.query_dense(x), (b, -1, self.num_heads, self.d_k))  # [B, G, H, d_k]
        heads, _ = scaled_dot_product_attention(ops.transpose(q, (0, 2, 1, 3)), k, v, mask)  # [B, H, G, d_v]
        return self._heads_to_rows(ops.transpose(heads, (0, 2, 1, 3)))  # [N, D]

    def fused_qkv(self, dtype="float32"):
        """(kernel [D, H (2 d_k + d_v)], bias): W^Q, W^K, W^V side by side, for ``self_attend_step``."""
        dense = (self.query_dense, self.key_dense, self.value_dense)
        return (ops.concatenate([ops.cast(d.kernel, dtype) for d in dense], axis=1),
                ops.concatenate([ops.cast(d.bias, dtype) for d in dense], axis=0))

    def _project_qkv(self, x, qkv=None):
        """x [N, D] -> q [N, H d_k], k [N, H d_k], v [N, H d_v] in one matmul with ``qkv = fused_qkv()`` (computed
        here when None). ``ops.add`` writes the bias as a ``BiasAdd``, which TensorFlow fuses into the matmul (one
        kernel, the same sums); ``+`` would be a separate broadcast add."""
        kernel, bias = qkv if qkv is not None else self.fused_qkv(x.dtype)
        split = (self.num_heads * self.d_k, 2 * self.num_heads * self.d_k)
        return ops.split(ops.add(ops.matmul(x, kernel), bias), split, axis=1)

    def self_attend_step(self, x, cache_k, cache_v, qkv=None):
        """Self-attention of one new position per row over the earlier positions and itself (decoding).

        x [N, D]; cache_k [N, H, t, d_k], cache_v [N, H, t, d_v] -> (out [N, D], k [N, H, t + 1, d_k],
        v [N, H, t + 1, d_v]). Q, K and V: ``_project_qkv`` (a decoder computes ``qkv`` once before its steps).
        Nothing is masked: every cached position is earlier.
        """
        q, k, v = self._project_qkv(x, qkv)  # [N, H d_k], [N, H d_k], [N, H d_v]
        k = ops.concatenate([cache_k, self._rows_to_heads(k, self.d_k)], axis=2)  # [N, H, t + 1, d_k]
        v = ops.concatenate([cache_v, self._rows_to_heads(v, self.d_v)], axis=2)  # [N, H, t + 1, d_v]
        heads, _ = scaled_dot_product_attention(self._rows_to_heads(q, self.d_k), k, v)  # [N, H, 1, d_v]
        return self._heads_to_rows(heads), k, v

    def self_attend_at(self, x, cache_k, cache_v, step, qkv=None):
        """``self_attend_step`` on a preallocated cache of static shape (an XLA-compiled search).

        x [N, D]; cache_k [N, H, T_max, d_k], cache_v [N, H, T_max, d_v]; step: scalar position < T_max ->
        (out [N, D], k, v [N, H, T_max, d] with this position written at ``step``). Positions after ``step``
        are masked; their weights are exactly 0, so the output equals ``self_attend_step``'s up to rounding.
        """
        q, k, v = self._project_qkv(x, qkv)  # [N, H d_k], [N, H d_k], [N, H d_v]
        positions = ops.arange(ops.shape(cache_k)[2])  # [T_max]
        at_step = ops.equal(positions, step)[None, None, :, None]  # [1, 1, T_max, 1]
        k = ops.where(at_step, self._rows_to_heads(k, self.d_k), cache_k)  # [N, H, T_max, d_k]
        v = ops.where(at_step, self._rows_to_heads(v, self.d_v), cache_v)  # [N, H, T_max, d_v]
        mask = ops.less_equal(positions, step)[None, None, None, :]  # [1, 1, 1, T_max]
        heads, _ = scaled_dot_product_attention(self._rows_to_heads(q, self.d_k), k, v, mask)  # [N, H, 1, d_v]
        return self._heads_to_rows(heads), k, v

    def get_config(self):
        config = super().get_config()
        config.update(
            d_model=self.d_model,
            num_heads=self.num_heads,
            d_k=self.d_k,
            d_v=self.d_v,
            attention_dropout=self.attention_dropout,
        )
        return config
