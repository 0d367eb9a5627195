"""The decoder (§3.1): N layers of masked self-attention, encoder-decoder attention and FFN.

Besides the full (teacher-forced) pass, ``step`` runs one target position at a
time against a key/value cache, on rows [N, D] (one hypothesis each; N = B*K
under beam search, an item's K beams adjacent): the decoder's self-attention
keys/values grow by one position per step, and the encoder-decoder
keys/values are computed once from the memory (``init_cache``), one row per
item, shared by its K beams (never repeated per hypothesis). Given ``step``,
the self-attention cache is instead preallocated to T_max positions and
written in place (``MultiHeadAttention.self_attend_at``): static shapes, for
an XLA-compiled search.
"""

from __future__ import annotations

import keras
from keras import ops

from keras_transformer.layers.encoder import BlockBase, StackBase


@keras.saving.register_keras_serializable(package="keras_transformer")
class DecoderLayer(BlockBase):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.self_attention = self._attention("self_attention")
        self.cross_attention = self._attention("cross_attention")
        self.ffn = self._ffn()
        self.self_attention_residual = self._sublayer("self_attention_residual")
        self.cross_attention_residual = self._sublayer("cross_attention_residual")
        self.ffn_residual = self._sublayer("ffn_residual")

    def call(self, y, memory, self_mask, memory_mask, training=None):
        """y [B, T, D], memory [B, S, D], self_mask [B, 1, T, T], memory_mask [B, 1, 1, S] -> [B, T, D]."""
        y = self.self_attention_residual(
            y, sublayer_fn=lambda h: self.self_attention(h, h, self_mask, training=training), training=training)
        y = self.cross_attention_residual(
            y, sublayer_fn=lambda h: self.cross_attention(h, memory, memory_mask, training=training), training=training)
        return self.ffn_residual(y, sublayer_fn=lambda h: self.ffn(h, training=training), training=training)

    def step(self, y, cache, memory_mask, step=None):
        """One position per row. y [N, D]; cache: k, v [N, H, t, d], memory_k, memory_v [B, H, S, d], qkv.

        memory_mask [B, 1, 1, S]; N = B*K, rows j*K..j*K+K-1 read memory row j. Returns (y [N, D], cache with
        k, v [N, H, t + 1, d]). With ``step`` (scalar), k, v are preallocated [N, H, T_max, d] and come back the
        same shape with position ``step`` written (``self_attend_at``).
        """
        new = dict(cache)
        attention = self.self_attention

        def self_attend(h):
            if step is None:
                out, new["k"], new["v"] = attention.self_attend_step(h, cache["k"], cache["v"], cache.get("qkv"))
            else:
                out, new["k"], new["v"] = attention.self_attend_at(h, cache["k"], cache["v"], step, cache.get("qkv"))
            return out

        y = self.self_attention_residual(y, sublayer_fn=self_attend)
        y = self.cross_attention_residual(y, sublayer_fn=lambda h: self.cross_attention.attend_rows(
            h, cache["memory_k"], cache["memory_v"], memory_mask))
        return self.ffn_residual(y, sublayer_fn=self.ffn), new


@keras.saving.register_keras_serializable(package="keras_transformer")
class Decoder(StackBase):
    layer_class = DecoderLayer

    def call(self, y, memory, self_mask, memory_mask, training=None):
        """y [B, T, D] (embedded shifted target) -> [B, T, D]."""
        for layer in self.blocks:
            y = layer(y, memory, self_mask, memory_mask, training=training)
        return self._finish(y)

    def init_cache(self, memory):
        """A list (one per layer) of dicts: empty self-attention k, v [B, H, 0, d]; memory_k, memory_v [B, H, S, d];
        qkv, the fused self-attention weights (computed once here rather than at every step)."""
        cache = []
        b = ops.shape(memory)[0]
        for layer in self.blocks:
            attn = layer.self_attention
            memory_k, memory_v = layer.cross_attention.project_key_value(memory)  # [B, H, S, d_k], [B, H, S, d_v]
            cache.append({
                "k": ops.zeros((b, attn.num_heads, 0, attn.d_k), dtype=memory_k.dtype),  # [B, H, 0, d_k]
                "v": ops.zeros((b, attn.num_heads, 0, attn.d_v), dtype=memory_v.dtype),  # [B, H, 0, d_v]
                "memory_k": memory_k,
                "memory_v": memory_v,
                "qkv": attn.fused_qkv(memory.dtype),
            })
        return cache

    def step(self, y, cache, memory_mask, step=None):
        """y [N, D], the next position of each row -> ([N, D], updated cache); see ``DecoderLayer.step``."""
        new_cache = []
        for layer, layer_cache in zip(self.blocks, cache):
            y, layer_cache = layer.step(y, layer_cache, memory_mask, step)
            new_cache.append(layer_cache)
        return self._finish(y), new_cache
