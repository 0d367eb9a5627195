"""Target prefixes (not in the paper): the first tokens of each output given, the search goes on from them, as
CTranslate2's ``target_prefix``, fairseq's prefix-constrained search and Sockeye's target prefix do (interactive
translation, post-editing: the translator fixes the start and the model continues).

    forced_prefix(step_fn, constants, prefix_ids [B, P]) -> (step_fn', constants')
    prefix_lengths(prefix_ids [B, P]) -> [B] int32
    checked_prefix_lengths(prefix_ids [B, P], max_lengths [B]) -> max_lengths, asserted to be longer

A wrapper of the searches' ``step_fn`` (``beam_search``'s interface), like the parser's tree constraint: at step
i < P_b, the prefix length of item b, every token but y_i = prefix_ids[b, i] is banned (``LogProbs.ban``: its
log-probability is the model's own, not renormalised), so each hypothesis starts with the prefix and its score
is the model's log P(Y|X) / lp(|Y|) of the whole output, the forced tokens included (``kt-score`` of the output
gives the same number). From step P_b on the step is the model's. The search is unchanged: while the prefix is
forced an item has one live beam, as at its first step (the other beams hold NEG_INF), and sampling draws the
forced token with probability 1. A row of PAD (0) ids, or the PAD after a shorter prefix, forces nothing: an
empty prefix is the unconstrained search.

The prefix is one row per item in the constants (thinned with them when items stop); ``step_fn`` sees N = B'*R
token rows, the R hypotheses (beams or draws) of each of the B' items still searching, adjacent.
"""

from __future__ import annotations

import tensorflow as tf

from keras_transformer import PAD_ID
from keras_transformer.decoding.log_probs import as_log_probs, columns


def prefix_lengths(prefix_ids):
    """prefix_ids [B, P] int (PAD after each prefix) -> [B] int32: the tokens each forces."""
    return tf.reduce_sum(tf.cast(tf.not_equal(prefix_ids, PAD_ID), tf.int32), axis=1)


def checked_prefix_lengths(prefix_ids, max_lengths):
    """max_lengths [B], once asserted to leave each item's search at least one token after its prefix (prefix_ids
    [B, P], fewer tokens than the item may write): else InvalidArgumentError "target_prefix: must be shorter ..."."""
    lengths = prefix_lengths(prefix_ids)  # [B]
    check = tf.debugging.Assert(tf.reduce_all(lengths < max_lengths), [
        "target_prefix: must be shorter than the output may be (source subwords + extra_length, EOS included; at most "
        "the model's max_length): prefix subwords", lengths, "output limits", max_lengths])
    with tf.control_dependencies([check]):
        return tf.identity(max_lengths)


def forced_prefix(step_fn, constants, prefix_ids):
    """(step_fn', constants'): ``step_fn`` with each item's output forced to start with its row of ``prefix_ids``
    [B, P] int32 (PAD after; module docstring), and the constants that carry the prefix with ``constants``."""
    prefix_ids = tf.cast(prefix_ids, tf.int32)
    padded = tf.pad(prefix_ids, [[0, 0], [0, 1]])  # [B, P + 1]: step P and later read PAD, forcing nothing

    def step(token_ids, i, cache, wrapped):
        log_probs, cache = step_fn(token_ids, i, cache, wrapped["constants"])  # [N, V]
        log_probs = as_log_probs(log_probs)
        prefix = wrapped["prefix"]  # [B', P + 1]
        forced = tf.gather(prefix, tf.minimum(i, tf.shape(prefix)[1] - 1), axis=1)  # [B']
        forced = tf.repeat(forced, tf.shape(token_ids)[0] // tf.shape(prefix)[0])  # [N], R rows an item
        vocab = tf.range(columns(log_probs.logits))[None, :]  # [1, V]
        allowed = tf.equal(forced, PAD_ID)[:, None] | tf.equal(vocab, forced[:, None])  # [N, V]
        return log_probs.ban(allowed), cache

    return step, {"constants": constants, "prefix": padded}
