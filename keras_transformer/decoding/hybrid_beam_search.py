"""``beam_search.beam_search``'s shrinking loop around an XLA-compiled step (``kt-export --step_compile``).

The two searches each have half of what a fast decoder needs. ``beam_search``
drops an item as soon as it stops, so the remaining steps spend no work on it,
but each step is a few hundred TensorFlow ops run one by one; the XLA search
(``static_beam_search``) fuses a step into a few kernels, but as one static
program it keeps every stopped item's rows to the end. Here a dynamic
``tf.while_loop`` (not compiled) calls, once per step, the step of the static
search (``static_beam_search.masked_step``: decoder step, log-probabilities,
``Beams.expand``, ``Beams.done`` and the cache reorder) as a
``tf.function(jit_compile=True)``. XLA compiles that function once per input
shape it meets, so the shapes it sees are kept to a small set:

- rows: the live items are kept in R rows, R a power of two (R * K beams);
  rows of items that stopped stay in, masked (their state frozen), until the
  live items fit a smaller power of two: then the loop *compacts*, gathering
  the live items into the first rows of the smaller set (``rows_for``);
- positions: the key/value cache and the beams' sequences are preallocated to
  L positions, L = 16, 32, 64, ... (``model_step.preallocate``), and doubled
  when the step reaches L (positions past the step are masked: weight exactly
  0, so no result changes);
- source: the encoder runs once, outside the compiled step, on the batch as it
  is; its keys/values and mask are padded (masked) to ``source_positions``, the
  longest source the export reads.

So a search compiles at most (powers of two up to its batch) x (cache sizes)
programs, each once per process; an export's warm-up requests compile them
at load time. Results: as ``beam_search.beam_search``'s (sequences
[B, K, T] int32, T = steps run; scores [B, K]), up to the rounding of XLA's
kernels, which is the XLA search's (``static_beam_search``).
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import tensorflow as tf

from keras_transformer import BOS_ID, EOS_ID
from keras_transformer.decoding import model_step
from keras_transformer.decoding.beam_search import (Beams, SearchResult, cache_invariants, check_stop_rule,
                                                    hypotheses_to_settle)
from keras_transformer.decoding.static_beam_search import masked_step

FIRST_POSITIONS = 16  # the cache's first size L; it doubles when the step reaches it
_POWERS = [0] + [2 ** j for j in range(24)]  # (a list: a tensor made at import would start TensorFlow's runtime)


def rows_for(live):
    """[] int32 live items -> [] int32 rows the loop keeps for them: the next power of two (0 for 0)."""
    powers = tf.constant(_POWERS, tf.int32)
    return tf.gather(powers, tf.searchsorted(powers, tf.reshape(live, [1]))[0])


def _positions(x, length):
    """x [R, K, t] -> [R, K, length]: cut after ``length`` or PAD (0) up to it; length a scalar tensor."""
    x = x[:, :, :length]
    return tf.pad(x, [[0, 0], [0, 0], [0, length - tf.shape(x)[2]]])


class _Rows(NamedTuple):
    """The loop's rows (leading dimension R): live items, then stopped ones kept until the next compaction."""

    index: tf.Tensor  # [R] int32, the item's row in the output
    active: tf.Tensor  # [R] bool, still searching
    max_lengths: tf.Tensor  # [R] int32
    beams: Beams  # [R, K, L]


