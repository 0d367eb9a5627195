"""The Transformer (§3, Figure 1) as a subclassed ``keras.Model``.

    call((source_ids [B, S], target_in_ids [B, T]))  -> logits [B, T, V]
    encode(source_ids)                               -> memory [B, S, D]
    init_cache(memory)                               -> per-layer key/value cache
    decode_step(token_ids [N], step, cache, memory_mask, aligned=None, projection=None, preallocated=False)
                                                     -> (logits [N, V], cache)   N = B or B*K

With ``align_words`` (parsing, §6.3; not in the paper) the decoder input at
each position also holds P · memory[word k], k the leaves written before it
(``word_memory``, ``aligned_inputs``, ``aligned_step``): the decoder is told
which word its next leaf stands for instead of counting them (Ma et al., 2017;
Liu, Zhu & Shi, 2018); with ``word_span`` also the outputs at the last piece of
word k and of word k-1, the gap before word k (Stern et al., 2017); with
``bracket_depth`` also a learned embedding of the brackets open after the
prefix (the depth the constrained search tracks), which a decoder attending over
a long prefix otherwise has to count. With ``tag_loss`` training also scores
``word_tag_logits``: the encoder output at word k's first piece alone guessing
the leaf (POS tag) the decoder writes for it.

Source and target share one embedding matrix, which is also the pre-softmax
projection (§3.4); with ``shared_vocabulary=False`` (not in the paper) the source
has its own embedding over its own vocabulary and the target's matrix is the
projection's (Press & Wolf, 2017). Dropout is applied to the sums of embeddings and positional
encodings (§5.4); with ``source_token_dropout`` (not in the paper) training also reads each source piece as
UNK with that probability (``read_as_unknown``; with ``source_token_dropout_alpha`` a rarer piece more often),
and with ``target_token_dropout`` each decoder input piece (its word alignment read from the real pieces).
Logits are float32 also under mixed precision.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Union

import keras
from keras import ops

from keras_transformer import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from keras_transformer.config import ModelConfig
from keras_transformer.layers import masks
from keras_transformer.layers.decoder import Decoder
from keras_transformer.layers.embedding import SharedEmbedding
from keras_transformer.layers.encoder import BLOCK_ARGS, Encoder
from keras_transformer.layers.positional import make_positional

MAX_DEPTH = 64  # bracket_depth: depths from here on share the last row of the depth embedding


def _text(source_ids):
    """source_ids [B, S] -> [B, S] bool: the sentence's pieces (not PAD, not EOS)."""
    return ops.logical_and(ops.not_equal(source_ids, PAD_ID), ops.not_equal(source_ids, EOS_ID))


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
        if c.align_words:
            # P [D, D], or [3D, D] with word_span
            self.alignment = keras.layers.Dense(c.d_model, use_bias=False, name="word_alignment")
            # [2, V]: row 0 a piece is a leaf of the target, row 1 it starts a word of the source; with
            # bracket_depth [3, V], row 2 what the piece adds to the depth: +1 opens, -1 closes (set_word_tables)
            self.word_tables = self.add_weight(shape=(3 if c.bracket_depth else 2, c.vocab_size),
                                               initializer="zeros", trainable=False, name="word_tables")
        if c.bracket_depth:
            self.depth_embedding = keras.layers.Embedding(MAX_DEPTH, c.d_model, name="bracket_depth")  # [64, D]
        if c.source_token_dropout or c.source_token_dropout_alpha:  # created last: the other seeds stay as before
            self.token_dropout_seed = keras.random.SeedGenerator(name="source_token_dropout")
        if c.target_token_dropout:  # after the source's: a model without it draws as before
            self.target_dropout_seed = keras.random.SeedGenerator(name="target_token_dropout")
        if c.source_token_dropout_alpha:  # [V] each piece's count c in the training sources (set_piece_counts)
            # float32 under any policy: bfloat16 would neither hold the counts nor compare with the draws
            self.piece_counts = self.add_weight(shape=(c.vocab_size,), initializer="zeros", dtype="float32",
                                                trainable=False, autocast=False, name="source_piece_counts")
        if c.tag_loss:  # W_tag [D, D]; built last (build()): the other weights start as without it
            self.word_tagger = keras.layers.Dense(c.d_model, use_bias=False, name="word_tagger")

    # -- the full (teacher-forced) pass ----------------------------------------------------------

    @property
    def source_embedding(self) -> SharedEmbedding:
        """The source side's E: the shared one (§3.4) or, with separate vocabularies, its own."""
        return self.embedding if self.config.shared_vocabulary else self.own_source_embedding

    def _embed(self, ids, start=0, training=None, embedding=None, aligned=None):
        """ids [B, N] -> dropout(E[ids] sqrt(D) + PE[start:start+N] (+ aligned [B, N, D])) [B, N, D]; E the
        target's unless given."""
        x = self.positional((self.embedding if embedding is None else embedding)(ids), start=start)
        if aligned is not None:
            x = x + ops.cast(aligned, x.dtype)
        return self.embedding_dropout(x, training=training)

    @property
    def _source_token_dropout(self) -> bool:
        return bool(self.config.source_token_dropout or self.config.source_token_dropout_alpha)

    def read_as_unknown(self, ids, side="source"):
        """ids [B, S] -> [B, S]: each piece UNK with probability ``source_token_dropout``, or alpha / (alpha + c)
        for a piece seen c times with ``source_token_dropout_alpha`` (``side="target"``: ``target_token_dropout``);
        PAD, BOS and EOS kept."""
        c = self.config
        rate, seed = ((c.source_token_dropout, self.token_dropout_seed) if side == "source" else
                      (c.target_token_dropout, self.target_dropout_seed))
        if side == "source" and c.source_token_dropout_alpha:
            rate = c.source_token_dropout_alpha / (c.source_token_dropout_alpha + ops.take(self.piece_counts, ids))
        drop = keras.random.uniform(ops.shape(ids), seed=seed) < rate  # [B, S]
        drop = ops.logical_and(ops.logical_and(drop, _text(ids)), ops.not_equal(ids, BOS_ID))
        return ops.where(drop, ops.cast(UNK_ID, ids.dtype), ids)

    def encode(self, source_ids, training=None):
        """source_ids [B, S] -> memory [B, S, D]; the mask (and the word tables) read the real pieces."""
        read = self.read_as_unknown(source_ids) if training and self._source_token_dropout else source_ids
        x = self._embed(read, training=training, embedding=self.source_embedding)
        return self.encoder(x, masks.padding_mask(source_ids), training=training)

    def decode(self, target_in_ids, memory, memory_mask, training=None, words=None):
        """target_in_ids [B, T], memory [B, S, D], memory_mask [B, 1, 1, S] -> logits [B, T, V].

        ``words`` [B, S, D]: ``word_memory``, given exactly when the model aligns words."""
        aligned = None if words is None else self.aligned_inputs(target_in_ids, words)
        read = (self.read_as_unknown(target_in_ids, side="target") if training and self.config.target_token_dropout
                else target_in_ids)
        y = self._embed(read, training=training, aligned=aligned)
        y = self.decoder(y, memory, masks.decoder_self_mask(target_in_ids), memory_mask, training=training)
        return ops.cast(self.embedding.logits(y), "float32")

    def call(self, inputs, training=None):
        return self._forward(inputs, training)

    def with_word_tags(self, inputs, training=None):
        """(source_ids [B, S], target_in_ids [B, T]) -> (logits [B, T, V], word_tag_logits [B, T, V]); tag_loss."""
        return self._forward(inputs, training, tags=True)

    def _forward(self, inputs, training, tags=False):
        source_ids, target_in_ids = inputs
        memory = self.encode(source_ids, training=training)
        words = self.word_memory(source_ids, memory) if self.config.align_words else None
        logits = self.decode(target_in_ids, memory, masks.padding_mask(source_ids), training=training, words=words)
        return (logits, self.word_tag_logits(target_in_ids, words)) if tags else logits

    # -- word alignment (config.align_words) -----------------------------------------------------

    def set_word_tables(self, is_leaf, starts_word, depth_change=None):
        """is_leaf [V], starts_word [V] (0/1): which target pieces are leaves, which source pieces start a word;
        depth_change [V] (+1 opens a bracket, -1 closes one, else 0): given exactly with ``bracket_depth``."""
        if (depth_change is not None) != self.config.bracket_depth:
            raise ValueError("depth_change: given exactly when the model has bracket_depth")
        rows = [is_leaf, starts_word] + ([] if depth_change is None else [depth_change])
        self.word_tables.assign(ops.stack([ops.cast(row, self.word_tables.dtype) for row in rows]))

    def set_piece_counts(self, counts):
        """counts [V]: how often each source piece occurs in the training sources (``source_token_dropout_alpha``)."""
        if not self.config.source_token_dropout_alpha:
            raise ValueError("set_piece_counts: the model has no source_token_dropout_alpha")
        self.piece_counts.assign(ops.cast(counts, "float32"))

    def _table(self, row, ids):
        """ids [...] -> [...] int32: word_tables[row] at ids (read as int32: mixed precision reads it in bf16)."""
        return ops.take(ops.cast(self.word_tables[row], "int32"), ids)

    def word_memory(self, source_ids, memory):
        """source_ids [B, S], memory [B, S, D] -> [B, S, D]: row k the encoder output at word k's first piece,
        zeros past the last word (PAD and EOS start no word). With ``word_span`` [B, S, 3D]: row k also holds the
        outputs at the last piece of word k and of word k-1 (zeros where there is none)."""
        real = _text(source_ids)  # [B, S]
        starts = self._table(1, source_ids) * ops.cast(real, "int32")  # [B, S]
        word = ops.cumsum(starts, axis=1) - 1  # [B, S]: the word each piece belongs to
        positions = ops.shape(source_ids)[1]

        def gather(row):  # row [B, S]: the word row each piece goes to, -1 for none -> [B, S word, D]
            return ops.einsum("bsk,bsd->bkd", ops.one_hot(row, positions, dtype=memory.dtype), memory)

        first = gather(ops.where(starts > 0, word, -1))
        if not self.config.word_span:
            return first
        # a piece ends its word when the next piece starts one or is not a word's (PAD, EOS, past the end)
        next_starts = ops.pad(starts[:, 1:], [[0, 0], [0, 1]])  # [B, S]
        next_real = ops.pad(ops.cast(real[:, 1:], "int32"), [[0, 0], [0, 1]])
        ends = ops.logical_and(real, ops.logical_or(next_starts > 0, next_real == 0))  # [B, S]
        last = ops.where(ends, word, -1)
        return ops.concatenate([first, gather(last), gather(ops.where(ends, word + 1, -1))], axis=-1)

    def aligned_inputs(self, target_in_ids, words):
        """target_in_ids [B, T], words [B, S, D or 3D] -> P · words[k_t] [B, T, D], k_t the leaves in target_in[:t+1]
        (the word the output at t comes to next); zeros once k_t is past the words. With ``bracket_depth`` plus
        the depth embedding of the brackets open after target_in[:t+1]."""
        aligned = self.alignment(self._next_word(target_in_ids, words))  # [B, T, D]
        if self.config.bracket_depth:
            aligned = aligned + self._depth(ops.cumsum(self._table(2, target_in_ids), axis=1))
        return aligned

    def _next_word(self, target_in_ids, words):
        """target_in_ids [B, T], words [B, S, D or 3D] -> words[k_t] [B, T, D or 3D], k_t the leaves in
        target_in[:t+1]; zeros once k_t is past the words."""
        leaves = ops.cumsum(self._table(0, target_in_ids), axis=1)  # [B, T]
        at = ops.one_hot(leaves, ops.shape(words)[1], dtype=words.dtype)  # [B, T, S]
        return ops.einsum("bts,bsd->btd", at, words)

    def word_tag_logits(self, target_in_ids, words):
        """target_in_ids [B, T], words [B, S, D or 3D] -> E W_tag memory[first piece of word k_t] [B, T, V] float32:
        the encoder's own guess, from word k_t alone, of the leaf the output at t writes for it (E the tied
        projection, §3.4; scored only where the gold output is a leaf, ``TransformerTrainer``)."""
        first = self._next_word(target_in_ids, words)[..., : self.config.d_model]  # [B, T, D]
        return ops.cast(self.embedding.logits(self.word_tagger(first)), "float32")

    def _depth(self, depth):
        """depth [...] int32 -> [..., D]: the depth embedding, depths past MAX_DEPTH - 1 on its last row."""
        return self.depth_embedding(ops.clip(depth, 0, MAX_DEPTH - 1))

    def alignment_state(self, rows):
        """What ``aligned_step`` carries per hypothesis, for ``rows`` hypotheses: the leaves written (and, with
        ``bracket_depth``, the brackets open), zeros before the first token."""
        zeros = ops.zeros((rows,), "int32")
        return {"leaves": zeros, "depth": zeros} if self.config.bracket_depth else {"leaves": zeros}

    def aligned_step(self, token_ids, state, words):
        """token_ids [N], state (``alignment_state``, before them), words [B, S, D or 3D] (N = B*K, an item's K rows
        adjacent) -> (P · words[item, k] (+ the depth's embedding) [N, D], the state after them: k [N] = leaves +
        the tokens that are leaves)."""
        leaves = state["leaves"] + self._table(0, token_ids)  # [N]
        batch, positions = ops.shape(words)[0], ops.shape(words)[1]
        at = ops.reshape(ops.one_hot(leaves, positions, dtype=words.dtype), (batch, -1, positions))  # [B, K, S]
        picked = ops.reshape(ops.einsum("bks,bsd->bkd", at, words), (-1, ops.shape(words)[2]))  # [N, D or 3D]
        aligned, after = self.alignment(picked), {"leaves": leaves}  # [N, D]
        if self.config.bracket_depth:
            after["depth"] = state["depth"] + self._table(2, token_ids)  # [N]
            aligned = aligned + self._depth(after["depth"])
        return aligned, after

    # -- incremental decoding --------------------------------------------------------------------

    def init_cache(self, memory):
        """memory [B, S, D] -> per-layer cache: empty self-attention keys/values, projected memory."""
        return self.decoder.init_cache(memory)

    def decode_step(self, token_ids, step, cache, memory_mask, aligned=None, projection=None, preallocated=False):
        """token_ids [N] at position ``step`` (scalar) -> (logits [N, V] float32, cache one position longer).

        ``cache`` k, v have N rows; its memory_k, memory_v and ``memory_mask`` one row per item (B rows,
        N = B*K, an item's K hypotheses adjacent; ``DecoderLayer.step``). ``aligned`` [N, D]: ``aligned_step``'s,
        exactly when the model aligns words. ``projection``: E^T [D, V] (``SharedEmbedding.transposed``),
        computed once before the steps. ``preallocated``: k, v are [N, H, T_max, d] and keep that shape,
        position ``step`` written (static shapes, for XLA).
        """
        aligned = None if aligned is None else aligned[:, None, :]
        y = self._embed(token_ids[:, None], start=step, aligned=aligned)[:, 0, :]  # [N, D]
        y, cache = self.decoder.step(y, cache, memory_mask, step if preallocated else None)
        logits = self.embedding.logits(y, projection)  # [N, V]
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
        words = self.word_memory(source_ids, memory) if self.config.align_words else None
        y = self._embed(target_in_ids, aligned=None if words is None else self.aligned_inputs(target_in_ids, words))
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
        if self.config.tag_loss:
            self.word_tagger.build((None, self.config.d_model))
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
    if config.align_words:
        total += (3 if config.word_span else 1) * D * D  # P, the word alignment's projection
    if config.bracket_depth:
        total += MAX_DEPTH * D  # the depth embedding
    if config.tag_loss:
        total += D * D  # W_tag
    return total
