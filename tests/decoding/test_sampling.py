"""Sampling (decoding/sampling.py): greedy at top-k 1 and at T -> 0, the distribution it draws from, its scores."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import BOS_ID, EOS_ID, PAD_ID
from keras_transformer.decoding import greedy_translate_ids, length_penalty, model_step
from keras_transformer.decoding.sampling import sample_translate_ids

SOURCES = np.array([[5, 9, 13, 22, EOS_ID, PAD_ID], [7, 30, 41, 12, 8, EOS_ID]], np.int32)


def test_top_k_one_and_a_vanishing_temperature_are_greedy(model):
    greedy_sequences, greedy_scores = (np.asarray(x) for x in greedy_translate_ids(model, SOURCES, 0.6, 10))
    for options in ({"top_k": 1}, {"temperature": 1e-4}):
        sequences, scores = sample_translate_ids(model, SOURCES, num_samples=3, alpha=0.6, extra_length=10,
                                                 seed=5, **options)
        for k in range(3):  # every sample is the greedy translation, scored as greedy scores it
            np.testing.assert_array_equal(np.asarray(sequences)[:, k, :], greedy_sequences[:, 0, :])
            np.testing.assert_allclose(np.asarray(scores)[:, k], greedy_scores[:, 0], rtol=1e-6)


def _first_step_probabilities(model, temperature):
    """softmax(log P / T) of the first output token of an input that is EOS alone, PAD and BOS removed."""
    step_fn, cache, constants = model_step.cached_step_fn(model, tf.constant([[EOS_ID]]), 1)
    log_probs, _ = step_fn(tf.constant([BOS_ID]), 0, cache, constants)
    scaled = np.asarray(log_probs.dense())[0].astype(np.float64) / temperature
    scaled[[PAD_ID, BOS_ID]] = -np.inf
    p = np.exp(scaled - scaled.max())
    return p / p.sum()


@pytest.mark.filterwarnings("ignore:You are using a softmax over axis -1")  # the one-piece source's attention
@pytest.mark.parametrize("top_k, top_p, temperature", [(0, 1.0, 1.0), (8, 1.0, 0.7), (0, 0.6, 1.5), (10, 0.8, 1.0)])
def test_draws_follow_softmax_over_t_cut_to_the_top_k_and_the_nucleus(model, top_k, top_p, temperature):
    """20,000 first tokens (an input of EOS alone: outputs of one token) against the distribution computed from
    the model's own logits: never a token outside the cut, total variation under 0.03 (its sampling error
    here is about 0.01)."""
    p = _first_step_probabilities(model, temperature)
    order = np.argsort(-p, kind="stable")
    kept = order[: top_k] if top_k else order
    before = np.concatenate([[0.0], np.cumsum(p[kept])[:-1] / p[kept].sum()])
    kept = kept[(before < top_p) & (p[kept] > 0)]
    expected = np.zeros_like(p)
    expected[kept] = p[kept] / p[kept].sum()
    sequences, _ = sample_translate_ids(model, [[EOS_ID]], num_samples=20000, top_k=top_k, top_p=top_p,
                                        temperature=temperature, seed=1, extra_length=0)
    drawn = np.asarray(sequences)[0, :, 0]
    assert set(drawn) <= set(kept)
    counts = np.bincount(drawn, minlength=len(p)) / len(drawn)
    assert 0.5 * np.abs(counts - expected).sum() < 0.03


def test_the_same_seed_draws_the_same_samples_and_scores_are_the_models_log_probability(model):
    first = sample_translate_ids(model, SOURCES, num_samples=4, seed=11, extra_length=10, alpha=0.6)
    again = sample_translate_ids(model, SOURCES, num_samples=4, seed=11, extra_length=10, alpha=0.6)
    other = sample_translate_ids(model, SOURCES, num_samples=4, seed=12, extra_length=10, alpha=0.6)
    np.testing.assert_array_equal(first[0], again[0])
    assert not np.array_equal(np.asarray(first[0]), np.asarray(other[0]))
    sequences, scores = (np.asarray(x) for x in first)
    assert len({tuple(s) for s in sequences[1]}) > 1  # the samples of an input differ
    for b in range(2):
        for k in range(4):  # teacher-forced log P of the sample, EOS included, / lp(|Y|)
            tokens = sequences[b, k]
            n = int(np.sum(tokens != PAD_ID))
            target_in = np.concatenate([[BOS_ID], tokens[: n - 1]])[None]
            log_p = tf.nn.log_softmax(model((SOURCES[b: b + 1], target_in))).numpy()[0]
            expected = log_p[np.arange(n), tokens[:n]].sum() / float(length_penalty(n, 0.6))
            np.testing.assert_allclose(scores[b, k], expected, rtol=1e-4)
            assert tokens[n - 1] == EOS_ID or n == np.sum(SOURCES[b] != PAD_ID) + 10  # EOS, or the maximum length
