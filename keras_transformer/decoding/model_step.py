"""Adapters from a ``Transformer`` to the searches' ``step_fn(token_ids [B*K], step, cache)`` interface.

``cached_step_fn`` does one token of decoder work per step against the model's
key/value cache (``Transformer.decode_step``), growing or preallocated to T_max
positions (static shapes, for the XLA-compiled ``static_beam_search``).
``redecode_step_fn`` is the
no-cache baseline: it re-runs the full decoder over the whole prefix at every
step (for benchmarks and equivalence tests). Both encode the source once and
return ``(step_fn, cache, constants)``: per-beam state [B*K, ...] in the cache
(reordered with the beams), and the encoder state repeated per beam
[B*K, ...] in the constants (identical across an item's beams, so never
reordered; repeated once, so that no step copies or transposes it).

Decoding never emits PAD or BOS: their log-probabilities are set to NEG_INF
(the others are the model's own, not renormalised). A step returns
``log_probs.LogProbs``: the searches normalise only the tokens they keep.
"""

from __future__ import annotations

import weakref
from typing import Optional

import tensorflow as tf

from keras_transformer import BOS_ID, PAD_ID
from keras_transformer.decoding.log_probs import NEG_INF, LogProbs  # noqa: F401 (NEG_INF re-exported)
from keras_transformer.layers import masks


def log_probs_from_logits(logits) -> LogProbs:
    """logits [N, V] -> their log-softmax as ``LogProbs`` (float32), PAD and BOS banned."""
    return LogProbs.from_logits(logits, banned=(PAD_ID, BOS_ID))


def source_lengths(source_ids):
    """source_ids [B, S] (subwords, EOS, PAD after) -> [B] int32: each row's non-PAD tokens, EOS included."""
    return tf.reduce_sum(tf.cast(tf.not_equal(source_ids, PAD_ID), tf.int32), axis=1)  # [B]


def max_output_lengths(source_ids, extra_length, model_max_length):
    """source_ids [B, S] -> [B] int32: non-pad source tokens + extra_length (§6.1), at most model_max_length."""
    return tf.minimum(source_lengths(source_ids) + tf.cast(extra_length, tf.int32), model_max_length)  # [B]


def _tile(x, beam_size):
    """[B, ...] -> [B*K, ...]: each item repeated K times, beams of an item adjacent."""
    return tf.repeat(x, beam_size, axis=0)


def cached_step_fn(model, source_ids, beam_size, max_steps: Optional[int] = None):
    """(step_fn, cache, constants): one token per step; cache k, v [B*K, H, t, d] per layer grow each step.

    With ``max_steps`` T_max (a Python int) they are preallocated instead, [B*K, H, T_max, d], zeros at first,
    and each step writes its position (``Transformer.decode_step(..., preallocated=True)``): static shapes,
    for the XLA-compiled ``static_beam_search``. The step reads T_max off the cache, so ``preallocate`` may
    grow the cache between steps (a search in segments passes its first segment's size here).

    A model that reads a context (``Transformer.reads_context``: the parser's word features) also keeps each
    hypothesis's ``context_state`` in the cache ({"layers": [...], "context": ...}, [B*K] rows) and its items'
    ``source_context`` (one row per item) in the constants.
    """
    memory = model.encode(source_ids)  # [B, S, D]
    layers = model.init_cache(memory)  # per layer: k, v [B, H, 0, d]; memory_k, memory_v [B, H, S, d]
    constants = {"memory": [{name: c[name] for name in ("memory_k", "memory_v")} for c in layers],
                 "memory_mask": masks.padding_mask(source_ids)}  # [B, H, S, d] per layer, [B, 1, 1, S]
    cache = [{name: _tile(c[name], beam_size) for name in ("k", "v")} for c in layers]  # [B*K, H, 0, d]
    if max_steps is not None:
        cache = preallocate(cache, max_steps)  # [B*K, H, T_max, d]
    weights = [{"qkv": c["qkv"]} for c in layers]  # computed before the loop, read by every step
    projection = model.embedding.transposed(memory.dtype)  # E^T [D, V], likewise
    reads = model.reads_context
    if reads:
        constants["context"] = model.source_context(source_ids, memory)  # e.g. the parser's words [B, S, D]
        cache = {"layers": cache, "context": model.context_state(tf.shape(source_ids)[0] * beam_size)}

    def step_fn(token_ids, step, cache, constants):
        extra, state, layers = None, None, cache
        if reads:
            extra, state = model.context_step(token_ids, cache["context"], constants["context"])  # [N, D]
            layers = cache["layers"]
        layers = [dict(c, **m, **w) for c, m, w in zip(layers, constants["memory"], weights)]
        logits, layers = model.decode_step(token_ids, step, layers, constants["memory_mask"], extra,
                                           projection, preallocated=max_steps is not None)  # [B*K, V]
        layers = [{"k": c["k"], "v": c["v"]} for c in layers]
        return log_probs_from_logits(logits), ({"layers": layers, "context": state} if reads else layers)

    return step_fn, cache, constants


