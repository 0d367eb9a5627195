"""Target prefixes (decoding/prefix.py) in the beam search and in sampling: every output starts with its prefix and
scores as forced decoding scores it, an empty prefix is the unconstrained search, a prefix with no room is refused."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import BOS_ID, EOS_ID, PAD_ID
from keras_transformer.decoding import NEG_INF, length_penalty, translate_ids
from keras_transformer.decoding.sampling import sample_translate_ids

SOURCES = np.array([[5, 9, 13, 22, EOS_ID, PAD_ID], [7, 30, 41, 12, 8, EOS_ID], [11, EOS_ID, PAD_ID, PAD_ID, PAD_ID,
                                                                              PAD_ID]], np.int32)
PREFIXES = np.array([[17, 23, 4], [31, PAD_ID, PAD_ID], [PAD_ID, PAD_ID, PAD_ID]], np.int32)  # 3, 1 and 0 tokens


def _forced_score(model, source, tokens, alpha):
    """log P(tokens | source) / lp(|tokens|) by one teacher-forced pass (tokens end with EOS or at the limit)."""
    target_in = np.concatenate([[BOS_ID], tokens[:-1]])[None]
    log_p = tf.nn.log_softmax(model((source[None], target_in))).numpy()[0]
    return log_p[np.arange(len(tokens)), tokens].sum() / float(length_penalty(len(tokens), alpha))


def _check_outputs(model, sequences, scores, alpha, prefixes=PREFIXES):
    """Each filled slot starts with its item's prefix and is scored as forced decoding; the others are empty."""
    sequences, scores = np.asarray(sequences), np.asarray(scores)
    for b, prefix in enumerate(prefixes):
        prefix = prefix[prefix != PAD_ID]
        for k in range(sequences.shape[1]):
            if scores[b, k] == NEG_INF:  # an empty n-best slot, never a banned EOS scored as a hypothesis
                assert not sequences[b, k].any()
                continue
            tokens = sequences[b, k][sequences[b, k] != PAD_ID]
            np.testing.assert_array_equal(tokens[:len(prefix)], prefix)
            np.testing.assert_allclose(scores[b, k], _forced_score(model, SOURCES[b], tokens, alpha), rtol=1e-4)


@pytest.mark.parametrize("parallel_searches", [1, 2])
def test_every_hypothesis_starts_with_its_prefix_and_scores_as_forced_decoding(model, parallel_searches):
    sequences, scores = translate_ids(model, SOURCES, beam_size=4, alpha=0.6, extra_length=8,
                                      parallel_searches=parallel_searches, target_prefix=PREFIXES)
    _check_outputs(model, sequences, scores, 0.6)
    assert np.all(np.asarray(scores)[:, 0] > NEG_INF / 2)  # every item has a best hypothesis


def test_every_draw_starts_with_its_prefix_and_scores_as_forced_decoding(model):
    sequences, scores = sample_translate_ids(model, SOURCES, num_samples=5, seed=3, alpha=0.6, extra_length=8,
                                             target_prefix=PREFIXES)
    _check_outputs(model, sequences, scores, 0.6)
    assert len({tuple(s) for s in np.asarray(sequences)[0]}) > 1  # the draws go on freely after the prefix


def test_an_empty_prefix_is_the_unconstrained_search(model):
    empty = np.zeros([3, 2], np.int32)
    for search in (lambda **p: translate_ids(model, SOURCES, 4, 0.6, 8, parallel_searches=2, **p),
                   lambda **p: sample_translate_ids(model, SOURCES, num_samples=3, seed=2, extra_length=8, **p)):
        free, prefixed = search(), search(target_prefix=empty)
        np.testing.assert_array_equal(free[0], prefixed[0])
        np.testing.assert_array_equal(free[1], prefixed[1])


def test_the_one_best_search_and_the_top_one_draw_agree_under_a_prefix(model):
    """A beam of one with α = 0 is greedy decoding; so is a draw from the top-1 token: the same outputs, prefixed."""
    beam = translate_ids(model, SOURCES, beam_size=1, alpha=0.0, extra_length=8, target_prefix=PREFIXES)
    drawn = sample_translate_ids(model, SOURCES, num_samples=1, top_k=1, alpha=0.0, extra_length=8,
                                 target_prefix=PREFIXES)
    np.testing.assert_array_equal(beam[0], drawn[0])
    np.testing.assert_allclose(beam[1], drawn[1], rtol=1e-6)


def test_a_prefix_that_leaves_the_search_no_token_is_refused(model):
    # Item 0 may write 5 source tokens + 0 = 5 tokens, EOS included; a prefix of 5 leaves no token to search.
    too_long = np.array([[17, 23, 4, 6, 8]], np.int32)
    for search in (translate_ids, sample_translate_ids):
        with pytest.raises(tf.errors.InvalidArgumentError, match="target_prefix: must be shorter than the output"):
            search(model, SOURCES[:1], extra_length=0, target_prefix=too_long)
    # A beam of 8: while the prefix is forced, EOS (id 3) ranks within the top K expansions although banned, and is
    # not taken for a finished hypothesis.
    sequences, scores = translate_ids(model, SOURCES[:1], beam_size=8, extra_length=0, target_prefix=too_long[:, :4])
    _check_outputs(model, sequences, scores, 0.6, too_long[:, :4])
    best = np.asarray(sequences)[0, 0]  # the prefix, then one token chosen (EOS, or cut there as any hypothesis)
    np.testing.assert_array_equal(best[:4], [17, 23, 4, 6])
    assert len(best) == 5 and best[4] not in (PAD_ID, BOS_ID)
