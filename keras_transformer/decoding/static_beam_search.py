"""``beam_search.beam_search`` with static shapes, for XLA (``tf.function(jit_compile=True)``).

The same search, step for step: K alive and K finished hypotheses per item,
each beam's 2K best tokens then the best 2K of the K * 2K candidates, EOS
admitted only from the top K, the GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^α,
a maximum length per item, and the per-item stop "K finished and no alive
beam can beat the worst of them" (§6.1; see ``beam_search.py``). What XLA
needs differs, as in flax's ``examples/wmt/decode.py``, T5X and KerasHub:

- every tensor keeps its shape from step to step: buffers [B, K, T_max] with
  T_max = ``max_steps`` a Python int, and a key/value cache preallocated to
  T_max positions (``model_step.cached_step_fn`` with ``max_steps``);
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

import tensorflow as tf

from keras_transformer import BOS_ID, EOS_ID
from keras_transformer.decoding import model_step
from keras_transformer.decoding.beam_search import Beams, SearchResult


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

    def step(i, active, beams, cache, out_seq, out_scores):
        log_probs, cache = step_fn(beams.last_tokens(i, bos_id), i, cache, constants)  # [B*K, V]
        new, source_beams = beams.expand(log_probs, i, k, alpha, eos_id)
        new = Beams(*(_frozen(active, n, o) for n, o in zip(new, beams)))  # stopped items keep theirs
        stops = active & new.done(i, max_lengths, alpha)  # [B] the items that stop at this step
        out_seq, out_scores = (_frozen(stops, x, out) for x, out in zip(new.results(i + 1, alpha),
                                                                        (out_seq, out_scores)))
        # The cache in one gather: row j*K + m takes its source beam's row; stopped items' rows stay put.
        source_beams = tf.where(active[:, None], source_beams, tf.range(k)[None, :])  # [B, K]
        rows = tf.reshape(tf.range(b)[:, None] * k + source_beams, [-1])  # [B*K]
        cache = tf.nest.map_structure(lambda t: tf.gather(t, rows), cache)
        return i + 1, active & ~stops, new, cache, out_seq, out_scores

    def searching(i, active, *unused):
        return tf.logical_and(i < t_max, tf.reduce_any(active))

    start = Beams.start(b, k, max_steps)  # items allowed no token keep the start state
    num_steps, _, _, _, out_seq, out_scores = tf.while_loop(
        searching, step, (tf.constant(0), max_lengths > 0, start, initial_cache, start.alive_seq,
                          start.alive_log_probs), maximum_iterations=max_steps)
    return SearchResult(out_seq, out_scores, num_steps)


# -- the model-level entry point -----------------------------------------------------------------


def compiled_search(model, beam_size: int, max_steps: int, jit_compile: bool = True):
    """The search of ``model`` as one ``tf.function`` per (model, K, T_max, jit_compile):
    (source_ids [B, S] int32, max_lengths [B] int32, alpha [] float32) -> (sequences [B, K, T_max] int32,
    scores [B, K] float32, num_steps [] int32). Traced once; under XLA compiled once per (B, S)."""
    def search(model, source_ids, max_lengths, alpha):
        step_fn, cache, constants = model_step.cached_step_fn(model, source_ids, beam_size, max_steps)
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


def bucketed_translate_ids(model, source_ids, alpha, extra_length, beam_size: int, max_extra_length: int,
                           batch_sizes, source_lengths):
    """The XLA search of source_ids [B, S] padded to static shapes: B rows to the smallest of ``batch_sizes``
    >= B (empty rows, maximum length 0), S columns to the smallest of ``source_lengths`` >= S (PAD), with
    T_max = that length + ``max_extra_length`` (at most ``model.config.max_length``). One compilation per
    (batch size, source length). Needs B <= batch_sizes[-1], S <= source_lengths[-1] and
    extra_length <= max_extra_length; alpha and extra_length are tensors, beam_size a Python int.

    -> (sequences [B, K, T] int32, T = steps run; scores [B, K] float32), as ``beam_search.translate_ids``.
    """
    b, s = tf.shape(source_ids)[0], tf.shape(source_ids)[1]
    rows = tf.gather(batch_sizes, tf.searchsorted(tf.constant(batch_sizes), b[None])[0])  # B'
    padded_rows = tf.pad(source_ids, [[0, rows - b], [0, 0]])  # [B', S]
    lengths = model_step.max_output_lengths(padded_rows, extra_length, model.config.max_length)  # [B']
    lengths = tf.where(tf.range(rows) < b, lengths, 0)  # the padding rows take no step

    def search_at(columns):  # the branch for source length ``columns``
        def branch():
            search = compiled_search(model, beam_size, min(columns + max_extra_length, model.config.max_length))
            padded = tf.pad(padded_rows, [[0, 0], [0, columns - s]])  # [B', S']
            sequences, scores, num_steps = search(padded, lengths, alpha)
            return sequences[:b, :, :num_steps], scores[:b]
        return branch

    bucket = tf.searchsorted(tf.constant(source_lengths), s[None])[0]
    return tf.switch_case(bucket, [search_at(columns) for columns in source_lengths])
