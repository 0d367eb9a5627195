"""``beam_search.beam_search`` with static shapes, for XLA (``tf.function(jit_compile=True)``).

The same search, step for step: K alive and K finished hypotheses per item,
each beam's 2K best tokens then the best 2K of the K * 2K candidates, EOS
admitted only from the top K, the GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^α,
a maximum length per item, and the per-item stop "K finished and no alive
beam can beat the worst of them" (§6.1; see ``beam_search.py``). What XLA
needs differs, as in flax's ``examples/wmt/decode.py``, T5X and KerasHub:

- every tensor keeps its shape from step to step: buffers [B, K, T_max] with
  T_max = ``max_steps`` a Python int, and a key/value cache preallocated to
  T_max positions (``model_step.preallocated_step_fn``);
- an item that stops stays in every tensor, masked: its search state is frozen
  (``tf.where(active, new, old)``), its results are written out at the step it
  stops, and its cache rows are no longer reordered (the decoder step still
  runs on them; nothing reads them again);
- the ``tf.while_loop`` (``maximum_iterations`` = T_max) ends when every item
  has stopped; sequences come back [B, K, T_max], PAD after the steps run
  (``num_steps``), which ``translate_ids`` cuts off as ``beam_search`` does.

The decoder step therefore costs T_max positions of attention and of cache
copy at every step, whatever the number of tokens decoded so far, and the
stopped items' rows are still computed; XLA must win that back.
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from keras_transformer import BOS_ID, EOS_ID
from keras_transformer.decoding import model_step
from keras_transformer.decoding.beam_search import SearchResult, length_penalty, top_k_by_blocks
from keras_transformer.decoding.model_step import NEG_INF


class _State(NamedTuple):
    """The loop state of every item (stopped ones frozen)."""

    active: tf.Tensor  # [B] bool, still searching
    alive_seq: tf.Tensor  # [B, K, T_max] int32
    alive_log_probs: tf.Tensor  # [B, K] float32
    finished_seq: tf.Tensor  # [B, K, T_max] int32
    finished_scores: tf.Tensor  # [B, K] float32
    finished_flags: tf.Tensor  # [B, K] bool


def _frozen(active, new, old):
    """Per item: new where active [B], else old; any [B, ...] shape."""
    return tf.where(tf.reshape(active, [-1] + [1] * (new.shape.rank - 1)), new, old)


def static_beam_search(step_fn, initial_cache, beam_size: int, max_lengths, alpha, max_steps: int, constants=(),
                       eos_id=EOS_ID, bos_id=BOS_ID) -> SearchResult:
    """``beam_search.beam_search`` with static shapes; see the module docstring.

    step_fn(token_ids [B*K], step, cache, constants) -> (log_probs [B*K, V], cache) must keep the cache's shapes.
    beam_size K and max_steps T_max are Python ints; max_lengths [B] int (at most T_max; clipped to it);
    alpha a float or scalar tensor. Returns sequences [B, K, T_max] (PAD after num_steps), scores [B, K].
    """
    k = beam_size
    max_lengths = tf.minimum(tf.cast(max_lengths, tf.int32), max_steps)  # [B]
    alpha = tf.cast(alpha, tf.float32)
    b = tf.shape(max_lengths)[0]
    t_max = tf.maximum(tf.reduce_max(max_lengths), 0)  # the steps the longest item may take
    at_position = tf.range(max_steps)  # [T_max]

    def step(i, state, cache, out_seq, out_scores):
        previous = tf.gather(state.alive_seq, tf.maximum(i - 1, 0), axis=2)  # [B, K]
        previous = tf.where(tf.equal(i, 0), tf.fill(tf.shape(previous), bos_id), previous)
        log_probs, cache = step_fn(tf.reshape(previous, [-1]), i, cache, constants)  # [B*K, V]

        # The 2K best expansions of each item, in two stages (as beam_search).
        per_beam = min(2 * k, log_probs.shape[-1])  # C = 2K, or V if smaller
        beam_log_probs, beam_tokens = top_k_by_blocks(log_probs, per_beam)  # [B*K, C]
        candidates = state.alive_log_probs[:, :, None] + tf.reshape(beam_log_probs, [b, k, per_beam])  # [B, K, C]
        top_log_probs, top_ids = tf.math.top_k(tf.reshape(candidates, [b, k * per_beam]), k=2 * k)  # [B, 2K]
        top_beams = top_ids // per_beam  # [B, 2K]
        top_tokens = tf.gather(tf.reshape(beam_tokens, [b, k * per_beam]), top_ids, batch_dims=1)  # [B, 2K]
        at_i = tf.equal(at_position, i)[None, None, :]  # [1, 1, T_max]
        top_seq = tf.where(at_i, top_tokens[:, :, None],
                           tf.gather(state.alive_seq, top_beams, batch_dims=1))  # [B, 2K, T_max]
        top_eos = tf.equal(top_tokens, eos_id)  # [B, 2K]

        # Alive: the best K expansions that do not end in EOS.
        alive_log_probs, alive_pick = tf.math.top_k(tf.where(top_eos, NEG_INF, top_log_probs), k=k)  # [B, K]
        source_beams = tf.gather(top_beams, alive_pick, batch_dims=1)  # [B, K]

        # Finished: EOS expansions ranked within the top K, scored log P / lp, merged with the old set.
        admit = tf.logical_and(top_eos, (tf.range(2 * k) < k)[None, :])  # [B, 2K]
        new_scores = tf.where(admit, top_log_probs / length_penalty(i + 1, alpha), NEG_INF)  # [B, 2K]
        finished_scores, finished_pick = tf.math.top_k(
            tf.concat([state.finished_scores, new_scores], axis=1), k=k)  # [B, K]
        new = _State(
            state.active, tf.gather(top_seq, alive_pick, batch_dims=1), alive_log_probs,
            tf.gather(tf.concat([state.finished_seq, top_seq], axis=1), finished_pick, batch_dims=1),  # [B, K, T_max]
            finished_scores,
            tf.gather(tf.concat([state.finished_flags, admit], axis=1), finished_pick, batch_dims=1))  # [B, K]
        new = _State(*(_frozen(state.active, n, o) for n, o in zip(new, state)))  # stopped items keep theirs

        # Stop at the maximum length, or with K finished that no alive beam can beat.
        best_alive = tf.reduce_max(new.alive_log_probs, axis=1) / length_penalty(max_lengths, alpha)  # [B]
        worst_finished = tf.reduce_min(tf.where(new.finished_flags, new.finished_scores, NEG_INF), axis=1)  # [B]
        stops = state.active & ((i + 1 >= max_lengths) | (worst_finished > best_alive))  # [B] stop at this step

        # Results of the items that stop now: the finished set, or the alive beams where none finished.
        any_finished = tf.reduce_any(new.finished_flags, axis=1)  # [B]
        sequences = tf.where(any_finished[:, None, None], new.finished_seq, new.alive_seq)  # [B, K, T_max]
        scores = tf.where(any_finished[:, None], new.finished_scores,
                          new.alive_log_probs / length_penalty(i + 1, alpha))  # [B, K]
        out_seq, out_scores = _frozen(stops, sequences, out_seq), _frozen(stops, scores, out_scores)

        # The cache in one gather: row j*K + m takes its source beam's row; stopped items' rows stay put.
        source_beams = tf.where(state.active[:, None], source_beams, tf.range(k)[None, :])  # [B, K]
        rows = tf.reshape(tf.range(b)[:, None] * k + source_beams, [-1])  # [B*K]
        cache = tf.nest.map_structure(lambda t: tf.gather(t, rows), cache)
        return i + 1, new._replace(active=state.active & ~stops), cache, out_seq, out_scores

    def searching(i, state, *unused):
        return tf.logical_and(i < t_max, tf.reduce_any(state.active))

    first_beam = tf.equal(tf.range(k), 0)[None, :]  # [1, K]: only beam 0 is live at first (no duplicates)
    start_log_probs = tf.where(first_beam, 0.0, NEG_INF) * tf.ones([b, 1])  # [B, K]
    empty = tf.zeros([b, k, max_steps], tf.int32)  # [B, K, T_max]
    state = _State(max_lengths > 0, empty, start_log_probs, empty, tf.fill([b, k], NEG_INF),
                   tf.zeros([b, k], tf.bool))  # items allowed no token keep the start state
    num_steps, _, _, out_seq, out_scores = tf.while_loop(
        searching, step, (tf.constant(0), state, initial_cache, empty, start_log_probs), maximum_iterations=max_steps)
    return SearchResult(out_seq, out_scores, num_steps)


# -- the model-level entry point -----------------------------------------------------------------


def compiled_search(model, beam_size: int, max_steps: int, jit_compile: bool = True):
    """The search of ``model`` as one ``tf.function`` per (model, K, T_max, jit_compile):
    (source_ids [B, S] int32, max_lengths [B] int32, alpha [] float32) -> (sequences [B, K, T_max] int32,
    scores [B, K] float32, num_steps [] int32). Traced once; under XLA compiled once per (B, S)."""
    def search(model, source_ids, max_lengths, alpha):
        step_fn, cache, constants = model_step.preallocated_step_fn(model, source_ids, beam_size, max_steps)
        return tuple(static_beam_search(step_fn, cache, beam_size, max_lengths, alpha, max_steps, constants))

    return model_step.compiled_for(model, f"static_beam_search/{beam_size}/{max_steps}/{jit_compile}", search, [
        tf.TensorSpec([None, None], tf.int32, name="source_ids"),
        tf.TensorSpec([None], tf.int32, name="max_lengths"),
        tf.TensorSpec([], tf.float32, name="alpha"),
    ], jit_compile=jit_compile)


def translate_ids(model, source_ids, beam_size=4, alpha=0.6, extra_length=50, max_steps=None, jit_compile=True):
    """``beam_search.translate_ids`` (same results) by the static-shape search.

    source_ids [B, S] -> (sequences [B, K, T] int32, T = steps run; scores [B, K] float32). ``max_steps`` T_max
    (default S + extra_length, at most ``model.config.max_length``) must cover every item's maximum length.
    """
    source_ids = tf.cast(source_ids, tf.int32)
    if max_steps is None:
        max_steps = min(int(source_ids.shape[1]) + int(extra_length), model.config.max_length)
    max_lengths = model_step.max_output_lengths(source_ids, extra_length, model.config.max_length)  # [B]
    search = compiled_search(model, int(beam_size), max_steps, jit_compile)
    sequences, scores, num_steps = search(source_ids, max_lengths, tf.cast(alpha, tf.float32))
    return sequences[:, :, :num_steps], scores
