"""Greedy decoding: the most probable token at every step, until EOS or the maximum length.

Same conventions as beam search with K = 1: sequences [B, 1, T] int32 without
BOS, EOS included, PAD after EOS, T = steps run; scores [B, 1] = log P(Y) /
lp(Y), with the length penalty only rescaling the reported score (α = 0 gives
the plain log-probability). An item that reaches its maximum length without
EOS keeps its tokens (no EOS). Greedy needs no cache reordering.
"""

from __future__ import annotations

import tensorflow as tf

from keras_transformer import BOS_ID, EOS_ID
from keras_transformer.decoding import model_step
from keras_transformer.decoding.log_probs import LogProbs, as_log_probs
from keras_transformer.decoding.beam_search import SearchResult, cache_invariants, length_penalty


def most_probable(log_probs: LogProbs, step):
    """log_probs [B, V] -> (log P [B], token [B] int32) of each row's most probable token (ties to the lower id)."""
    best, token = log_probs.top_k(1)  # [B, 1] each
    return best[:, 0], token[:, 0]


def greedy_search(step_fn, initial_cache, max_lengths, alpha=0.0, constants=(), eos_id=EOS_ID,
                  bos_id=BOS_ID, choose=most_probable) -> SearchResult:
    """step_fn(token_ids [B], step, cache, constants) -> (log_probs [B, V] or ``LogProbs``, cache); max_lengths [B]
    (EOS included).

    initial_cache and constants: nests of tensors [B, ...] (see ``beam_search``; here nothing is reordered).
    ``choose(log_probs, step) -> (log P [B], token [B])`` picks each row's next token: the most probable, or a
    draw (``sampling.sampler``).
    """
    max_lengths = tf.cast(max_lengths, tf.int32)  # [B]
    b = tf.shape(max_lengths)[0]
    t_max = tf.maximum(tf.reduce_max(max_lengths), 0)

    def step(i, sequences, log_prob, lengths, done, cache):
        previous = tf.gather(sequences, tf.maximum(i - 1, 0), axis=1)  # [B]
        previous = tf.where(tf.equal(i, 0), tf.fill([b], bos_id), previous)
        log_probs, cache = step_fn(previous, i, cache, constants)  # [B, V]
        best, token = choose(as_log_probs(log_probs), i)  # [B] each
        live = tf.logical_not(done)  # [B]
        at_i = tf.equal(tf.range(t_max), i)[None, :]  # [1, T]
        sequences = tf.where(tf.logical_and(at_i, live[:, None]), token[:, None], sequences)  # [B, T]
        log_prob += tf.where(live, best, 0.0)  # [B]
        lengths += tf.cast(live, tf.int32)
        done = done | tf.equal(token, eos_id) | (i + 1 >= max_lengths)
        return i + 1, sequences, log_prob, lengths, done, cache

    def not_done(i, sequences, log_prob, lengths, done, cache):
        return tf.logical_and(i < t_max, tf.logical_not(tf.reduce_all(done)))

    state = (tf.constant(0), tf.zeros([b, t_max], tf.int32), tf.zeros([b]), tf.zeros([b], tf.int32),
             max_lengths <= 0, initial_cache)
    invariants = (tf.TensorShape([]), tf.TensorShape([None, None]), tf.TensorShape([None]), tf.TensorShape([None]),
                  tf.TensorShape([None]), cache_invariants(initial_cache))
    num_steps, sequences, log_prob, lengths, _, _ = tf.while_loop(
        not_done, step, state, shape_invariants=invariants, maximum_iterations=t_max)
    scores = log_prob / length_penalty(lengths, alpha)  # [B]
    return SearchResult(sequences[:, None, :num_steps], scores[:, None], num_steps)


def _greedy_model(model, source_ids, alpha, extra_length):
    max_lengths = model_step.max_output_lengths(source_ids, extra_length, model.config.max_length)  # [B]
    step_fn, cache, constants = model_step.cached_step_fn(model, source_ids, 1)
    result = greedy_search(step_fn, cache, max_lengths, alpha, constants)
    return result.sequences, result.scores


def greedy_translate_ids(model, source_ids, alpha=0.6, extra_length=50):
    """source_ids [B, S] -> (sequences [B, 1, T] int32, scores [B, 1] float32), one cached step per token."""
    fn = model_step.compiled_for(model, "greedy", _greedy_model, [
        tf.TensorSpec([None, None], tf.int32, name="source_ids"),
        tf.TensorSpec([], tf.float32, name="alpha"),
        tf.TensorSpec([], tf.int32, name="extra_length"),
    ])
    return fn(tf.cast(source_ids, tf.int32), tf.cast(alpha, tf.float32), tf.cast(extra_length, tf.int32))
