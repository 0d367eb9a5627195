"""Lexical constraints (decoding/constraints.py): every hypothesis contains every constraint and scores as forced
decoding scores it, no constraint is the plain search, the progress and the banks' turns as worked by hand."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import PAD_ID
from keras_transformer.decoding import NEG_INF, translate_ids
from keras_transformer.decoding.constraints import advance, allocate
from tests.decoding.test_prefix import SOURCES, _forced_score

# item 0: a phrase of 3 subwords and a single one; item 1: one subword; item 2: none
CONSTRAINTS = np.array([[[17, 23, 4], [31, PAD_ID, PAD_ID]],
                        [[44, PAD_ID, PAD_ID], [PAD_ID, PAD_ID, PAD_ID]],
                        [[PAD_ID, PAD_ID, PAD_ID], [PAD_ID, PAD_ID, PAD_ID]]], np.int32)


def _contains(tokens, phrase):
    return any(list(tokens[j:j + len(phrase)]) == list(phrase) for j in range(len(tokens) - len(phrase) + 1))


def _check_outputs(model, sequences, scores, alpha, constraints=CONSTRAINTS):
    """Each filled slot holds every constraint of its item and is scored as forced decoding."""
    sequences, scores = np.asarray(sequences), np.asarray(scores)
    for b, rows in enumerate(constraints):
        phrases = [row[row != PAD_ID] for row in rows if (row != PAD_ID).any()]
        for k in range(sequences.shape[1]):
            if scores[b, k] == NEG_INF:  # an empty n-best slot
                assert not sequences[b, k].any()
                continue
            tokens = sequences[b, k][sequences[b, k] != PAD_ID]
            assert all(_contains(tokens, p) for p in phrases), (b, k, tokens, phrases)
            np.testing.assert_allclose(scores[b, k], _forced_score(model, SOURCES[b], tokens, alpha), rtol=1e-4)


@pytest.mark.parametrize("parallel_searches", [1, 2])
def test_every_hypothesis_holds_every_constraint_and_scores_as_forced_decoding(model, parallel_searches):
    sequences, scores = translate_ids(model, SOURCES, beam_size=4, alpha=0.6, extra_length=8,
                                      parallel_searches=parallel_searches, constraints=CONSTRAINTS)
    _check_outputs(model, sequences, scores, 0.6)
    assert np.all(np.asarray(scores)[:, 0] > NEG_INF / 2)


@pytest.mark.parametrize("beam_size", [1, 2])
def test_constraints_that_only_just_fit_are_placed_whatever_the_beam(model, beam_size):
    """Item 0 may write 5 tokens (4 of them its constraints' subwords), item 1 6 (2), item 2 2 (1)."""
    tight = np.array([[[17, 23, 4], [31, 0, 0]], [[44, 9, 0], [0, 0, 0]], [[12, 0, 0], [0, 0, 0]]], np.int32)
    sequences, scores = translate_ids(model, SOURCES, beam_size=beam_size, alpha=0.6, extra_length=0,
                                      constraints=tight)
    _check_outputs(model, sequences, scores, 0.6, tight)
    assert np.all(np.asarray(scores)[:, 0] > NEG_INF / 2)


def test_no_constraint_is_the_plain_search(model):
    plain = translate_ids(model, SOURCES, 4, 0.6, 8, parallel_searches=2)
    for none in (np.zeros([3, 0, 0], np.int32), np.zeros([3, 2, 3], np.int32)):
        constrained = translate_ids(model, SOURCES, 4, 0.6, 8, parallel_searches=2, constraints=none)
        np.testing.assert_array_equal(plain[0], constrained[0])
        np.testing.assert_allclose(plain[1], constrained[1], rtol=1e-6)


def test_constraints_longer_than_the_output_are_refused(model):
    # Item 0 may write 5 tokens, EOS included: 5 constraint subwords leave no place for EOS.
    with pytest.raises(tf.errors.InvalidArgumentError, match="constraints: too long for the output"):
        translate_ids(model, SOURCES[:1], extra_length=0, constraints=np.array([[[17, 23, 4, 6, 8]]], np.int32))
    with pytest.raises(ValueError, match="constraints: not with a target_prefix"):
        translate_ids(model, SOURCES, constraints=CONSTRAINTS, target_prefix=np.zeros([3, 1], np.int32))


def test_progress_advances_resets_and_restarts_by_hand():
    # constraints (7 8 9) and (7): progress 1 and 0; next subwords 8 and 7, first 7 and 7
    progress, next_ids, first, lengths = ([[1, 0]], [[8, 7]], [[7, 7]], [[3, 1]])
    step = lambda token: advance(tf.constant(progress), tf.constant([[token]]), tf.constant(next_ids),  # noqa: E731
                                 tf.constant(first), tf.constant(lengths)).numpy().tolist()
    assert step(8) == [[2, 0]]  # the phrase goes on
    assert step(5) == [[0, 0]]  # broken: restarts
    assert step(7) == [[1, 1]]  # the phrase starts again; the single word is met
    assert advance(tf.constant([[3, 1]]), tf.constant([[5]]), tf.constant([[0, 0]]), tf.constant(first),
                   tf.constant(lengths)).numpy().tolist() == [[3, 1]]  # met constraints stay met


def test_banks_take_turns_fuller_first_then_by_rank():
    scores = tf.constant([[-1.0, -2.0, -3.0, -4.0, -5.0, NEG_INF]])
    banks = tf.constant([[0, 0, 1, 1, 2, 2]])
    # rank 0: bank 2 (-5), bank 1 (-3), bank 0 (-1); rank 1: bank 1 (-4), bank 0 (-2); the NEG_INF one last
    assert allocate(scores, banks, 6).numpy().tolist() == [[4, 2, 0, 3, 1, 5]]
    assert allocate(scores, tf.zeros_like(banks), 3).numpy().tolist() == [[0, 1, 2]]  # one bank: by score
