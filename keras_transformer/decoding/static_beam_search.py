"""``beam_search.beam_search`` with static shapes, for XLA (``tf.function(jit_compile=True)``).

The same search, step for step: K alive and K finished hypotheses per item,
each beam's 2K best tokens then the best 2K of the K * 2K candidates, EOS
admitted only from the top K, the GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^α,
a maximum length per item, and the per-item stop "N finished and no alive
beam can beat the N-th best of them" (§6.1; see ``beam_search.py``). What XLA
needs differs, as in flax's ``examples/wmt/decode.py``, T5X and KerasHub:

- every tensor keeps its shape from step to step: buffers [B, K, T_max] with
  T_max = ``max_steps`` a Python int, and a key/value cache preallocated to
  T_max positions (``model_step.cached_step_fn`` with ``max_steps``);
- an item that stops stays in every tensor, masked: its search state is frozen
  (``tf.where(active, new, old)``), its results are written out at the step it
  stops, and its cache rows are no longer reordered (the decoder step still
  runs on them; nothing reads them again);
- the search ends when every item has stopped; sequences come back
  [B, K, T_max], PAD after the steps run (``num_steps``), which
  ``translate_ids`` cuts off as ``beam_search`` does.

A step attends over, and reorders, every position of the cache, written or
not. So that this cost follows the tokens decoded rather than T_max, the steps
run in *segments* (``segment_sizes``: 16, 32, 64, ..., T_max), one
``tf.while_loop`` each, all in the one compiled function: loop j runs steps
T_{j-1}..T_j - 1 on a cache and beam buffers T_j positions long (static), and
ends early when every item has stopped; between loops the cache is zero-padded
to T_{j+1} positions (``model_step.preallocate``) under a ``tf.cond`` that
skips the remaining loops once every item has stopped. Positions past the step
are masked (weight exactly 0), so the segments change no result. The stopped
items' rows are still computed; XLA must win that back.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import tensorflow as tf

from keras_transformer import BOS_ID, EOS_ID
from keras_transformer.decoding import model_step
from keras_transformer.decoding.beam_search import Beams, SearchResult, check_stop_rule, hypotheses_to_settle


def _frozen(active, new, old):
    """Per item: new where active [B], else old; any [B, ...] shape."""
    return tf.where(tf.reshape(active, [-1] + [1] * (new.shape.rank - 1)), new, old)


def _pad_positions(x, positions: int):
    """[B, K, t] -> [B, K, positions]: PAD (0) after."""
    return tf.pad(x, [[0, 0], [0, 0], [0, positions - x.shape[2]]])


def segment_sizes(max_steps: int, first: Optional[int] = 16) -> Tuple[int, ...]:
    """The positions of each segment's loop: first, 2 first, 4 first, ... then T_max = ``max_steps``.

    A doubling s is kept while s + first <= T_max (no short last segment: T_max 66, first 16 -> 16, 32, 66;
    T_max 130 -> 16, 32, 64, 130). first None (or >= T_max): one loop, (T_max,)."""
    sizes = []
    while first and (sizes[-1] * 2 if sizes else first) + first <= max_steps:
        sizes.append(sizes[-1] * 2 if sizes else first)
    return tuple(sizes) + (max_steps,)


def masked_step(step_fn, beam_size: int, eos_id=EOS_ID, bos_id=BOS_ID, stop_rule="exact"):
    """One step of the search on fixed shapes, stopped items masked: the loop body of ``static_beam_search`` and
    the compiled step of ``hybrid_beam_search``.

    -> step(i, active [B], beams, cache [B*K, ...], constants, max_lengths [B], alpha, n) -> (beams, stops [B],
    cache): the items still ``active`` extended by one token (``Beams.expand``), the others' beams frozen;
    ``stops``, the active items that stop at this step (``Beams.done``); the cache reordered with the beams in
    one gather (row j*K + m takes its source beam's row; inactive items' rows stay put). Every output keeps its
    input's shape."""
    k = beam_size

    def step(i, active, beams, cache, constants, max_lengths, alpha, n):
        log_probs, cache = step_fn(beams.last_tokens(i, bos_id), i, cache, constants)  # [B*K, V]
        new, source_beams = beams.expand(log_probs, i, k, alpha, eos_id)
        new = Beams(*(_frozen(active, x, old) for x, old in zip(new, beams)))  # stopped items keep theirs
        stops = active & new.done(i, max_lengths, alpha, n, stop_rule)  # [B] the items that stop at this step
        source_beams = tf.where(active[:, None], source_beams, tf.range(k)[None, :])  # [B, K]
        rows = tf.reshape(tf.range(tf.shape(active)[0])[:, None] * k + source_beams, [-1])  # [B*K]
        return new, stops, tf.nest.map_structure(lambda t: tf.gather(t, rows), cache)

    return step


