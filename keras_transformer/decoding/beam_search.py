"""Batched beam search with a length penalty (§6.1; Wu et al., 2016).

    lp(Y)    = ((5 + |Y|) / 6)^α                 |Y| counts the generated tokens, EOS included
    score(Y) = log P(Y | X) / lp(Y)

"We used beam search with a beam size of 4 and length penalty α = 0.6 ... set
the maximum output length during inference to input length + 50, but
terminate early when possible" (§6.1).

As in tensor2tensor and flax, the K *alive* hypotheses (which keep growing)
are kept apart from the K best *finished* ones (which emitted EOS). At step i
every alive beam is extended by every token; of the top 2K expansions of an
item, the best K that do not end in EOS become the new alive beams, and the
ones ending in EOS that rank within the top K are scored and merged into the
finished set. (Admitting EOS only from the top K is the textbook beam and
fairseq's rule; it makes K = 1 with α = 0 exactly greedy decoding.)

An item stops at its own maximum length, or as soon as no alive beam can beat
the worst of its finished ones (tensor2tensor's rule): log-probabilities only
fall and lp only grows, so log P_alive / lp(max_length) bounds every extension
for any α >= 0. The ``tf.while_loop`` stops when every item has stopped;
stopped items are frozen while the others continue.

The search knows nothing of the model: ``step_fn(token_ids [B*K], step, cache)
-> (log_probs [B*K, V], cache)`` does one decoder step; it must return
log-probabilities (<= 0; a banned token gets NEG_INF), not raw logits. Every tensor in
``cache`` is per beam (leading dimension B*K, beams of an item adjacent) and is
reordered with the beams; per-item constants such as the encoder memory belong
in ``step_fn``'s closure. All shapes are loop invariant, so the search traces
once per input signature and exports to a SavedModel with stock ops only.

Outputs: sequences [B, K, T] int32 without BOS, EOS included, PAD after EOS,
T = steps run; scores [B, K] float32, best first. An item with no finished
hypothesis falls back to its alive beams (no EOS, scored at its maximum
length). An item that stops with fewer than K finished hypotheses (no alive
beam could beat them) has empty slots: all PAD, score NEG_INF.
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from keras_transformer import BOS_ID, EOS_ID
from keras_transformer.decoding import model_step

NEG_INF = -1.0e9  # finite: -inf would turn into NaN in sums and differences


class SearchResult(NamedTuple):
    sequences: tf.Tensor  # [B, K, T] int32, T = num_steps
    scores: tf.Tensor  # [B, K] float32, best first
    num_steps: tf.Tensor  # [] int32, decoder steps run (early stop makes it < max length)


def length_penalty(length, alpha):
    """GNMT lp(Y) = ((5 + |Y|) / 6)^α (Wu et al., 2016, Eq. 14). length: any shape; returns float32."""
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, tf.cast(alpha, tf.float32))


def _loop_shape(t):
    """Shape invariant for a loop tensor: the static shape with an unknown leading (batch) dimension."""
    if t.shape.rank is None or t.shape.rank == 0:
        return t.shape
    return tf.TensorShape([None]).concatenate(t.shape[1:])


def beam_search(step_fn, initial_cache, beam_size, max_lengths, alpha, eos_id=EOS_ID, bos_id=BOS_ID) -> SearchResult:
    """Beam search over ``step_fn`` (see the module docstring).

    initial_cache: nest of tensors [B*K, ...]; max_lengths [B] int: most tokens (EOS included) per item,
    at most the cache length; beam_size K and alpha may be Python numbers or scalar tensors.
    """
    max_lengths = tf.cast(max_lengths, tf.int32)  # [B]
    alpha = tf.cast(alpha, tf.float32)
    k = tf.cast(beam_size, tf.int32)
    b = tf.shape(max_lengths)[0]
    t_max = tf.maximum(tf.reduce_max(max_lengths), 0)  # T of the output buffers
    max_lp = length_penalty(max_lengths, alpha)  # [B], the smallest divisor an alive beam can still reach

    def gather_beams(x, beams):
        """x [B, N, ...], beams [B, M] -> [B, M, ...]."""
        return tf.gather(x, beams, batch_dims=1)

    def step(i, alive_seq, alive_log_probs, finished_seq, finished_scores, finished_flags, done, cache):
        previous = tf.gather(alive_seq, tf.maximum(i - 1, 0), axis=2)  # [B, K]
        previous = tf.where(tf.equal(i, 0), tf.fill(tf.shape(previous), bos_id), previous)
        log_probs, cache = step_fn(tf.reshape(previous, [-1]), i, cache)  # [B*K, V]
        v = tf.shape(log_probs)[-1]
        log_probs = alive_log_probs[:, :, None] + tf.reshape(log_probs, [b, k, v])  # [B, K, V]

        # The 2K best expansions of each item: at most K of them end in EOS (one per beam).
        top_log_probs, top_ids = tf.math.top_k(tf.reshape(log_probs, [b, k * v]), k=2 * k)  # [B, 2K]
        top_beams, top_tokens = top_ids // v, top_ids % v  # [B, 2K]
        at_i = tf.equal(tf.range(t_max), i)[None, None, :]  # [1, 1, T]
        top_seq = tf.where(at_i, top_tokens[:, :, None], gather_beams(alive_seq, top_beams))  # [B, 2K, T]
        top_eos = tf.equal(top_tokens, eos_id)  # [B, 2K]

        # Alive: the best K expansions that do not end in EOS.
        new_alive_log_probs, alive_pick = tf.math.top_k(tf.where(top_eos, NEG_INF, top_log_probs), k=k)  # [B, K]
        new_alive_seq = gather_beams(top_seq, alive_pick)  # [B, K, T]
        source_beams = gather_beams(top_beams, alive_pick)  # [B, K]

        # Finished: EOS expansions ranked within the top K, scored log P / lp, merged with the old set.
        admit = tf.logical_and(top_eos, (tf.range(2 * k) < k)[None, :])  # [B, 2K]
        new_scores = tf.where(admit, top_log_probs / length_penalty(i + 1, alpha), NEG_INF)  # [B, 2K]
        merged_scores = tf.concat([finished_scores, new_scores], axis=1)  # [B, 3K]
        new_finished_scores, finished_pick = tf.math.top_k(merged_scores, k=k)  # [B, K]
        new_finished_seq = gather_beams(tf.concat([finished_seq, top_seq], axis=1), finished_pick)  # [B, K, T]
        new_finished_flags = gather_beams(tf.concat([finished_flags, admit], axis=1), finished_pick)  # [B, K]

        # Items that had already stopped keep their state.
        live = tf.logical_not(done)  # [B]
        alive_seq = tf.where(live[:, None, None], new_alive_seq, alive_seq)
        alive_log_probs = tf.where(live[:, None], new_alive_log_probs, alive_log_probs)
        finished_seq = tf.where(live[:, None, None], new_finished_seq, finished_seq)
        finished_scores = tf.where(live[:, None], new_finished_scores, finished_scores)
        finished_flags = tf.where(live[:, None], new_finished_flags, finished_flags)

        # Reorder the per-beam cache: row b*K + j takes the row of its source beam.
        rows = tf.reshape(tf.range(b)[:, None] * k + source_beams, [-1])  # [B*K]
        cache = tf.nest.map_structure(lambda t: tf.gather(t, rows), cache)

        best_alive = tf.reduce_max(alive_log_probs, axis=1) / max_lp  # [B]
        worst_finished = tf.reduce_min(tf.where(finished_flags, finished_scores, -NEG_INF), axis=1)  # [B]
        worst_finished = tf.where(tf.reduce_any(finished_flags, axis=1), worst_finished, NEG_INF)
        done = done | (i + 1 >= max_lengths) | (worst_finished > best_alive)  # [B]
        return i + 1, alive_seq, alive_log_probs, finished_seq, finished_scores, finished_flags, done, cache

    def not_done(i, *state):
        done = state[5]
        return tf.logical_and(i < t_max, tf.logical_not(tf.reduce_all(done)))

    first_beam = tf.equal(tf.range(k), 0)[None, :]  # [1, K]: only beam 0 is live at first (no duplicates)
    state = (
        tf.constant(0),
        tf.zeros([b, k, t_max], tf.int32),  # alive_seq [B, K, T]
        tf.where(first_beam, 0.0, NEG_INF) * tf.ones([b, 1]),  # alive_log_probs [B, K]
        tf.zeros([b, k, t_max], tf.int32),  # finished_seq [B, K, T]
        tf.fill([b, k], NEG_INF),  # finished_scores [B, K]
        tf.zeros([b, k], tf.bool),  # finished_flags [B, K]
        max_lengths <= 0,  # done [B]
        initial_cache,
    )
    invariants = (tf.TensorShape([]), tf.TensorShape([None, None, None]), tf.TensorShape([None, None]),
                  tf.TensorShape([None, None, None]), tf.TensorShape([None, None]), tf.TensorShape([None, None]),
                  tf.TensorShape([None]), tf.nest.map_structure(_loop_shape, initial_cache))
    num_steps, alive_seq, alive_log_probs, finished_seq, finished_scores, finished_flags, _, _ = tf.while_loop(
        not_done, step, state, shape_invariants=invariants, maximum_iterations=t_max)

    # Items with no finished hypothesis fall back to their alive beams, scored at their full length.
    any_finished = tf.reduce_any(finished_flags, axis=1)  # [B]
    alive_scores = alive_log_probs / length_penalty(tf.minimum(max_lengths, num_steps), alpha)[:, None]  # [B, K]
    sequences = tf.where(any_finished[:, None, None], finished_seq, alive_seq)[:, :, :num_steps]  # [B, K, T]
    scores = tf.where(any_finished[:, None], finished_scores, alive_scores)  # [B, K]
    return SearchResult(sequences, scores, num_steps)


# -- the model-level entry point -----------------------------------------------------------------


def _beam_search_model(model, source_ids, beam_size, alpha, extra_length):
    max_lengths = model_step.max_output_lengths(source_ids, extra_length, model.config.max_length)  # [B]
    step_fn, cache = model_step.cached_step_fn(model, source_ids, beam_size, tf.maximum(tf.reduce_max(max_lengths), 0))
    result = beam_search(step_fn, cache, beam_size, max_lengths, alpha)
    return result.sequences, result.scores


def translate_ids(model, source_ids, beam_size=4, alpha=0.6, extra_length=50):
    """Beam search with the model's key/value cache (§6.1 defaults).

    source_ids [B, S] int (PAD-padded) -> (sequences [B, K, T] int32, scores [B, K] float32); see the module
    docstring for the conventions. Item b may emit up to (its non-PAD source tokens + extra_length) tokens, at
    most ``model.config.max_length``; PAD and BOS are never emitted. Runs one ``tf.function`` per model, traced
    once: all four arguments are tensors in its signature, so it also works inside an exported ``tf.function``.
    """
    fn = model_step.compiled_for(model, "beam_search", _beam_search_model, [
        tf.TensorSpec([None, None], tf.int32, name="source_ids"),
        tf.TensorSpec([], tf.int32, name="beam_size"),
        tf.TensorSpec([], tf.float32, name="alpha"),
        tf.TensorSpec([], tf.int32, name="extra_length"),
    ])
    return fn(tf.cast(source_ids, tf.int32), tf.cast(beam_size, tf.int32), tf.cast(alpha, tf.float32),
              tf.cast(extra_length, tf.int32))
