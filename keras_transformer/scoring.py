"""Forced decoding: the model's score of a given translation, on the beam search's scale (§6.1).

    score_ids(model, source_ids [B, S], target_ids [B, T], alpha, source_limit)
        -> (log_probs [B], lengths [B], scores [B])
    teacher_inputs(target_ids [B, T]) -> [B, T]   what the decoder reads: BOS + y_<t
    score_lines(model, recipe, tokenizer, sources, targets, alpha=None, batch_size=32) -> PairScores
    format_scores(PairScores, as_json=False) -> lines "log_prob<TAB>tokens<TAB>score" (kt-score's output)

For a source X and a target Y = y_1 ... y_|Y| (subwords, then EOS):

    log P(Y | X) = sum_t log p(y_t | y_<t, X)      |Y| counts EOS
    score(Y)     = log P(Y | X) / lp(|Y|),         lp(n) = ((5 + n) / 6)^α   (GNMT, as in beam search)

The conventions are the beam search's, so that a translation it found scores
here as it scored there (``tests/inference/test_score.py`` checks it to 1e-4):
the source is its subwords + EOS, cut by ``serving.checks.truncate_source`` to
``serving.checks.max_source_length(recipe)``; the decoder reads BOS + y_1 ... y_|Y|-1
in one teacher-forced pass; log-probabilities come from
``model_step.log_probs_from_logits`` (float32 log-softmax, PAD and BOS get
NEG_INF, the rest not renormalised). Text is re-tokenized here, so a beam
hypothesis whose subwords are not SentencePiece's own segmentation of its text
scores as that canonical segmentation.

A target longer than the model's ``max_length`` tokens (EOS included) is one
the model cannot decode (the beam search never emits one); ``score_lines``
refuses it with a ValueError naming the line rather than scoring a truncation.
A pair whose source and target are both blank (empty or whitespace only) is
not run through the model: log P 0, |Y| 0, score 0, as kt-translate answers a
blank line with "" scored 0.
"""

from __future__ import annotations

import json
from typing import List, NamedTuple, Optional, Sequence

import numpy as np
import tensorflow as tf

from keras_transformer import BOS_ID, PAD_ID
from keras_transformer.config import Recipe
from keras_transformer.data.tokenizer import append_eos
from keras_transformer.decoding import length_penalty
from keras_transformer.decoding.lines import is_blank
from keras_transformer.decoding.model_step import compiled_for, log_probs_from_logits
from keras_transformer.serving.checks import max_source_length, truncate_source
from keras_transformer.layers import masks

TOKENIZE_CHUNK = 4096  # lines tokenized per call


class PairScores(NamedTuple):
    log_probs: np.ndarray  # [N] float32: log P(Y|X), summed over the target tokens, EOS included
    lengths: np.ndarray  # [N] int32: |Y|, EOS included
    scores: np.ndarray  # [N] float32: log P(Y|X) / lp(|Y|)


def teacher_inputs(target_ids):
    """target_ids [B, T] (no BOS; EOS, PAD after) -> the decoder's teacher-forced inputs [B, T]: BOS y_1 ... y_T-1,
    PAD where the target is PAD (nothing is read past EOS)."""
    target_in = tf.concat([tf.fill([tf.shape(target_ids)[0], 1], BOS_ID), target_ids[:, :-1]], axis=1)  # [B, T]
    return tf.where(tf.equal(target_ids, PAD_ID), PAD_ID, target_in)


def _forced_decode(model, source_ids, target_ids, alpha, source_limit):
    """The traced body of ``score_ids``: one encoder and one teacher-forced decoder pass."""
    source_ids = truncate_source(source_ids, source_limit)  # [B, S]
    b, t = tf.shape(target_ids)[0], tf.shape(target_ids)[1]
    memory = model.encode(source_ids)  # [B, S, D]
    logits = model.decode(teacher_inputs(target_ids), memory, masks.padding_mask(source_ids))  # [B, T, V]
    v = tf.shape(logits)[-1]
    log_probs = tf.reshape(log_probs_from_logits(tf.reshape(logits, [b * t, v])).dense(), [b, t, v])  # [B, T, V]
    token_log_probs = tf.gather(log_probs, target_ids, batch_dims=2)  # [B, T]
    real = tf.not_equal(target_ids, PAD_ID)  # [B, T]
    total = tf.reduce_sum(tf.where(real, token_log_probs, 0.0), axis=1)  # [B]
    lengths = tf.reduce_sum(tf.cast(real, tf.int32), axis=1)  # [B]
    return total, lengths, total / length_penalty(lengths, alpha)