def preallocate(cache, positions: int):
    """A ``cached_step_fn`` cache with its self-attention k, v [N, H, t, d] zero-padded to [N, H, positions, d].

    The rest (a context-reading model's state) is kept. positions: a Python int >= t. A static-shape search that
    runs in segments (``static_beam_search``) grows the cache with it between its loops."""
    def pad(t):
        now = t.shape[2] if t.shape[2] is not None else tf.shape(t)[2]
        return tf.pad(t, [[0, 0], [0, 0], [0, positions - now], [0, 0]])  # [N, H, positions, d]

    layers = cache["layers"] if isinstance(cache, dict) else cache
    layers = [{name: pad(t) for name, t in c.items()} for c in layers]
    return dict(cache, layers=layers) if isinstance(cache, dict) else layers


def redecode_step_fn(model, source_ids, beam_size, max_steps):
    """(step_fn, cache, constants): the no-cache baseline; the cache is only the prefix ids [B*K, T_max]."""
    constants = {"memory": model.encode(source_ids),  # [B, S, D]
                 "memory_mask": masks.padding_mask(source_ids)}  # [B, 1, 1, S]
    if model.reads_context:
        constants["context"] = model.source_context(source_ids, constants["memory"])
    cache = {"prefix": tf.zeros([tf.shape(source_ids)[0] * beam_size, max_steps], tf.int32)}  # [B*K, T_max]

    def step_fn(token_ids, step, cache, constants):
        at_step = tf.equal(tf.range(max_steps), step)[None, :]  # [1, T_max]
        prefix = tf.where(at_step, token_ids[:, None], cache["prefix"])  # [B*K, T_max]
        beams = tf.shape(token_ids)[0] // tf.shape(constants["memory"])[0]  # K rows per item
        memory, memory_mask = (_tile(constants[name], beams) for name in ("memory", "memory_mask"))  # B*K rows
        context = (tf.nest.map_structure(lambda c: _tile(c, beams), constants["context"]) if "context" in constants
                   else None)
        logits = model.decode(prefix[:, : step + 1], memory, memory_mask, context=context)[:, -1, :]
        return log_probs_from_logits(logits), {"prefix": prefix}  # [B*K, V]

    return step_fn, cache, constants


_COMPILED = weakref.WeakKeyDictionary()


def compiled_for(model, name, fn, input_signature, jit_compile=False):
    """``tf.function(lambda *args: fn(model, *args), input_signature, jit_compile)``, built once per (model, name).

    The function holds the model weakly, so the cache does not keep models alive. ``autograph=False``: the searches
    and the model are written in TensorFlow's own control flow (``tf.while_loop``, ``tf.where``; Python ``if`` and
    ``for`` only over Python values), so AutoGraph's source conversion would change nothing and costs most of a
    search's tracing time (docs/serving.md, "Tracing"). The serving modules' functions that call these pass it too.
    """
    per_model = _COMPILED.setdefault(model, {})
    if name not in per_model:
        ref = weakref.ref(model)
        per_model[name] = tf.function(lambda *args: fn(ref(), *args), input_signature=input_signature,
                                      jit_compile=jit_compile, autograph=False)
    return per_model[name]