def hybrid_beam_search(step_fn, initial_cache, beam_size: int, max_lengths, alpha, constants=(), eos_id=EOS_ID,
                       bos_id=BOS_ID, num_hypotheses=None, stop_rule="exact", positions: int = FIRST_POSITIONS,
                       grow_cache=model_step.preallocate, jit_compile=True) -> SearchResult:
    """Beam search over ``step_fn`` with its step compiled by XLA; see the module docstring.

    step_fn(token_ids [R*K], step, cache, constants) -> (log_probs [R*K, V], cache) must keep the cache's shapes
    (a cache preallocated to L positions). initial_cache [B*K, ...] preallocated to L = ``positions`` (a Python
    int), which grow_cache(cache, 2L) doubles; constants [B, ...] (one row per item, static shapes but the
    first); beam_size K a Python int; max_lengths [B]; alpha, num_hypotheses (default K) and stop_rule as in
    ``beam_search.beam_search``. ``jit_compile`` False runs the same loop without XLA (for tests).
    """
    k = beam_size
    max_lengths = tf.cast(max_lengths, tf.int32)  # [B]
    alpha = tf.cast(alpha, tf.float32)
    n = hypotheses_to_settle(num_hypotheses, k)
    b = tf.shape(max_lengths)[0]
    t_max = tf.maximum(tf.reduce_max(max_lengths), 0)  # T of the outputs
    compiled = tf.function(masked_step(step_fn, k, eos_id, bos_id, check_stop_rule(stop_rule)),
                           jit_compile=jit_compile, autograph=False)

    def beam_rows(items):
        """[R] item positions -> [R*K] rows of their beams."""
        return tf.reshape(items[:, None] * k + tf.range(k)[None, :], [-1])

    def take(rows, cache, constants, picked):
        """The loop's state at rows ``picked`` [R'] (positions in the current rows)."""
        gather = lambda t: tf.gather(t, picked)  # noqa: E731
        return (tf.nest.map_structure(gather, rows), tf.nest.map_structure(lambda t: tf.gather(t, beam_rows(picked)),
                                                                           cache),
                tf.nest.map_structure(gather, constants))

    def step(i, rows, cache, constants, out_seq, out_scores):
        beams, stops, cache = compiled(i, rows.active, rows.beams, cache, constants, rows.max_lengths, alpha, n)
        rows = rows._replace(beams=beams, active=rows.active & ~stops)

        def retire():  # the stopped items' results, written to their output rows
            stopped = tf.where(stops)[:, 0]  # [S]
            sequences, scores = (tf.gather(x, stopped) for x in beams.results(i + 1, alpha))
            out = tf.gather(rows.index, stopped)[:, None]  # [S, 1]
            return (tf.tensor_scatter_nd_update(out_seq, out, _positions(sequences, t_max)),
                    tf.tensor_scatter_nd_update(out_scores, out, scores))

        out_seq, out_scores = tf.cond(tf.reduce_any(stops), retire, lambda: (out_seq, out_scores))
        live = tf.reduce_sum(tf.cast(rows.active, tf.int32))
        fewer = rows_for(live)

        def compact():  # the live items first (in their order), then stopped ones up to the smaller row count
            return take(rows, cache, constants, tf.argsort(tf.cast(~rows.active, tf.int32), stable=True)[:fewer])

        rows, cache, constants = tf.cond((live > 0) & (fewer < tf.shape(rows.index)[0]), compact,
                                         lambda: (rows, cache, constants))
        positions = tf.shape(rows.beams.alive_seq)[2]

        def grow():  # the step reached the cache's last position: twice the positions
            beams = rows.beams._replace(alive_seq=_positions(rows.beams.alive_seq, 2 * positions),
                                        finished_seq=_positions(rows.beams.finished_seq, 2 * positions))
            return rows._replace(beams=beams), grow_cache(cache, 2 * positions)

        rows, cache = tf.cond(searching(i + 1, rows) & tf.equal(i + 1, positions), grow, lambda: (rows, cache))
        return i + 1, rows, cache, constants, out_seq, out_scores

    def searching(i, rows, *state):
        return tf.logical_and(i < t_max, tf.reduce_any(rows.active))

    start = Beams.start(b, k, t_max)  # items allowed no token keep the start state
    searched = tf.cast(tf.where(max_lengths > 0)[:, 0], tf.int32)  # [B']
    # The searched items, then copies of the first of them (inactive) up to a power of two.
    padded = tf.gather(searched, tf.minimum(tf.range(rows_for(tf.size(searched))), tf.size(searched) - 1))  # [R]
    rows = _Rows(padded, tf.range(tf.size(padded)) < tf.size(searched), tf.gather(max_lengths, padded),
                 Beams.start(tf.size(padded), k, positions))
    cache = tf.nest.map_structure(lambda t: tf.gather(t, beam_rows(padded)), initial_cache)
    constants = tf.nest.map_structure(lambda t: tf.gather(t, padded), constants)
    row_invariants = tf.nest.map_structure(lambda t: tf.TensorShape([None] * t.shape.rank), rows)
    num_steps, _, _, _, out_seq, out_scores = tf.while_loop(
        searching, step, (tf.constant(0), rows, cache, constants, start.alive_seq, start.alive_log_probs),
        shape_invariants=(tf.TensorShape([]), row_invariants, cache_invariants(cache), cache_invariants(constants),
                          tf.TensorShape([None, None, None]), tf.TensorShape([None, None])),
        maximum_iterations=t_max)
    return SearchResult(out_seq[:, :, :num_steps], out_scores, num_steps)


