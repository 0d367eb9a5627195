"""The parser's Transformer: the paper's model (``model.py``) whose decoder is also told which word comes next
(§6.3 as translation; none of this is in the paper). ``recipe.parsing`` (``ParsingConfig``) turns each part on.

With ``align_words`` the decoder input at each position also holds P · memory[word k], k the leaves written
before it (``source_context`` = ``word_memory``, ``context_inputs``, ``context_step``): the decoder is told which
word its next leaf stands for instead of counting them (Ma et al., 2017; Liu, Zhu & Shi, 2018); with ``word_span``
also the outputs at the last piece of word k and of word k-1, the gap before word k (Stern et al., 2017); with
``bracket_depth`` also a learned embedding of the brackets open after the prefix (the depth the constrained
search tracks), which a decoder attending over a long prefix otherwise has to count. With ``tag_loss`` training
also scores ``word_tag_logits``: the encoder output at word k's first piece alone guessing the leaf (POS tag) the
decoder writes for it (``auxiliary_loss``).

Which target pieces are leaves and which source pieces start a word come from the tokenizer
(``set_word_tables``, ``ParsingTask.prepare_model``) and are kept with the weights. The weights keep the names
they had as attributes of ``model.Transformer`` (``word_alignment``, ``word_tables``, ``bracket_depth``,
``word_tagger``), so older work directories and exports still load.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Union

import keras
from keras import ops

from keras_transformer import PAD_ID, losses
from keras_transformer.config import ParsingConfig, Recipe
from keras_transformer.layers import masks
from keras_transformer.model import Transformer

MAX_DEPTH = 64  # bracket_depth: depths from here on share the last row of the depth embedding


def word_pieces(source_ids, starts_word):
    """source_ids [B, S] (pieces, EOS, PAD), starts_word [B, S] (1 where the piece's text begins a word) ->
    (starts [B, S] int32: 1 where a sentence piece starts a word; word [B, S] int32: the word each piece belongs
    to; ends [B, S] bool: the piece is its word's last, the next one starting a word or not a word's)."""
    real = masks.text_pieces(source_ids)  # [B, S]
    starts = ops.cast(starts_word, "int32") * ops.cast(real, "int32")  # [B, S]
    word = ops.cumsum(starts, axis=1) - 1  # [B, S]
    next_starts = ops.pad(starts[:, 1:], [[0, 0], [0, 1]])  # [B, S]
    next_real = ops.pad(ops.cast(real[:, 1:], "int32"), [[0, 0], [0, 1]])
    return starts, word, ops.logical_and(real, ops.logical_or(next_starts > 0, next_real == 0))


def at_words(row, memory, num_words):
    """row [B, S]: the word each piece goes to, -1 for none; memory [B, S, D] -> [B, num_words, D]."""
    return ops.einsum("bsk,bsd->bkd", ops.one_hot(row, num_words, dtype=memory.dtype), memory)


class ParsingSection:
    """What a parsing model keeps of its recipe's ``parsing`` section: the config key, get_config, from_recipe."""

    CONFIG_KEYS = ("parsing",)

    def get_config(self):
        return {**super().get_config(), "parsing": dataclasses.asdict(self.parsing)}

    @classmethod
    def from_recipe(cls, recipe: Recipe, **kwargs) -> Transformer:
        return cls(recipe.model, parsing=recipe.parsing, **kwargs)


@keras.saving.register_keras_serializable(package="keras_transformer")
class ParsingTransformer(ParsingSection, Transformer):
    reads_context = True
    tokenizer_tables = True

    def __init__(self, config, parsing: Optional[Union[ParsingConfig, dict]] = None, **kwargs):
        parsing = ParsingConfig(**parsing) if isinstance(parsing, dict) else parsing or ParsingConfig(align_words=True)
        if not parsing.align_words:
            raise ValueError("align_words: the parser's model reads the next word; without it build the Transformer")
        self.parsing = parsing  # read by add_context_layers, which the Transformer's __init__ calls
        super().__init__(config, **kwargs)
        if parsing.tag_loss:  # W_tag [D, D]; built last (build()): the other weights start as without it
            self.word_tagger = keras.layers.Dense(self.config.d_model, use_bias=False, name="word_tagger")

    def add_context_layers(self):
        """P, the word tables and the depth embedding, where the Transformer created them when they were its own:
        after the decoder, before the dropout seeds (a recipe trains from the same initial weights as then)."""
        parsing, d_model, vocab = self.parsing, self.config.d_model, self.config.vocab_size
        self.alignment = keras.layers.Dense(d_model, use_bias=False, name="word_alignment")  # P [D or 3D, D]
        # [2, V]: row 0 a piece is a leaf of the target, row 1 it starts a word of the source; with bracket_depth
        # [3, V], row 2 what the piece adds to the depth: +1 opens, -1 closes (set_word_tables)
        self.word_tables = self.add_weight(shape=(3 if parsing.bracket_depth else 2, vocab), initializer="zeros",
                                           trainable=False, name="word_tables")
        if parsing.bracket_depth:
            self.depth_embedding = keras.layers.Embedding(MAX_DEPTH, d_model, name="bracket_depth")  # [64, D]

    @property
    def has_auxiliary_loss(self) -> bool:
        return bool(self.parsing.tag_loss)

    def set_word_tables(self, is_leaf, starts_word, depth_change=None):
        """is_leaf [V], starts_word [V] (0/1): which target pieces are leaves, which source pieces start a word;
        depth_change [V] (+1 opens a bracket, -1 closes one, else 0): given exactly with ``bracket_depth``."""
        if (depth_change is not None) != self.parsing.bracket_depth:
            raise ValueError("depth_change: given exactly when the model has bracket_depth")
        rows = [is_leaf, starts_word] + ([] if depth_change is None else [depth_change])
        self.word_tables.assign(ops.stack([ops.cast(row, self.word_tables.dtype) for row in rows]))

    def _table(self, row, ids):
        """ids [...] -> [...] int32: word_tables[row] at ids (read as int32: mixed precision reads it in bf16)."""
        return ops.take(ops.cast(self.word_tables[row], "int32"), ids)

    def source_context(self, source_ids, memory):
        return self.word_memory(source_ids, memory)

    def word_memory(self, source_ids, memory):
        """source_ids [B, S], memory [B, S, D] -> [B, S, D]: row k the encoder output at word k's first piece,
        zeros past the last word (PAD and EOS start no word). With ``word_span`` [B, S, 3D]: row k also holds the
        outputs at the last piece of word k and of word k-1 (zeros where there is none)."""
        starts, word, ends = word_pieces(source_ids, self._table(1, source_ids))
        positions = ops.shape(source_ids)[1]
        first = at_words(ops.where(starts > 0, word, -1), memory, positions)
        if not self.parsing.word_span:
            return first
        last = ops.where(ends, word, -1)
        return ops.concatenate([first, at_words(last, memory, positions),
                                at_words(ops.where(ends, word + 1, -1), memory, positions)], axis=-1)

    def context_inputs(self, target_in_ids, context):
        """target_in_ids [B, T], context = words [B, S, D or 3D] -> P · words[k_t] [B, T, D], k_t the leaves in
        target_in[:t+1] (the word the output at t comes to next); zeros once k_t is past the words. With
        ``bracket_depth`` plus the depth embedding of the brackets open after target_in[:t+1]."""
        aligned = self.alignment(self._next_word(target_in_ids, context))  # [B, T, D]
        if self.parsing.bracket_depth:
            aligned = aligned + self._depth(ops.cumsum(self._table(2, target_in_ids), axis=1))
        return aligned

    def _next_word(self, target_in_ids, words):
        """target_in_ids [B, T], words [B, S, D or 3D] -> words[k_t] [B, T, D or 3D], k_t the leaves in
        target_in[:t+1]; zeros once k_t is past the words."""
        leaves = ops.cumsum(self._table(0, target_in_ids), axis=1)  # [B, T]
        at = ops.one_hot(leaves, ops.shape(words)[1], dtype=words.dtype)  # [B, T, S]
        return ops.einsum("bts,bsd->btd", at, words)

    def _depth(self, depth):
        """depth [...] int32 -> [..., D]: the depth embedding, depths past MAX_DEPTH - 1 on its last row."""
        return self.depth_embedding(ops.clip(depth, 0, MAX_DEPTH - 1))

    def context_state(self, rows):
        """The leaves written (and, with ``bracket_depth``, the brackets open) per hypothesis: zeros [rows]."""
        zeros = ops.zeros((rows,), "int32")
        return {"leaves": zeros, "depth": zeros} if self.parsing.bracket_depth else {"leaves": zeros}

    def context_step(self, token_ids, state, context):
        """token_ids [N], state, words [B, S, D or 3D] (N = B*K) -> (P · words[item, k] (+ the depth's embedding)
        [N, D], the state after them: k [N] = leaves + the tokens that are leaves)."""
        words = context
        leaves = state["leaves"] + self._table(0, token_ids)  # [N]
        batch, positions = ops.shape(words)[0], ops.shape(words)[1]
        at = ops.reshape(ops.one_hot(leaves, positions, dtype=words.dtype), (batch, -1, positions))  # [B, K, S]
        picked = ops.reshape(ops.einsum("bks,bsd->bkd", at, words), (-1, ops.shape(words)[2]))  # [N, D or 3D]
        aligned, after = self.alignment(picked), {"leaves": leaves}  # [N, D]
        if self.parsing.bracket_depth:
            after["depth"] = state["depth"] + self._table(2, token_ids)  # [N]
            aligned = aligned + self._depth(after["depth"])
        return aligned, after

    def word_tag_logits(self, target_in_ids, words):
        """target_in_ids [B, T], words [B, S, D or 3D] -> E W_tag memory[first piece of word k_t] [B, T, V] float32:
        the encoder's own guess, from word k_t alone, of the leaf the output at t writes for it (E the tied
        projection, §3.4)."""
        first = self._next_word(target_in_ids, words)[..., : self.config.d_model]  # [B, T, D]
        return ops.cast(self.embedding.logits(self.word_tagger(first)), "float32")

    def auxiliary_loss(self, target_in_ids, target_out_ids, context, label_smoothing):
        """λ Σ the smoothed loss of ``word_tag_logits`` where the gold output is a leaf; 0 without ``tag_loss``."""
        if not self.parsing.tag_loss:
            return 0.0
        leaves = ops.where(self._table(0, target_out_ids) > 0, target_out_ids, PAD_ID)  # [B, T]: the rest PAD
        stats = losses.token_statistics(leaves, self.word_tag_logits(target_in_ids, context), label_smoothing)
        return self.parsing.tag_loss * ops.sum(stats[..., losses.SMOOTHED])

    def build(self, input_shape=None):
        if self.built:
            return
        super().build(input_shape)
        if self.parsing.tag_loss:
            self.word_tagger.build((None, self.config.d_model))

    @classmethod
    def extra_parameters(cls, recipe: Recipe) -> int:
        """P (D x D, or 3D x D with word_span), the depth embedding (64 x D), W_tag (D x D)."""
        p, d = recipe.parsing, recipe.model.d_model
        return (3 if p.word_span else 1) * d * d + MAX_DEPTH * d * p.bracket_depth + d * d * bool(p.tag_loss)

