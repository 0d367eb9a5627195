"""Beam search that writes only well-formed trees (§6.3): the parser's vocabulary masked at every step.

    token_kinds(tokenizer)  -> TreeTokens(kinds [V] int32, word_starts [V] bool, texts [V] str)
    parse_ids(model, source_ids [B, S], tokens, beam_size=21, alpha=0.3, extra_length=300, parallel_searches=1,
              num_hypotheses=None)
        -> (sequences [B, K, T] int32, scores [B, K] float32)   as ``translate_ids``, every hypothesis a tree

The parser's target is a linearized tree (``trees.py``), and each of its
tokens is one SentencePiece piece (the tokenizer's atomic words): ``(LABEL``
opens (OPEN), ``)`` closes (CLOSE), ``XX`` is a word's slot (SLOT); then EOS.
Every other piece is banned. Each hypothesis carries, in the search's cache
(reordered with the beams), the state of its prefix:

    depth [N]    brackets open
    slots [N]    slots written
    opened [N]   1 when the last token opened a bracket (a constituent may not close empty)
    started [N]  1 once the root has been opened

and with n the item's words (the source pieces that start a word, i.e. begin
with "▁") and r the tokens it may still write after this one (its maximum
length L less the step, EOS included), a token is allowed when

    OPEN   (depth > 0, or the root: depth == 0 and not started), slots < n, and  (n - slots) + depth + 2 <= r
    SLOT   depth > 0, slots < n, and                                              (n - slots) + depth     <= r
    CLOSE  depth > 0, not opened, (depth > 1 or slots == n), and                  (n - slots) + depth     <= r
    EOS    depth == 0 and (started or n == 0)

The right-hand conditions keep a completion within L possible: if one was
possible before a step, one allowed token keeps it possible, so every
hypothesis ends in EOS as one tree with exactly n slots (L is raised to
n + 3, the shortest tree "(S XX ... )" and EOS, where source + extra_length is
shorter). The search itself (``beam_search``) is unchanged.
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Tuple

import tensorflow as tf
from sentencepiece import sentencepiece_model_pb2

from keras_transformer import EOS_ID, PAD_ID
from keras_transformer.tasks.parsing import trees as trees_lib
from keras_transformer.decoding import model_step
from keras_transformer.decoding.beam_search import beam_search, hypotheses_to_settle
from keras_transformer.decoding.log_probs import as_log_probs
from keras_transformer.decoding.parallel import in_parallel

BANNED, OPEN, CLOSE, SLOT, EOS = 0, 1, 2, 3, 4  # token kinds
_WORD_START = "\u2581"  # SentencePiece's word-initial space


class TreeTokens(NamedTuple):
    """Python tuples, made constants inside each graph that uses them (so a SavedModel holds them)."""

    kinds: Tuple[int, ...]  # [V]: BANNED, OPEN, CLOSE, SLOT or EOS
    word_starts: Tuple[bool, ...]  # [V]: the piece begins a word (counts the source's words)
    texts: Tuple[str, ...] = ()  # [V]: a tree piece's token ("(NP", ")", "@NN", "XX"), "" for every other piece
    pieces: Tuple[str, ...] = ()  # [V]: every piece's text without the word-start mark, "" for control pieces


def token_kinds(tokenizer) -> TreeTokens:
    """The kind of every piece of a parser's tokenizer; ValueError when it has no atomic ``)`` or ``XX``."""
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(tokenizer.model_proto)
    user_defined = sentencepiece_model_pb2.ModelProto.SentencePiece.USER_DEFINED
    kinds, starts, texts, pieces = [], [], [], []
    normal = (sentencepiece_model_pb2.ModelProto.SentencePiece.NORMAL, user_defined)
    for piece in proto.pieces:
        text = piece.piece
        pieces.append(text.removeprefix(_WORD_START) if piece.type in normal else "")
        kind, word = BANNED, ""
        if piece.type == user_defined and text.startswith(_WORD_START):
            word = text[len(_WORD_START):]
            kind = CLOSE if word == trees_lib.CLOSE else SLOT if trees_lib.is_leaf(word) else (
                OPEN if trees_lib.is_open(word) else BANNED)
        kinds.append(kind)
        starts.append(text.startswith(_WORD_START))
        texts.append(word if kind != BANNED else "")
    kinds[EOS_ID] = EOS
    for kind, what in ((CLOSE, trees_lib.CLOSE), (SLOT, trees_lib.SLOT), (OPEN, "(LABEL")):
        if kind not in kinds:
            raise ValueError(f"{tokenizer.model_path}: no atomic {what!r} piece; not a parser's tokenizer "
                             "(corpus ptb trains one)")
    return TreeTokens(tuple(kinds), tuple(starts), tuple(texts), tuple(pieces))


def count_words(source_ids, word_starts):
    """source_ids [B, S] (pieces, EOS, PAD) -> [B] int32: the pieces that begin a word."""
    starts = tf.gather(word_starts, source_ids)  # [B, S]
    real = tf.logical_and(tf.not_equal(source_ids, PAD_ID), tf.not_equal(source_ids, EOS_ID))  # [B, S]
    return tf.reduce_sum(tf.cast(tf.logical_and(starts, real), tf.int32), axis=1)


