"""The Transformer (§3, Figure 1) as a subclassed ``keras.Model``.

    call((source_ids [B, S], target_in_ids [B, T]))  -> logits [B, T, V]
    encode(source_ids)                               -> memory [B, S, D]
    init_cache(memory)                               -> per-layer key/value cache
    decode_step(token_ids [N], step, cache, memory_mask) -> (logits [N, V], cache)   N = B or B*K

Source and target share one embedding matrix, which is also the pre-softmax
projection (§3.4); with ``shared_vocabulary=False`` (not in the paper) the source
has its own embedding over its own vocabulary and the target's matrix is the
projection's (Press & Wolf, 2017). Dropout is applied to the sums of embeddings and positional
encodings (§5.4). Logits are float32 also under mixed precision.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Union

import keras
from keras import ops

from keras_transformer.config import ModelConfig
from keras_transformer.layers import masks
from keras_transformer.layers.decoder import Decoder
from keras_transformer.layers.embedding import SharedEmbedding
from keras_transformer.layers.encoder import BLOCK_ARGS, Encoder
from keras_transformer.layers.positional import make_positional


@keras.saving.register_keras_serializable(package="keras_transformer")
class Transformer(keras.Model):
    def __init__(self, config: Union[ModelConfig, dict], **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = ModelConfig(**config)
        self.config = config
        c = config
        block = {name: getattr(c, name) for name in BLOCK_ARGS if name not in ("d_k", "d_v")}
        block.update(d_k=c.key_dim, d_v=c.value_dim)
        self.embedding = SharedEmbedding(c.vocab_size, c.d_model, name="shared_embedding")  # the target's too
        if not c.shared_vocabulary:  # created after the shared one: a shared model's variables keep their order
            self.own_source_embedding = SharedEmbedding(c.vocab_size, c.d_model, name="source_embedding")
        self.positional = make_positional(c.positional, c.max_length, c.d_model, name="positional")
        self.embedding_dropout = keras.layers.Dropout(c.dropout, name="embedding_dropout")
        self.encoder = Encoder(c.num_encoder_layers, **block, name="encoder")
        self.decoder = Decoder(c.num_decoder_layers, **block, name="decoder")

    # -- the full (teacher-forced) pass ----------------------------------------------------------

    @property
    def source_embedding(self) -> SharedEmbedding:
        """The source side's E: the shared one (§3.4) or, with separate vocabularies, its own."""
        return self.embedding if self.config.shared_vocabulary else self.own_source_embedding

    def _embed(self, ids, start=0, training=None, embedding=None):
        """ids [B, N] -> dropout(E[ids] sqrt(D) + PE[start:start+N]) [B, N, D]; E the target's unless given."""
        x = self.positional((self.embedding if embedding is None else embedding)(ids), start=start)
        return self.embedding_dropout(x, training=training)

    def encode(self, source_ids, training=None):
        """source_ids [B, S] -> memory [B, S, D]."""
        x = self._embed(source_ids, training=training, embedding=self.source_embedding)
        return self.encoder(x, masks.padding_mask(source_ids), training=training)

    def decode(self, target_in_ids, memory, memory_mask, training=None):
        """target_in_ids [B, T], memory [B, S, D], memory_mask [B, 1, 1, S] -> logits [B, T, V]."""
        y = self._embed(target_in_ids, training=training)
        y = self.decoder(y, memory, masks.decoder_self_mask(target_in_ids), memory_mask, training=training)
        return ops.cast(self.embedding.logits(y), "float32")

    def call(self, inputs, training=None):
        source_ids, target_in_ids = inputs
        memory = self.encode(source_ids, training=training)
        return self.decode(target_in_ids, memory, masks.padding_mask(source_ids), training=training)

    # -- incremental decoding --------------------------------------------------------------------

    def init_cache(self, memory):
        """memory [B, S, D] -> per-layer cache: empty self-attention keys/values, projected memory."""
        return self.decoder.init_cache(memory)

    def decode_step(self, token_ids, step, cache, memory_mask):
        """token_ids [N] at position ``step`` (scalar) -> (logits [N, V] float32, cache one position longer).

        ``cache`` k, v have N rows; its memory_k, memory_v and ``memory_mask`` one row per item (B rows,
        N = B*K, an item's K hypotheses adjacent; ``DecoderLayer.step``).
        """
        y = self._embed(token_ids[:, None], start=step)[:, 0, :]  # [N, D]
        y, cache = self.decoder.step(y, cache, memory_mask)
        logits = self.embedding.logits(y)  # [N, V]
        return ops.cast(logits, "float32"), cache

    # -- attention maps for plots (an explicit, separate path) -----------------------------------

    def attention_maps(self, source_ids, target_in_ids):
        """Returns {"encoder": [L x [B, H, S, S]], "decoder": [L x [B, H, T, T]], "cross": [L x [B, H, T, S]]}."""
        source_mask = masks.padding_mask(source_ids)
        self_mask = masks.decoder_self_mask(target_in_ids)
        maps = {"encoder": [], "decoder": [], "cross": []}
        x = self._embed(source_ids, embedding=self.source_embedding)
        for layer in self.encoder.blocks:
            maps["encoder"].append(layer.self_attention.attention_weights(x, x, source_mask))
            x = layer(x, source_mask)
        memory = self.encoder._finish(x)
        y = self._embed(target_in_ids)
        for layer in self.decoder.blocks:
            maps["decoder"].append(layer.self_attention.attention_weights(y, y, self_mask))
            h = layer.self_attention_residual(y, sublayer_fn=lambda z: layer.self_attention(z, z, self_mask))
            maps["cross"].append(layer.cross_attention.attention_weights(h, memory, source_mask))
            y = layer(y, memory, self_mask, source_mask)
        return maps

    # -- Keras plumbing --------------------------------------------------------------------------

    def build(self, input_shape=None):
        """Create every weight by running the model once on a tiny batch (makes .keras reload work)."""
        if self.built:
            return
        ids = ops.ones((1, 2), dtype="int32")
        self.call((ids, ids), training=False)
        self.built = True

    def get_build_config(self):
        return {"built": True}

    def build_from_config(self, config):
        self.build()

    def get_config(self):
        config = super().get_config()
        config["config"] = dataclasses.asdict(self.config)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        model_config = config.pop("config")
        return cls(model_config, **{k: v for k, v in config.items() if k in ("name", "trainable", "dtype")})


