"""Adapters from a ``Transformer`` to the searches' ``step_fn(token_ids [B*K], step, cache)`` interface.

``cached_step_fn`` does one token of decoder work per step against the model's
key/value cache (``Transformer.decode_step``). ``redecode_step_fn`` is the
no-cache baseline: it re-runs the full decoder over the whole prefix at every
step (for benchmarks and equivalence tests). Both encode the source once and
tile the per-item encoder state K times; only per-beam state is in the cache.

Decoding never emits PAD or BOS: their log-probabilities are set to NEG_INF
(the others are the model's own, not renormalised).
"""

from __future__ import annotations

import weakref

import tensorflow as tf

from keras_transformer import BOS_ID, PAD_ID
from keras_transformer.layers import masks

NEG_INF = -1.0e9  # log-prob of a banned token; the same value as beam_search.NEG_INF


def log_probs_from_logits(logits):
    """logits [N, V] -> log-softmax [N, V] float32 with PAD and BOS banned."""
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)  # [N, V]
    banned = tf.reduce_any(tf.equal(tf.range(tf.shape(log_probs)[-1])[:, None], [PAD_ID, BOS_ID]), axis=1)  # [V]
    return tf.where(banned[None, :], NEG_INF, log_probs)


def max_output_lengths(source_ids, extra_length, model_max_length):
    """source_ids [B, S] -> [B] int32: non-pad source tokens + extra_length (§6.1), at most model_max_length."""
    source_lengths = tf.reduce_sum(tf.cast(tf.not_equal(source_ids, PAD_ID), tf.int32), axis=1)  # [B]
    return tf.minimum(source_lengths + tf.cast(extra_length, tf.int32), model_max_length)


def _tile(x, beam_size):
    """[B, ...] -> [B*K, ...]: each item repeated K times, beams of an item adjacent."""
    return tf.repeat(x, beam_size, axis=0)


def cached_step_fn(model, source_ids, beam_size, max_steps):
    """(step_fn, initial_cache): one token per step; the cache holds k, v [B*K, H, T_max, d] per layer."""
    memory = model.encode(source_ids)  # [B, S, D]
    memory_mask = _tile(masks.padding_mask(source_ids), beam_size)  # [B*K, 1, 1, S]
    full = model.init_cache(memory, max_steps)  # per layer: k, v [B, H, T_max, d]; memory_k, memory_v [B, H, S, d]
    memory_kv = [{"memory_k": _tile(c["memory_k"], beam_size), "memory_v": _tile(c["memory_v"], beam_size)}
                 for c in full]  # [B*K, H, S, d], tiled once, never reordered
    initial_cache = [{"k": _tile(c["k"], beam_size), "v": _tile(c["v"], beam_size)} for c in full]  # [B*K, H, T_max, d]

    def step_fn(token_ids, step, cache):
        layers = [dict(c, **m) for c, m in zip(cache, memory_kv)]
        logits, layers = model.decode_step(token_ids, step, layers, memory_mask)  # [B*K, V]
        return log_probs_from_logits(logits), [{"k": c["k"], "v": c["v"]} for c in layers]

    return step_fn, initial_cache


def redecode_step_fn(model, source_ids, beam_size, max_steps):
    """(step_fn, initial_cache): the no-cache baseline; the cache is only the prefix ids [B*K, T_max]."""
    memory = _tile(model.encode(source_ids), beam_size)  # [B*K, S, D]
    memory_mask = _tile(masks.padding_mask(source_ids), beam_size)  # [B*K, 1, 1, S]
    initial_cache = {"prefix": tf.zeros([tf.shape(memory)[0], max_steps], tf.int32)}  # [B*K, T_max]

    def step_fn(token_ids, step, cache):
        at_step = tf.equal(tf.range(max_steps), step)[None, :]  # [1, T_max]
        prefix = tf.where(at_step, token_ids[:, None], cache["prefix"])  # [B*K, T_max]
        logits = model.decode(prefix[:, : step + 1], memory, memory_mask)[:, -1, :]  # [B*K, V]
        return log_probs_from_logits(logits), {"prefix": prefix}

    return step_fn, initial_cache


_COMPILED = weakref.WeakKeyDictionary()


def compiled_for(model, name, fn, input_signature):
    """``tf.function(lambda *args: fn(model, *args), input_signature)``, built once per (model, name).

    The function holds the model weakly, so the cache does not keep models alive.
    """
    per_model = _COMPILED.setdefault(model, {})
    if name not in per_model:
        ref = weakref.ref(model)
        per_model[name] = tf.function(lambda *args: fn(ref(), *args), input_signature=input_signature)
    return per_model[name]
