"""Ensembles of chart parsers (tasks/parsing/module.py): CKY over the weighted mean of the members' span and tag
log-probabilities, which is one member's parse where it has all the weight, and refused for parsers that cannot
join."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import EOS_ID, PAD_ID
from keras_transformer.model import build_model
from keras_transformer.tasks.parsing import cky
from keras_transformer.tasks.parsing.module import EnsembleChartParsing, ensemble_parse
from tests.parsing.test_chart_parser import lstm_chart_model, tiny_chart_recipe

IDS = tf.constant([[5, 6, 7, EOS_ID, PAD_ID, PAD_ID], [8, 9, 10, 11, 12, EOS_ID]])


def assert_same_parse(a: cky.Parse, b: cky.Parse, scores_atol=1e-4):
    for field in ("chains", "tags", "words"):
        np.testing.assert_array_equal(getattr(a, field).numpy(), getattr(b, field).numpy(), err_msg=field)
    np.testing.assert_allclose(a.scores.numpy(), b.scores.numpy(), atol=scores_atol)


@pytest.fixture(scope="module")
def members():
    return lstm_chart_model(), lstm_chart_model()  # two initialisations of one recipe


def test_a_member_with_all_the_weight_parses_alone(members):
    for bonus in (0.0, 1.0):
        for m, weights in enumerate(((1.0, 0.0), (0.0, 1.0))):
            assert_same_parse(ensemble_parse(members, weights, IDS, bonus), members[m].predict_trees(IDS, bonus))


def test_the_ensemble_parses_the_mean_of_its_members_log_probabilities(members):
    charts = [m.chart(IDS, training=False) for m in members]
    weights = (0.25, 0.75)
    spans, tags = (sum(w * tf.nn.log_softmax(getattr(c, field)).numpy() for w, c in zip(weights, charts))
                   for field in ("spans", "tags"))
    expected = cky.parse(tf.constant(spans), tf.constant(tags), charts[0].words, 0.5)
    assert_same_parse(ensemble_parse(members, weights, IDS, 0.5), expected)
    # two members that disagree somewhere: the mean is not either one's
    alone = [m.predict_trees(IDS) for m in members]
    assert not np.array_equal(alone[0].chains.numpy(), alone[1].chains.numpy())


def test_parsers_that_cannot_join_are_refused(members):
    recipe = tiny_chart_recipe()
    seq2seq = build_model(dataclasses.replace(recipe, model=dataclasses.replace(recipe.model, num_decoder_layers=1),
                                              parsing=dataclasses.replace(recipe.parsing, chart_labels=0,
                                                                          char_filters=0, chart_hinge=0.0)))
    with pytest.raises(ValueError, match="ensemble: parsers ensemble as chart parsers"):
        EnsembleChartParsing([members[0], seq2seq], None, recipe)
    fewer = build_model(dataclasses.replace(recipe, parsing=dataclasses.replace(recipe.parsing, chart_labels=8)))
    with pytest.raises(ValueError, match=r"different label counts \(64, 8 chart_labels\)"):
        EnsembleChartParsing([members[0], fewer], None, recipe)