def build_model(config: ModelConfig, dtype_policy: Optional[str] = None) -> Transformer:
    """A built ``Transformer`` (all weights created), under Keras's global dtype policy or ``dtype_policy``
    (e.g. "bfloat16": bfloat16 weights and compute, the attention and output softmaxes still in float32)."""
    previous = keras.config.dtype_policy()
    if dtype_policy is not None:
        keras.config.set_dtype_policy(dtype_policy)  # layers take the global policy as they are created
    try:
        model = Transformer(config, name="transformer")
        model.build()
    finally:
        keras.config.set_dtype_policy(previous)
    return model


def count_parameters(config: ModelConfig) -> int:
    """Closed-form trainable parameter count of the architecture (biases included, tied softmax).

    attention: W^Q, W^K (D x h d_k + h d_k each), W^V (D x h d_v + h d_v), W^O (h d_v x D + D)
    FFN (Eq. 2): D d_ff + d_ff + d_ff D + D;  LayerNorm: 2D;  embedding: V D (shared, §3.4; twice if not)
    """
    D, h, dk, dv = config.d_model, config.num_heads, config.key_dim, config.value_dim
    attention = 2 * (D * h * dk + h * dk) + (D * h * dv + h * dv) + (h * dv * D + D)
    ffn = D * config.d_ff + config.d_ff + config.d_ff * D + D
    norm = 2 * D
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = 2 * attention + ffn + 3 * norm
    embeddings = 1 if config.shared_vocabulary else 2
    total = (embeddings * config.vocab_size * D + config.num_encoder_layers * encoder_layer
             + config.num_decoder_layers * decoder_layer)
    if config.positional == "learned":
        total += config.max_length * D
    if config.norm == "pre":
        total += 2 * norm  # final LayerNorm of each stack
    return total