def static_beam_search(step_fn, initial_cache, beam_size: int, max_lengths, alpha, max_steps: int, constants=(),
                       eos_id=EOS_ID, bos_id=BOS_ID, segments: Optional[Sequence[int]] = None,
                       grow_cache=None, num_hypotheses=None, stop_rule="exact") -> SearchResult:
    """``beam_search.beam_search`` with static shapes; see the module docstring.

    step_fn(token_ids [B*K], step, cache, constants) -> (log_probs [B*K, V], cache) must keep the cache's shapes.
    beam_size K and max_steps T_max are Python ints; max_lengths [B] int (at most T_max; clipped to it);
    alpha a float or scalar tensor; num_hypotheses N and stop_rule as in ``beam_search`` (default K, "exact").
    Returns sequences
    [B, K, T_max] (PAD after num_steps), scores [B, K].

    segments: increasing Python ints T_1 < T_2 < ... < T_n = T_max (default (T_max,), one loop): steps
    T_{j-1}..T_j - 1 run in loop j with every position-indexed tensor T_j long; ``initial_cache`` holds T_1
    positions, and grow_cache(cache, T_j) -> the cache T_j long (``model_step.preallocate``) between loops.
    """
    k = beam_size
    sizes = tuple(segments) if segments else (max_steps,)
    assert list(sizes) == sorted(set(sizes)) and sizes[-1] == max_steps, (sizes, max_steps)
    assert len(sizes) == 1 or grow_cache is not None, "a search in segments needs grow_cache"
    max_lengths = tf.minimum(tf.cast(max_lengths, tf.int32), max_steps)  # [B]
    alpha = tf.cast(alpha, tf.float32)
    n = hypotheses_to_settle(num_hypotheses, k)
    b = tf.shape(max_lengths)[0]
    t_max = tf.maximum(tf.reduce_max(max_lengths), 0)  # the steps the longest item may take

    masked = masked_step(step_fn, k, eos_id, bos_id, stop_rule)

    def step(i, active, beams, cache, out_seq, out_scores):  # position-indexed tensors T_j long, T_j static
        new, stops, cache = masked(i, active, beams, cache, constants, max_lengths, alpha, n)
        out_seq, out_scores = (_frozen(stops, x, out) for x, out in zip(new.results(i + 1, alpha),
                                                                        (out_seq, out_scores)))
        return i + 1, active & ~stops, new, cache, out_seq, out_scores

    def searching(i, active):
        return tf.logical_and(i < t_max, tf.reduce_any(active))

    def segment(j, i, active, beams, cache, out_seq, out_scores):
        """Loop j from step i = T_{j-1} (0 for j = 0) -> (num_steps, sequences [B, K, T_max], scores [B, K])."""
        end = sizes[j]
        i, active, beams, cache, out_seq, out_scores = tf.while_loop(
            lambda i, active, *unused: tf.logical_and(searching(i, active), i < end), step,
            (i, active, beams, cache, out_seq, out_scores), maximum_iterations=end - (sizes[j - 1] if j else 0))
        stop = lambda: (i, _pad_positions(out_seq, max_steps), out_scores)  # noqa: E731
        if j + 1 == len(sizes):
            return stop()
        grown = sizes[j + 1]  # here i = T_j: the next loop, its tensors T_{j+1} long, or none if all stopped
        beams = beams._replace(alive_seq=_pad_positions(beams.alive_seq, grown),
                               finished_seq=_pad_positions(beams.finished_seq, grown))
        return tf.cond(searching(i, active), lambda: segment(j + 1, i, active, beams, grow_cache(cache, grown),
                                                             _pad_positions(out_seq, grown), out_scores), stop)

    start = Beams.start(b, k, sizes[0])  # items allowed no token keep the start state
    num_steps, out_seq, out_scores = segment(0, tf.constant(0), max_lengths > 0, start, initial_cache,
                                             start.alive_seq, start.alive_log_probs)
    return SearchResult(out_seq, out_scores, num_steps)


# -- the model-level entry point -----------------------------------------------------------------


