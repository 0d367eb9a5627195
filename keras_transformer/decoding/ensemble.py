"""Ensembles (not in the paper; fairseq ``--path a.pt:b.pt``, Marian ``--models``): M models of one vocabulary
searched as one, their log-probabilities averaged at every step.

    Ensemble(models, weights=None)
    ensemble_step_fn(parts [(step_fn, cache, constants)], weights) -> (step_fn, cache, constants)
    ensemble_translate_ids(ensemble, source_ids [B, S], beam_size=4, alpha=0.6, extra_length=50, parallel_searches=1,
                           num_hypotheses=None) -> (sequences [B, K, T] int32, scores [B, K] float32)

    log P_ens(y | y_<i, X) = Σ_m w_m log P_m(y | y_<i, X),      w_m >= 0, Σ_m w_m = 1 (default 1/M)

as fairseq's and Marian's ensembles average (Marian's weights likewise); the beam search is unchanged (a wrapper of
its ``step_fn``, as ``decoding.prefix`` and the parser's constraint are). Each model keeps its own key/value cache
and encoder state: the ensemble's cache and constants are the tuples of the models' (every leaf reordered or
thinned by the search as a single model's). A score is log P_ens(Y|X) / lp(|Y|). The models must share the
vocabulary (the same V; the caller checks that the tokenizers are the same); each output is at most the smallest
of their ``max_length``. An ensemble of a model with itself (weights 1/2) gives that model's search exactly:
x / 2 + x / 2 = x in floating point.
"""

from __future__ import annotations

import functools
from typing import Optional, Sequence

import tensorflow as tf

from keras_transformer.decoding import model_step
from keras_transformer.decoding.beam_search import beam_search, hypotheses_to_settle
from keras_transformer.decoding.log_probs import as_log_probs
from keras_transformer.decoding.parallel import in_parallel


class Ensemble:
    """M Transformers of one vocabulary and their weights (normalised to sum to 1)."""

    def __init__(self, models: Sequence, weights: Optional[Sequence[float]] = None):
        models = list(models)
        if len(models) < 2:
            raise ValueError(f"ensemble: needs at least 2 models, got {len(models)}")
        sizes = [m.config.vocab_size for m in models]
        if len(set(sizes)) != 1:
            raise ValueError(f"ensemble: the models' vocabularies differ ({', '.join(map(str, sizes))} entries); "
                             "an ensemble averages one vocabulary's log-probabilities")
        weights = [1.0] * len(models) if weights is None else [float(w) for w in weights]
        if len(weights) != len(models) or not all(w >= 0 for w in weights) or sum(weights) <= 0:
            raise ValueError(f"ensemble weights: one weight >= 0 per model ({len(models)}), not all 0, got "
                             f"{', '.join(map(str, weights))}")
        self.models = models
        self.weights = tuple(w / sum(weights) for w in weights)
        self.max_length = min(m.config.max_length for m in models)


def ensemble_step_fn(parts, weights):
    """(step_fn, cache, constants) of the weighted average of ``parts``' log-probabilities (module docstring).

    parts: one ``model_step.cached_step_fn`` result per model, for the same source_ids and beam size."""
    step_fns = [step_fn for step_fn, _, _ in parts]

    def step(token_ids, i, caches, constants):
        total, new = None, []
        for step_fn, cache, own, weight in zip(step_fns, caches, constants, weights):
            log_probs, cache = step_fn(token_ids, i, cache, own)  # [N, V]
            weighted = as_log_probs(log_probs).dense() * weight  # [N, V], PAD and BOS near NEG_INF
            total = weighted if total is None else total + weighted
            new.append(cache)
        return total, tuple(new)

    return step, tuple(cache for _, cache, _ in parts), tuple(constants for _, _, constants in parts)


def _ensemble_search(ensemble, source_ids, beam_size, alpha, extra_length, num_hypotheses, *, parallel_searches):
    def search(source_ids):  # [B', S] -> ([B', K, T], [B', K])
        max_lengths = model_step.max_output_lengths(source_ids, extra_length, ensemble.max_length)  # [B']
        parts = [model_step.cached_step_fn(m, source_ids, beam_size) for m in ensemble.models]
        step_fn, cache, constants = ensemble_step_fn(parts, ensemble.weights)
        result = beam_search(step_fn, cache, beam_size, max_lengths, alpha, constants, num_hypotheses=num_hypotheses)
        return result.sequences, result.scores

    return in_parallel(search, source_ids, parallel_searches)


def ensemble_translate_ids(ensemble: Ensemble, source_ids, beam_size=4, alpha=0.6, extra_length=50,
                           parallel_searches=1, num_hypotheses=None):
    """Beam search of the ensemble (``beam_search.translate_ids``' conventions and defaults, §6.1); one
    ``tf.function`` per ensemble and P, traced once."""
    search = functools.partial(_ensemble_search, parallel_searches=parallel_searches)
    fn = model_step.compiled_for(ensemble, f"ensemble_beam_search/{parallel_searches}", search, [
        tf.TensorSpec([None, None], tf.int32, name="source_ids"),
        tf.TensorSpec([], tf.int32, name="beam_size"),
        tf.TensorSpec([], tf.float32, name="alpha"),
        tf.TensorSpec([], tf.int32, name="extra_length"),
        tf.TensorSpec([], tf.int32, name="num_hypotheses"),
    ])
    return fn(tf.cast(source_ids, tf.int32), tf.cast(beam_size, tf.int32), tf.cast(alpha, tf.float32),
              tf.cast(extra_length, tf.int32), hypotheses_to_settle(num_hypotheses, beam_size))
