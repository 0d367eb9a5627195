"""Parameter counts of Table 3: built model == closed form, and within 7% of the paper."""

import dataclasses

import pytest

from keras_transformer import recipes
from keras_transformer.model import build_model, count_parameters
from keras_transformer.recipes.table3 import PAPER_PARAMS_MILLIONS
from tests.support import run_cli


@pytest.mark.parametrize("name", sorted(PAPER_PARAMS_MILLIONS))
def test_table3_parameter_counts(name):
    """Each row's closed form is within 7% of the paper's count and equals the count of the row's model built with
    100 pieces and one layer a stack (the row's widths, heads and positions; initialising 37,000 embedding rows
    and N layers of d_model 1024 is most of the time, and the embedding and the stacks add V x D and N x a
    layer in both counts: tests/test_model.py builds N > 1)."""
    config = recipes.get(name).model
    assert config.vocab_size == 37000
    closed_form = count_parameters(config)
    small = dataclasses.replace(config, vocab_size=100, num_encoder_layers=1, num_decoder_layers=1)
    assert build_model(small).count_params() == count_parameters(small)
    assert abs(closed_form / 1e6 - PAPER_PARAMS_MILLIONS[name]) / PAPER_PARAMS_MILLIONS[name] < 0.07


def test_closed_form_reference_values():
    assert count_parameters(recipes.get("base").model) == 63_082_496
    assert count_parameters(recipes.get("big").model) == 214_245_376


@pytest.mark.parametrize("variant", [{"positional": "learned"}, {"norm": "pre"}, {"d_k": 16, "d_v": 32}])
def test_closed_form_covers_options(variant):
    config = dataclasses.replace(recipes.get("tiny").model, **variant)
    assert build_model(config).count_params() == count_parameters(config)


def test_every_table3_row_is_a_recipe():
    names = recipes.names()
    for row in "abcde":
        assert any(n.startswith(f"table3_{row}_") for n in names)


@pytest.mark.parametrize("shared", [True, False])
def test_kt_params_prints_the_bare_integer_last(shared):
    flag = "--shared_vocabulary" if shared else "--noshared_vocabulary"  # not shared: a second 500 x d_model matrix
    out = run_cli("params", "--recipe=tiny", "--vocab_size=500", flag)
    tiny = recipes.get("tiny").model
    expected = count_parameters(dataclasses.replace(tiny, vocab_size=500)) + (0 if shared else 500 * tiny.d_model)
    assert int(out.stdout.strip().splitlines()[-1]) == expected
    assert out.stderr == ""


def test_kt_params_unknown_recipe_is_one_clear_line():
    out = run_cli("params", "--recipe=nope", check=False)
    assert out.returncode != 0
    assert out.stderr.strip().splitlines() == [out.stderr.strip()] and "--recipe" in out.stderr


@pytest.mark.parametrize("name, params", [("base_enfr", 60_522_496), ("big_enfr", 209_125_376)])
def test_en_fr_recipes_32000_vocabulary(name, params):
    recipe = recipes.get(name)
    assert recipe.model.vocab_size == 32000  # §5.1: a 32000 word-piece vocabulary (ours: BPE)
    assert (recipe.data.corpus, recipe.data.source_lang, recipe.data.target_lang) == ("wmt14", "en", "fr")
    assert count_parameters(recipe.model) == params
    # 5000 fewer shared embedding rows than the En-De recipe of the same size
    en_de = recipes.get(name.removesuffix("_enfr")).model
    assert count_parameters(en_de) - params == 5000 * en_de.d_model


def test_big_enfr_follows_section_6_1():
    big, big_enfr = recipes.get("big"), recipes.get("big_enfr")
    assert big_enfr.model.dropout == 0.1 and big.model.dropout == 0.3  # P_drop 0.1 for En-Fr instead of 0.3
    assert big_enfr.train.train_steps == 300_000 and big_enfr.decode.average_checkpoints == 20
    assert recipes.get("base_enfr").decode.average_checkpoints == 5


def test_kt_params_base_enfr():
    out = run_cli("params", "--recipe=base_enfr")
    assert int(out.stdout.strip().splitlines()[-1]) == 60_522_496