# -- the model-level entry point -----------------------------------------------------------------


def _padded_source(constants, positions: int):
    """``cached_step_fn``'s constants with the encoder's keys/values [B, H, S, d] and mask [B, 1, 1, S] padded
    (masked) to ``positions``: the compiled step sees one source length."""
    def pad(t, axis):
        paddings = [[0, 0]] * t.shape.rank
        paddings[axis] = [0, positions - tf.shape(t)[axis]]
        return tf.pad(t, paddings)

    memory = [{name: pad(t, 2) for name, t in layer.items()} for layer in constants["memory"]]
    return dict(constants, memory=memory, memory_mask=pad(constants["memory_mask"], 3))


def translate_ids(model, source_ids, beam_size: int, alpha, extra_length, num_hypotheses=None, stop_rule="exact",
                  source_positions: Optional[int] = None, first_positions: int = FIRST_POSITIONS, jit_compile=True):
    """``beam_search.translate_ids`` (the same search) by ``hybrid_beam_search``, as one ``tf.function`` per
    (model, K, source positions, first cache size, stop rule, jit_compile), traced once.

    source_ids [B, S] int -> (sequences [B, K, T] int32, scores [B, K] float32). ``source_positions``: the source
    length the compiled step sees (default the model's max_length); S must not exceed it. ``first_positions``:
    the cache's first size L (``hybrid_beam_search``'s ``positions``).
    """
    positions = source_positions or model.config.max_length

    def search(model, source_ids, alpha, extra_length, num_hypotheses):
        max_lengths = model_step.max_output_lengths(source_ids, extra_length, model.config.max_length)  # [B]
        step_fn, cache, constants = model_step.cached_step_fn(model, source_ids, beam_size, first_positions)
        result = hybrid_beam_search(step_fn, cache, beam_size, max_lengths, alpha,
                                    _padded_source(constants, positions), num_hypotheses=num_hypotheses,
                                    stop_rule=stop_rule, positions=first_positions, jit_compile=jit_compile)
        return result.sequences, result.scores

    key = f"hybrid_beam_search/{beam_size}/{positions}/{first_positions}/{check_stop_rule(stop_rule)}/{jit_compile}"
    fn = model_step.compiled_for(model, key, search, [tf.TensorSpec([None, None], tf.int32, name="source_ids"),
                                                      tf.TensorSpec([], tf.float32, name="alpha"),
                                                      tf.TensorSpec([], tf.int32, name="extra_length"),
                                                      tf.TensorSpec([], tf.int32, name="num_hypotheses")])
    return fn(tf.cast(source_ids, tf.int32), tf.cast(alpha, tf.float32), tf.cast(extra_length, tf.int32),
              hypotheses_to_settle(num_hypotheses, beam_size))