_SIGNATURE = [
    tf.TensorSpec([None, None], tf.int32, name="source_ids"),
    tf.TensorSpec([None, None], tf.int32, name="target_ids"),
    tf.TensorSpec([], tf.float32, name="alpha"),
    tf.TensorSpec([], tf.int32, name="max_source_length"),
]


def score_ids(model, source_ids, target_ids, alpha, source_limit):
    """(log P(Y|X) [B], |Y| [B] int32, log P / lp(|Y|) [B]) of id tensors; one ``tf.function`` per model.

    source_ids [B, S]: subwords, EOS, PAD (0) after; cut here to ``source_limit`` tokens by ``truncate_source``
    (give ``serving.checks.max_source_length(recipe)``, as the translator does);
    target_ids [B, T]: subwords, EOS, PAD after; T must not exceed ``model.config.max_length``.
    A target row of PAD only scores 0 with length 0.
    """
    fn = compiled_for(model, "forced_decoding", _forced_decode, _SIGNATURE)
    return fn(tf.cast(source_ids, tf.int32), tf.cast(target_ids, tf.int32), tf.cast(alpha, tf.float32),
              tf.cast(source_limit, tf.int32))


def _tokenize(tokenizer, lines: Sequence[str]) -> List[List[int]]:
    """Subword ids of each line followed by EOS."""
    ids: List[List[int]] = []
    for start in range(0, len(lines), TOKENIZE_CHUNK):
        ids.extend(append_eos(tokenizer.tokenize(list(lines[start:start + TOKENIZE_CHUNK]))).to_list())
    return ids


def _pad(rows: Sequence[List[int]]) -> np.ndarray:
    """Rows of ids -> [len(rows), longest] int32, PAD after each."""
    out = np.full([len(rows), max(len(r) for r in rows)], PAD_ID, np.int32)
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out


def score_lines(model, recipe: Recipe, tokenizer, sources: Sequence[str], targets: Sequence[str],
                alpha: Optional[float] = None, batch_size: int = 32) -> PairScores:
    """Scores of each (source, target) pair, in input order; ``alpha`` None takes the recipe's (0.6, §6.1).

    Pairs are run in batches of ``batch_size``, sorted by target then source length so that padding is small.
    Raises ValueError for unaligned inputs, a bad option, or a target longer than the model's max_length.
    """
    if len(sources) != len(targets):
        raise ValueError(f"sources and targets: {len(sources)} and {len(targets)} lines; they must be aligned")
    if batch_size < 1:
        raise ValueError(f"batch_size: must be >= 1, got {batch_size}")
    alpha = recipe.decode.alpha if alpha is None else alpha
    if alpha < 0:
        raise ValueError(f"alpha: must be >= 0, got {alpha}")
    source_ids, target_ids = _tokenize(tokenizer.source, sources), _tokenize(tokenizer.target, targets)
    limit = model.config.max_length
    for i, row in enumerate(target_ids):
        if len(row) > limit:
            raise ValueError(f"line {i + 1}: the target has {len(row)} tokens (EOS included), more than the "
                             f"model's max_length {limit}; the model cannot score it")
    log_probs = np.zeros([len(targets)], np.float32)
    lengths = np.zeros([len(targets)], np.int32)
    scores = np.zeros([len(targets)], np.float32)
    both_blank = [is_blank(source) and is_blank(target) for source, target in zip(sources, targets)]
    order = sorted((i for i in range(len(targets)) if not both_blank[i]),
                   key=lambda i: (len(target_ids[i]), len(source_ids[i])))
    source_limit = max_source_length(recipe)
    for start in range(0, len(order), batch_size):
        batch = order[start:start + batch_size]
        out = score_ids(model, _pad([source_ids[i] for i in batch]), _pad([target_ids[i] for i in batch]), alpha,
                        source_limit)
        log_probs[batch], lengths[batch], scores[batch] = (x.numpy() for x in out)
    return PairScores(log_probs, lengths, scores)


def format_scores(result: PairScores, as_json: bool = False) -> List[str]:
    """One line per pair: 'log_prob<TAB>tokens<TAB>score' (6 decimals), or a JSON object with those keys."""
    rows = zip(result.log_probs.tolist(), result.lengths.tolist(), result.scores.tolist())
    if as_json:
        return [json.dumps({"log_prob": round(p, 6), "tokens": n, "score": round(s, 6)}) for p, n, s in rows]
    return [f"{p:.6f}\t{n}\t{s:.6f}" for p, n, s in rows]
