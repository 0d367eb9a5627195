"""The parsing recipes hold §6.3's settings."""

import dataclasses

import pytest

from keras_transformer import recipes
from keras_transformer import tasks
from keras_transformer.model import count_parameters


def test_wsj_paper_is_section_6_3():
    recipe = recipes.get("wsj_paper")
    m, d = recipe.model, recipe.decode
    assert (m.num_encoder_layers, m.num_decoder_layers, m.d_model) == (4, 4, 1024)  # "a 4-layer transformer"
    assert (m.dropout, m.attention_dropout) == (0.2, 0.2)  # residual and attention (t2t transformer_parsing_base)
    assert (d.beam_size, d.alpha, d.extra_length) == (21, 0.3, 300)  # beam 21, α 0.3, input length + 300
    assert (recipe.data.corpus, recipe.data.train_split, recipe.data.eval_split, recipe.data.test_split) == (
        "ptb", "train", "dev", "test")  # sections 02-21, 22, 23 of the full treebank
    assert recipe.train.warmup_steps == 16000 and recipe.train.label_smoothing == 0.1
    assert count_parameters(m) == 100_384_768  # the paper's model; and the word alignment's projection [3D, D]:
    assert count_parameters(recipe) == 100_384_768 + 3 * 1024 * 1024
    assert recipe.parsing.align_words and recipe.parsing.word_span and recipe.data.tree_leaves == "tag"  # the linearization chosen on the sample
    assert m.max_length >= recipe.data.max_length + d.extra_length  # outputs of input + 300 have positions


def test_ptb_sample_decodes_as_the_paper():
    recipe = recipes.get("ptb_sample")
    assert (recipe.decode.beam_size, recipe.decode.alpha, recipe.decode.extra_length) == (21, 0.3, 300)
    assert recipe.model.num_encoder_layers == recipe.model.num_decoder_layers == 4
    assert recipe.data.corpus == "ptb" and recipe.data.treebank is None  # the WSJ sample in the data directory
    assert recipe.model.norm == "pre"  # chosen on dev (docs/parsing.md): a final LayerNorm per stack, 2 x [2D]
    assert count_parameters(recipe) == 8_396_800 + 3 * 256 * 256 + 2 * 2 * 256  # + alignment [3D, D]
    assert recipe.parsing.word_span and recipe.data.tree_leaves == "tag"  # chosen on dev (docs/parsing.md)
    assert 0.3 in recipe.decode.alpha_grid and recipe.train.keep_best_by == "val_f1"
    assert recipe.model.max_length >= recipe.data.max_length + recipe.decode.extra_length


def test_a_parser_stops_its_search_by_the_exact_rule_only():
    recipe = recipes.get("ptb_sample")
    assert recipe.decode.stop_rule == "exact"
    heuristic = dataclasses.replace(recipe, decode=dataclasses.replace(recipe.decode, stop_rule="heuristic"))
    with pytest.raises(ValueError, match="^--stop_rule: a parsing model's search takes exact only, not heuristic$"):
        tasks.get(heuristic).module(None, None, heuristic)