def compiled_search(model, beam_size: int, max_steps: int, jit_compile: bool = True, first_segment: Optional[int] = 16,
                    stop_rule: str = "exact"):
    """The search of ``model`` as one ``tf.function`` per (model, K, T_max, jit_compile, first_segment, stop_rule):
    (source_ids [B, S] int32, max_lengths [B] int32, alpha [] float32, num_hypotheses [] int32) ->
    (sequences [B, K, T_max] int32, scores [B, K] float32, num_steps [] int32). Traced once; under XLA compiled
    once per (B, S).
    first_segment: the loops' cache sizes are ``segment_sizes(T_max, first_segment)`` (None: one loop)."""
    sizes = segment_sizes(max_steps, first_segment)

    def search(model, source_ids, max_lengths, alpha, num_hypotheses):
        step_fn, cache, constants = model_step.cached_step_fn(model, source_ids, beam_size, sizes[0])
        return tuple(static_beam_search(step_fn, cache, beam_size, max_lengths, alpha, max_steps, constants,
                                        segments=sizes, grow_cache=model_step.preallocate,
                                        num_hypotheses=num_hypotheses, stop_rule=stop_rule))

    key = f"static_beam_search/{beam_size}/{max_steps}/{jit_compile}/{sizes}/{check_stop_rule(stop_rule)}"
    return model_step.compiled_for(model, key, search, [
        tf.TensorSpec([None, None], tf.int32, name="source_ids"),
        tf.TensorSpec([None], tf.int32, name="max_lengths"),
        tf.TensorSpec([], tf.float32, name="alpha"),
        tf.TensorSpec([], tf.int32, name="num_hypotheses"),
    ], jit_compile=jit_compile)


def translate_ids(model, source_ids, beam_size=4, alpha=0.6, extra_length=50, max_steps=None, jit_compile=True,
                  first_segment: Optional[int] = 16, num_hypotheses=None, stop_rule="exact"):
    """``beam_search.translate_ids`` (same results) by the static-shape search.

    source_ids [B, S] -> (sequences [B, K, T] int32, T = steps run; scores [B, K] float32). ``max_steps`` T_max
    (default S + extra_length, at most ``model.config.max_length``) must cover every item's maximum length.
    ``first_segment``: see ``compiled_search``; ``stop_rule`` as in ``beam_search.translate_ids``.
    """
    source_ids = tf.cast(source_ids, tf.int32)
    if max_steps is None:
        max_steps = min(int(source_ids.shape[1]) + int(extra_length), model.config.max_length)
    max_lengths = model_step.max_output_lengths(source_ids, extra_length, model.config.max_length)  # [B]
    search = compiled_search(model, int(beam_size), max_steps, jit_compile, first_segment, stop_rule)
    sequences, scores, num_steps = search(source_ids, max_lengths, tf.cast(alpha, tf.float32),
                                          hypotheses_to_settle(num_hypotheses, beam_size))
    return sequences[:, :, :num_steps], scores


def bucketed_translate_ids(model, source_ids, alpha, extra_length, beam_size: int, max_extra_length: int,
                           batch_sizes, source_lengths, num_hypotheses=None, stop_rule="exact"):
    """The XLA search of source_ids [B, S] padded to static shapes: B rows to the smallest of ``batch_sizes``
    >= B (empty rows, maximum length 0), S columns to the smallest of ``source_lengths`` >= S (PAD), with
    T_max = that length + ``max_extra_length`` (at most ``model.config.max_length``). One compilation per
    (batch size, source length). Needs B <= batch_sizes[-1], S <= source_lengths[-1] and
    extra_length <= max_extra_length; alpha, extra_length and num_hypotheses (default K) are tensors, beam_size
    a Python int.

    -> (sequences [B, K, T] int32, T = steps run; scores [B, K] float32), as ``beam_search.translate_ids``.
    """
    b, s = tf.shape(source_ids)[0], tf.shape(source_ids)[1]
    rows = tf.gather(batch_sizes, tf.searchsorted(tf.constant(batch_sizes), b[None])[0])  # B'
    padded_rows = tf.pad(source_ids, [[0, rows - b], [0, 0]])  # [B', S]
    lengths = model_step.max_output_lengths(padded_rows, extra_length, model.config.max_length)  # [B']
    lengths = tf.where(tf.range(rows) < b, lengths, 0)  # the padding rows take no step
    num_hypotheses = hypotheses_to_settle(num_hypotheses, beam_size)

    def search_at(columns):  # the branch for source length ``columns``
        def branch():
            search = compiled_search(model, beam_size, min(columns + max_extra_length, model.config.max_length),
                                     stop_rule=stop_rule)
            padded = tf.pad(padded_rows, [[0, 0], [0, columns - s]])  # [B', S']
            sequences, scores, num_steps = search(padded, lengths, alpha, num_hypotheses)
            return sequences[:b, :, :num_steps], scores[:b]
        return branch

    bucket = tf.searchsorted(tf.constant(source_lengths), s[None])[0]
    return tf.switch_case(bucket, [search_at(columns) for columns in source_lengths])
