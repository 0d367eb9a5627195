"""What every exported signature checks in the graph before it decodes, and how it bounds its inputs.

    STRINGS, IDS, OPTIONS, SAMPLING, PREFIXES, TRANSLATIONS, CONSTRAINTS, ALIGNMENT, TARGET_LANGS   the input
                                               specs: inputs [B] string, source_ids [B, S], options [],
                                               target_prefix [B] string, translations [B] string, constraints [B]
                                               string, alignment_layer [], alignment_head [], target_lang [B]
    checked_rank(value, name)                  value, its rank asserted
    checked_options(beam_size, alpha, extra_length)   each asserted to follow config.DECODE_OPTIONS
    checked_sampling(num_samples, top_k, top_p, temperature, seed)   likewise, config.SAMPLING_OPTIONS
    checked_source_ids(source_ids, vocab_size) ids asserted in [0, V)
    checked_prefixes(target_prefix, inputs)    rank asserted, one per input (or ``name``, another column)
    checked_alignment(layer, head, num_layers, num_heads)   -L <= layer < L, -1 <= head < H
    max_source_length(recipe), truncate_source(source_ids, max_length)
    blank(inputs) -> [B] bool                   empty or whitespace only: not decoded (``ServingModule``)

A bad request is refused with an InvalidArgumentError naming the input and its rule: the rank of each input
(inputs [B], source_ids [B, S], scalar options), ids in [0, V), and the options' rules of
``config.DECODE_OPTIONS`` (beam_size >= 1, alpha finite and >= 0, extra_length >= 0), which kt-translate's
flags and DecodeConfig follow too.
"""

from __future__ import annotations

import tensorflow as tf

from keras_transformer import EOS_ID
from keras_transformer.config import DECODE_OPTIONS, SAMPLING_OPTIONS, Recipe
from keras_transformer.decoding.model_step import source_lengths

# Every input is declared of unknown shape and its rank checked in the graph: with a declared shape the check
# would be folded away at trace time, yet a server (TF Serving, a loaded signature) feeds a tensor of any shape.
STRINGS = tf.TensorSpec(None, tf.string, name="inputs")  # [B]
IDS = tf.TensorSpec(None, tf.int32, name="source_ids")  # [B, S]
OPTIONS = (tf.TensorSpec(None, tf.int32, name="beam_size"), tf.TensorSpec(None, tf.float32, name="alpha"),
           tf.TensorSpec(None, tf.int32, name="extra_length"))  # scalars
PREFIXES = tf.TensorSpec(None, tf.string, name="target_prefix")  # [B], one per input ("" for none)
TRANSLATIONS = tf.TensorSpec(None, tf.string, name="translations")  # [B], one per input (``align``)
# [B], one per input: its constraints (words or phrases) separated by tabs ("" for none)
CONSTRAINTS = tf.TensorSpec(None, tf.string, name="constraints")
TARGET_LANGS = tf.TensorSpec(None, tf.string, name="target_lang")  # [B]: a multi-target model's language per input
# the cross-attention layer (negative: from the last) and head (-1: the heads averaged) an alignment reads: scalars
ALIGNMENT = (tf.TensorSpec(None, tf.int32, name="alignment_layer"), tf.TensorSpec(None, tf.int32,
                                                                                   name="alignment_head"))
_RANKS = {"inputs": (1, "a vector [B] of strings"), "source_ids": (2, "a matrix [B, S] of subword ids"),
          **{name: (1, "a vector [B] of strings, one per input") for name in ("target_prefix", "translations",
                                                                                    "constraints", "target_lang")},
          **{name: (0, "a scalar") for name in ("beam_size", "alpha", "extra_length", "seed", "alignment_layer",
                                               "alignment_head", *SAMPLING_OPTIONS)}}
# sample_with_options' inputs after ``inputs`` (then alpha and extra_length, as OPTIONS): scalars
SAMPLING = (tf.TensorSpec(None, tf.int32, name="num_samples"), tf.TensorSpec(None, tf.int32, name="top_k"),
            tf.TensorSpec(None, tf.float32, name="top_p"), tf.TensorSpec(None, tf.float32, name="temperature"),
            tf.TensorSpec(None, tf.int32, name="seed"))


# Every character Python's str.isspace() holds true for, as RE2 spells them: RE2's \s is ASCII [\t\n\f\r ] only, so
# \v, the information separators \x1c-\x1f and NEL are added, and \p{Z} brings the Unicode separators (U+00A0,
# U+2000-U+200A, U+2028, U+3000, ...). An input made of these alone is blank, in the graph as ``not line.strip()``
# is in Python (decoding.lines.is_blank); tests/robustness/test_blank_lines.py checks every code point.
BLANK_PATTERN = r"[\s\x0b\x1c-\x1f\x85\p{Z}]*"


def blank(inputs):
    """inputs [B] string -> [B] bool: True where the input is empty or only whitespace (``BLANK_PATTERN``)."""
    return tf.strings.regex_full_match(inputs, BLANK_PATTERN)


