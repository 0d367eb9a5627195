"""The shipped parsers, saved_models/ptb_sample (the paper's sequence-to-sequence parser) and ptb_sample_chart (the
chart parser on its encoder): each parses with kt-parse out of the box into one well-formed tree over the input's
words, and kt-evaluate-parser reproduces the scores stored in its metadata.json."""

import dataclasses
import json
import os

import pytest

from keras_transformer import recipes
from keras_transformer.config import Recipe
from keras_transformer.tasks.parsing import trees
from tests.conftest import REPO_ROOT
from tests.inference.support import run_cli

# the shipped parsers by recipe, with the search their exports run: (beam, extra length) of §6.3, or the chart's CKY
SEARCH = {"ptb_sample": (21, 300), "ptb_sample_chart": (1, 0)}
HELD = ("Two young children are playing soccer on a field .",
        "The company said it expects to report a loss for the third quarter .")


def shipped(recipe):
    return os.path.join(REPO_ROOT, "saved_models", recipe)


@pytest.fixture(scope="module", params=[pytest.param(recipe, marks=pytest.mark.skipif(
    not os.path.isdir(shipped(recipe)), reason=f"no shipped parser in saved_models/{recipe}")) for recipe in SEARCH])
def parser(request):
    """(recipe name, its export's directory, its metadata.json)."""
    with open(os.path.join(shipped(request.param), "metadata.json"), encoding="utf-8") as f:
        return request.param, shipped(request.param), json.load(f)


def test_shipped_parser_is_small_and_records_what_reproduces_it(parser):
    name, where, metadata = parser
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(where) for f in files)
    assert size <= 50 * 2**20
    assert metadata["recipe"] == name and metadata["command"].startswith(f"kt-pipeline --recipe={name} ")
    made = Recipe.from_dict(metadata["recipe_config"])
    # the recipe with no override but --seed (the best of several seeds by dev F1), which the command names
    expected = recipes.get(name)
    expected = dataclasses.replace(expected, train=dataclasses.replace(expected.train, seed=made.train.seed))
    assert made == expected
    assert made.train.seed == 1 or f"--seed={made.train.seed} " in metadata["command"]
    assert metadata["test_split"] == "test" and metadata["test_sentences"] > 100
    assert metadata["train_seconds"] <= 3600
    decode = metadata["decode"]
    assert (decode["beam_size"], decode["extra_length"]) == SEARCH[name]
    grid = decode["alpha_val_f1"]
    assert f"{decode['alpha']:g}" == max(grid, key=grid.get)  # α chosen by dev F1
    assert metadata["repaired"] == 0
    assert metadata["f1"] > 60  # every word flat under one S scores 9.15 on this split; the first parser 14.33


def test_kt_parse_gives_one_tree_over_the_input_words_and_an_empty_line_for_a_blank_one(parser):
    result = run_cli("parse", f"--model={parser[1]}", stdin=f"{HELD[0]}\n  \n{HELD[1]}\n")
    outputs = result.stdout.splitlines()
    assert len(outputs) == len(HELD) + 1 and outputs[1] == ""
    for sentence, output in zip(HELD, outputs[::2]):
        (tree,) = trees.read_trees(output)
        assert trees.words(tree) == sentence.split(), output


@pytest.mark.slow
def test_kt_evaluate_parser_reproduces_the_stored_scores(parser, sample_data_dir):
    _, where, metadata = parser
    result = run_cli("evaluate_parser", f"--model={where}", f"--data_dir={sample_data_dir}", "--json", timeout=900)
    scores = json.loads(result.stdout.strip().splitlines()[-1])
    assert {key: round(scores[key], 2) for key in ("precision", "recall", "f1", "exact_match")} == {
        key: metadata[key] for key in ("precision", "recall", "f1", "exact_match")}
    assert scores["repaired"] == metadata["repaired"] == 0
