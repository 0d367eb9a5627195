"""Sampling (not in the paper): each output token drawn from the model's distribution, as back-translation wants
(fairseq ``--sampling``, OpenNMT-tf ``sampling_topk``, Marian ``--output-sampling``, CTranslate2
``sampling_topk``/``sampling_topp``/``sampling_temperature``).

    sample_translate_ids(model, source_ids [B, S], num_samples=1, top_k=0, top_p=1.0, temperature=1.0, seed=0,
                         alpha=0.6, extra_length=50) -> (sequences [B, K, T] int32, scores [B, K] float32)

At each step the log-probabilities are divided by the temperature T, cut to the ``top_k`` most probable tokens
(0: all of them) and then to the fewest of those whose probabilities (after T) reach ``top_p`` (the nucleus,
Holtzman et al., 2020; the most probable token always stays), and one token is drawn from what is left,
renormalised. PAD and BOS are never drawn. A sample ends at EOS or at its maximum length (source + extra_length),
as a hypothesis of the beam search does (``greedy.greedy_search`` runs the loop); its score is the model's own
log P(Y|X) / lp(|Y|), without the temperature or the cuts. The K samples of an input are independent. Draws are
stateless (``tf.random.stateless_categorical``, seed (``seed``, step)): the same seed, inputs and batch give the
same samples. top_k = 1, and T -> 0, are greedy decoding.
"""

from __future__ import annotations

import tensorflow as tf

from keras_transformer.decoding import model_step
from keras_transformer.decoding.greedy import greedy_search
from keras_transformer.decoding.log_probs import NEG_INF, LogProbs
from keras_transformer.decoding.prefix import checked_prefix_lengths, forced_prefix


def sampler(top_k, top_p, temperature, seed):
    """``choose(log_probs, step) -> (log P [N], token [N])`` for ``greedy_search``: a draw per row (module doc).

    top_k [] int32 (0: no cut), top_p [] float32 in (0, 1], temperature [] float32 > 0, seed [] int32."""

    def choose(log_probs: LogProbs, step):
        dense = log_probs.dense()  # [N, V] log P, PAD and BOS near NEG_INF
        vocab = tf.shape(dense)[1]
        k = tf.where(top_k > 0, tf.minimum(top_k, vocab), vocab)
        values, ids = tf.math.top_k(dense / temperature, k=k)  # [N, k], most probable first
        before = tf.cumsum(tf.nn.softmax(values), axis=1, exclusive=True)  # [N, k]: mass of the better tokens
        values = tf.where(before < top_p, values, NEG_INF)  # the nucleus; the first token (before = 0) stays
        seeds = tf.stack([tf.cast(seed, tf.int64), tf.cast(step, tf.int64)])
        choice = tf.random.stateless_categorical(values, 1, seed=seeds, dtype=tf.int32)[:, 0]  # [N]
        token = tf.gather(ids, choice, batch_dims=1)  # [N]
        return tf.gather(dense, token, batch_dims=1), token

    return choose


def _sample_model(model, source_ids, num_samples, top_k, top_p, temperature, seed, alpha, extra_length,
                  target_prefix=None):
    max_lengths = model_step.max_output_lengths(source_ids, extra_length, model.config.max_length)  # [B]
    step_fn, cache, constants = model_step.cached_step_fn(model, source_ids, num_samples)  # K rows an item
    if target_prefix is not None:
        max_lengths = checked_prefix_lengths(target_prefix, max_lengths)
        step_fn, constants = forced_prefix(step_fn, constants, target_prefix)
    result = greedy_search(step_fn, cache, tf.repeat(max_lengths, num_samples), alpha, constants,
                           choose=sampler(top_k, top_p, temperature, seed))  # [B*K, 1, T], [B*K, 1]
    batch = tf.shape(source_ids)[0]
    return (tf.reshape(result.sequences, [batch, num_samples, -1]), tf.reshape(result.scores, [batch, num_samples]))


def sample_translate_ids(model, source_ids, num_samples=1, top_k=0, top_p=1.0, temperature=1.0, seed=0, alpha=0.6,
                         extra_length=50, target_prefix=None):
    """source_ids [B, S] -> (sequences [B, K, T] int32, scores [B, K] float32): K = ``num_samples`` draws per
    input (module docstring), one cached step per token; ``target_prefix`` [B, P] (PAD after): each draw of item
    b starts with its row (``decoding.prefix``; shorter than the item's maximum output length)."""
    prefixed = target_prefix is not None
    fn = model_step.compiled_for(model, "sample" + ("/prefix" if prefixed else ""), _sample_model, [
        tf.TensorSpec([None, None], tf.int32, name="source_ids"),
        tf.TensorSpec([], tf.int32, name="num_samples"),
        tf.TensorSpec([], tf.int32, name="top_k"),
        tf.TensorSpec([], tf.float32, name="top_p"),
        tf.TensorSpec([], tf.float32, name="temperature"),
        tf.TensorSpec([], tf.int32, name="seed"),
        tf.TensorSpec([], tf.float32, name="alpha"),
        tf.TensorSpec([], tf.int32, name="extra_length"),
    ] + ([tf.TensorSpec([None, None], tf.int32, name="target_prefix")] if prefixed else []))
    return fn(tf.cast(source_ids, tf.int32), *(tf.cast(v, d) for v, d in (
        (num_samples, tf.int32), (top_k, tf.int32), (top_p, tf.float32), (temperature, tf.float32),
        (seed, tf.int32), (alpha, tf.float32), (extra_length, tf.int32))),
        *([tf.cast(target_prefix, tf.int32)] if prefixed else []))