def max_source_length(recipe: Recipe) -> int:
    """Longest source (EOS included) the translator feeds the model: the training filter's limit."""
    return min(recipe.data.max_length, recipe.model.max_length)


def truncate_source(source_ids, max_length: int):
    """source_ids [B, S] (ids, EOS, PAD) -> [B, min(S, max_length)]: rows too long keep max_length - 1 ids + EOS."""
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    lengths = source_lengths(source_ids)  # [B]
    cut = source_ids[:, :max_length]  # [B, S']
    at_last = tf.equal(tf.range(tf.shape(cut)[1]), max_length - 1)[None, :]  # [1, S']
    return tf.where(at_last & (lengths > max_length)[:, None], EOS_ID, cut)  # [B, S']


def _after(check, value):
    """``value`` once ``check`` (an assert) has passed: nothing reads it before."""
    with tf.control_dependencies([check]):
        return tf.identity(value)


def checked_rank(value, name: str):
    """``value`` with its rank asserted (``_RANKS[name]``): InvalidArgumentError "[name: must be ..., got rank] [r]".

    The value passes on through a reshape to its own leading dimensions, not an identity: Grappler's shape
    inference would carry the rank that later ops require (the tokenizer's [B]) back through an identity to
    the input and fold this check away as always true.
    """
    rank, what = _RANKS[name]
    check = tf.debugging.Assert(tf.equal(tf.rank(value), rank), [f"{name}: must be {what}, got rank", tf.rank(value)])
    with tf.control_dependencies([check]):
        value = tf.reshape(value, tf.shape(value)[:rank])
    value.set_shape([None] * rank)
    return value


def _checked(name: str, value, test, rule: str):
    """``value`` with its rank asserted and ``test(value as float32)`` and finiteness asserted (NaN fails a
    comparison, ±inf the finiteness): InvalidArgumentError "[name: rule, got] [value]"."""
    value = checked_rank(value, name)
    as_float = tf.cast(value, tf.float32)
    valid = tf.logical_and(test(as_float), tf.math.is_finite(as_float))
    return _after(tf.debugging.Assert(valid, [f"{name}: {rule}, got", value]), value)


def checked_sampling(num_samples, top_k, top_p, temperature, seed):
    """The sampling options, each asserted in the graph to follow its rule in ``config.SAMPLING_OPTIONS``."""
    checked = [_checked(name, value, *SAMPLING_OPTIONS[name])
               for name, value in zip(SAMPLING_OPTIONS, (num_samples, top_k, top_p, temperature))]
    return (*checked, checked_rank(seed, "seed"))


def checked_options(beam_size, alpha, extra_length):
    """The decoding options, each asserted in the graph to follow its rule in ``config.DECODE_OPTIONS`` (the rules
    kt-translate's flags follow), e.g. InvalidArgumentError "[alpha: must be a finite number >= 0, got] [nan]"."""
    return tuple(_checked(name, value, lambda v, least=DECODE_OPTIONS[name][0]: v >= least, DECODE_OPTIONS[name][1])
                 for name, value in zip(("beam_size", "alpha", "extra_length"), (beam_size, alpha, extra_length)))


def checked_prefixes(target_prefix, inputs, name: str = "target_prefix"):
    """target_prefix [B] string with its rank asserted and one prefix per input [B] asserted; ``name``: another
    column of one string per input (e.g. "translations")."""
    target_prefix = checked_rank(target_prefix, name)
    same = tf.equal(tf.shape(target_prefix)[0], tf.shape(inputs)[0])
    return _after(tf.debugging.Assert(same, [f"{name}: must hold one string per input, got",
                                             tf.shape(target_prefix)[0], "for inputs", tf.shape(inputs)[0]]),
                  target_prefix)


def checked_alignment(layer, head, num_layers: int, num_heads: int):
    """(layer, head) asserted in the graph: -L <= alignment_layer < L (negative: from the last layer), -1 <=
    alignment_head < H (-1: the heads averaged)."""
    layer = _checked("alignment_layer", layer, lambda v: (v >= -num_layers) & (v < num_layers),
                     f"must be a decoder layer in [-{num_layers}, {num_layers})")
    head = _checked("alignment_head", head, lambda v: (v >= -1) & (v < num_heads),
                    f"must be a head in [0, {num_heads}) or -1 (the heads averaged)")
    return layer, head


def checked_source_ids(source_ids, vocab_size: int):
    """source_ids [B, S] with its rank and its ids (0 <= id < V) asserted in the graph."""
    source_ids = checked_rank(source_ids, "source_ids")
    valid = tf.logical_and(tf.reduce_all(source_ids >= 0), tf.reduce_all(source_ids < vocab_size))
    return _after(tf.debugging.Assert(valid, [f"source_ids: every id must be in [0, {vocab_size}), got min",
                                              tf.reduce_min(source_ids), "max", tf.reduce_max(source_ids)]),
                  source_ids)
