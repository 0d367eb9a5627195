"""Ensembles (decoding/ensemble.py): a model with itself is that model's search, two models' scores are their
averaged log-probabilities of the output, and the refusals."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import BOS_ID, EOS_ID, PAD_ID
from keras_transformer.config import ModelConfig
from keras_transformer.decoding import NEG_INF, length_penalty, translate_ids
from keras_transformer.decoding.ensemble import Ensemble, ensemble_translate_ids
from keras_transformer.model import build_model

SOURCES = np.array([[5, 9, 13, 22, EOS_ID, PAD_ID], [7, 30, 41, 12, 8, EOS_ID], [11, EOS_ID, PAD_ID, PAD_ID, PAD_ID,
                                                                              PAD_ID]], np.int32)


@pytest.fixture(scope="module")
def other():
    """A second model of the decoding tests' vocabulary, other weights and another depth."""
    keras.utils.set_random_seed(11)
    return build_model(ModelConfig(vocab_size=50, d_model=16, d_ff=32, num_heads=2, num_encoder_layers=1,
                                   num_decoder_layers=1, dropout=0.0, max_length=128))


@pytest.mark.parametrize("parallel_searches", [1, 2])
def test_an_ensemble_of_a_model_with_itself_is_that_model(model, parallel_searches):
    alone = translate_ids(model, SOURCES, 4, 0.6, 10, parallel_searches=parallel_searches)
    both = ensemble_translate_ids(Ensemble([model, model]), SOURCES, 4, 0.6, 10, parallel_searches=parallel_searches)
    np.testing.assert_array_equal(alone[0], both[0])
    np.testing.assert_array_equal(alone[1], both[1])


def _log_p(m, source, tokens):
    target_in = np.concatenate([[BOS_ID], tokens[:-1]])[None]
    log_p = tf.nn.log_softmax(m((source[None], target_in))).numpy()[0]
    return log_p[np.arange(len(tokens)), tokens].sum()


def test_scores_are_the_weighted_log_probabilities_of_the_models(model, other):
    sequences, scores = (np.asarray(x) for x in ensemble_translate_ids(Ensemble([model, other], [3, 1]), SOURCES,
                                                                       4, 0.6, 10))
    for b in range(len(SOURCES)):
        for k in range(4):
            if scores[b, k] == NEG_INF:
                continue
            tokens = sequences[b, k][sequences[b, k] != PAD_ID]
            expected = 0.75 * _log_p(model, SOURCES[b], tokens) + 0.25 * _log_p(other, SOURCES[b], tokens)
            np.testing.assert_allclose(scores[b, k], expected / float(length_penalty(len(tokens), 0.6)), rtol=1e-4)
    alone = np.asarray(translate_ids(model, SOURCES, 4, 0.6, 10)[0])
    assert not np.array_equal(alone, sequences)  # the second model changes the search


def test_models_of_different_vocabularies_or_bad_weights_are_refused(model):
    keras.utils.set_random_seed(3)
    bigger = build_model(ModelConfig(vocab_size=60, d_model=16, d_ff=32, num_heads=2, num_encoder_layers=1,
                                     num_decoder_layers=1, dropout=0.0, max_length=128))
    with pytest.raises(ValueError, match="vocabularies differ"):
        Ensemble([model, bigger])
    for weights in ([1.0], [1.0, -1.0], [0.0, 0.0]):
        with pytest.raises(ValueError, match="ensemble weights"):
            Ensemble([model, model], weights)
    with pytest.raises(ValueError, match="at least 2 models"):
        Ensemble([model])