def constrained_step_fn(step_fn, kinds):
    """Wraps a search's ``step_fn``: its cache becomes {"model": ..., "tree": state [N] x 4}, its constants
    {"model": ..., "words": n [B], "max_lengths": L [B]} (one row per item); banned tokens get NEG_INF (module
    docstring)."""

    def wrapped(token_ids, step, cache, constants):
        log_probs, model_cache = step_fn(token_ids, step, cache["model"], constants["model"])  # [N, V]
        depth, slots, opened, started = cache["tree"]  # [N] int32 each: the state before token_ids
        kind = tf.gather(kinds, token_ids)  # [N] kind of the previous token (BOS at step 0: BANNED)
        is_open, is_close, is_slot = (tf.cast(tf.equal(kind, k), tf.int32) for k in (OPEN, CLOSE, SLOT))
        depth = depth + is_open - is_close
        slots = slots + is_slot
        opened = is_open
        started = tf.maximum(started, is_open)
        beams = tf.shape(token_ids)[0] // tf.shape(constants["words"])[0]  # K rows per item
        n, length = (tf.repeat(constants[name], beams) for name in ("words", "max_lengths"))  # [N]
        room = length - (step + 1)  # [N]: tokens after this one
        need = n - slots + depth  # [N] slots and closes still to write
        at_root, inside, has_slots = tf.equal(depth, 0), depth > 0, slots < n
        allowed = tf.stack([
            tf.zeros_like(inside),  # BANNED
            (inside | (at_root & tf.equal(started, 0))) & has_slots & (need + 2 <= room),  # OPEN
            inside & tf.equal(opened, 0) & ((depth > 1) | tf.equal(slots, n)) & (need <= room),  # CLOSE
            inside & has_slots & (need <= room),  # SLOT
            at_root & (tf.equal(started, 1) | tf.equal(n, 0)),  # EOS
        ], axis=1)  # [N, 5]
        mask = tf.gather(allowed, kinds, axis=1)  # [N, V]
        log_probs = as_log_probs(log_probs).ban(mask)  # [N, V]
        return log_probs, {"model": model_cache, "tree": (depth, slots, opened, started)}

    return wrapped


def _parse_ids_model(model, source_ids, kinds, word_starts, beam_size, alpha, extra_length, num_hypotheses,
                     parallel_searches):
    def search(source_ids):  # [B', S] -> ([B', K, T], [B', K])
        words = count_words(source_ids, word_starts)  # [B']
        lengths = model_step.max_output_lengths(source_ids, extra_length, model.config.max_length)  # [B']
        lengths = tf.minimum(tf.maximum(lengths, words + 3), model.config.max_length)  # room for the shortest tree
        step_fn, cache, constants = model_step.cached_step_fn(model, source_ids, beam_size)
        rows = tf.shape(source_ids)[0] * beam_size
        zeros = tf.zeros([rows], tf.int32)  # [B'*K]
        cache = {"model": cache, "tree": (zeros, zeros, zeros, zeros)}
        constants = {"model": constants, "words": words, "max_lengths": lengths}  # one row per item
        result = beam_search(constrained_step_fn(step_fn, kinds), cache, beam_size, lengths, alpha, constants,
                             num_hypotheses=num_hypotheses)
        return result.sequences, result.scores

    return in_parallel(search, source_ids, parallel_searches)


def parse_ids(model, source_ids, tokens: TreeTokens, beam_size=21, alpha=0.3, extra_length=300, parallel_searches=1,
              num_hypotheses=None):
    """Constrained beam search (§6.3 defaults: beam 21, α 0.3, output up to input + 300).

    source_ids [B, S] int (PAD-padded) -> (sequences [B, K, T] int32, scores [B, K] float32) with the
    conventions of ``translate_ids`` (``num_hypotheses`` N, default K: the hypotheses that must be final before
    an item stops); every finished hypothesis is a tree over the item's words.
    ``parallel_searches`` P > 1 deals the items to P searches run at once (``parallel.in_parallel``; the same
    results). One ``tf.function`` per model and P, traced once (every other argument is a tensor of its signature).
    """
    search = functools.partial(_parse_ids_model, parallel_searches=parallel_searches)
    fn = model_step.compiled_for(model, f"tree_beam_search/{parallel_searches}", search, [
        tf.TensorSpec([None, None], tf.int32, name="source_ids"),
        tf.TensorSpec([None], tf.int32, name="kinds"),
        tf.TensorSpec([None], tf.bool, name="word_starts"),
        tf.TensorSpec([], tf.int32, name="beam_size"),
        tf.TensorSpec([], tf.float32, name="alpha"),
        tf.TensorSpec([], tf.int32, name="extra_length"),
        tf.TensorSpec([], tf.int32, name="num_hypotheses"),
    ])
    kinds, word_starts = tf.constant(tokens.kinds, tf.int32), tf.constant(tokens.word_starts, tf.bool)
    return fn(tf.cast(source_ids, tf.int32), kinds, word_starts, tf.cast(beam_size, tf.int32),
              tf.cast(alpha, tf.float32), tf.cast(extra_length, tf.int32),
              hypotheses_to_settle(num_hypotheses, beam_size))
