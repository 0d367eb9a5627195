"""A recipe file with a key this version does not know is refused, naming the key, its section and the closest
valid name; a value of the wrong type is refused naming the field and what it wants; keys older versions wrote
still load (keras_transformer/recipe_keys.py)."""

import json
from pathlib import Path

import pytest

from keras_transformer import recipes
from keras_transformer.config import Recipe
from keras_transformer.recipe_keys import LEGACY_KEYS
from tests.conftest import REPO_ROOT
from tests.robustness.support import assert_one_error_line, run_cli


def _tiny() -> dict:
    return json.loads(recipes.get("tiny").to_json())


@pytest.mark.parametrize("section,key,message", [
    ("model", "d_modle", "model.d_modle: unknown key; did you mean d_model?"),
    ("train", "warmup_step", "train.warmup_step: unknown key; did you mean warmup_steps?"),
    ("decode", "beam", "decode.beam: unknown key; did you mean beam_size?"),
    ("model", "warmup_steps", "model.warmup_steps: unknown key; it belongs in train (train.warmup_steps)"),
    ("data", "label_smoothing", "data.label_smoothing: unknown key; it belongs in train (train.label_smoothing)"),
])
def test_an_unknown_or_misplaced_key_is_named_with_its_section_and_the_closest_name(section, key, message):
    d = _tiny()
    d[section][key] = 64
    with pytest.raises(ValueError) as raised:
        Recipe.from_dict(d)
    assert str(raised.value) == message


def test_a_key_without_a_close_name_lists_the_valid_ones():
    d = _tiny()
    d["decode"]["zzzzzz"] = 1
    with pytest.raises(ValueError, match=r"^decode\.zzzzzz: unknown key; valid keys: alpha, alpha_grid, "
                                         r"average_checkpoints, beam_size, extra_length, stop_rule$"):
        Recipe.from_dict(d)


def test_an_unknown_top_level_section_or_key_is_refused():
    d = _tiny()
    d["modle"] = {"d_model": 64}
    with pytest.raises(ValueError, match=r"^modle: unknown section; did you mean model\?$"):
        Recipe.from_dict(d)
    d = _tiny()
    d["d_model"] = 64  # a model field at the top level
    with pytest.raises(ValueError, match=r"^d_model: unknown key; it belongs in model \(model\.d_model\)$"):
        Recipe.from_dict(d)


def test_a_section_that_is_not_an_object_is_named():
    d = _tiny()
    d["train"] = [1, 2]
    with pytest.raises(ValueError, match="^train: expected an object of train settings, got list$"):
        Recipe.from_dict(d)


def test_keys_older_versions_wrote_and_the_task_key_still_load():
    d = _tiny()
    for section, keys in LEGACY_KEYS.items():
        for key in keys:
            d[section][key] = 100
    d["task"] = "translation"  # Recipe.task
    assert Recipe.from_dict(d) == recipes.get("tiny")


def test_a_legacy_key_in_another_section_is_still_an_error():
    d = _tiny()
    d["model"]["steps_per_epoch"] = 100  # only train ever had it
    with pytest.raises(ValueError, match=r"^model\.steps_per_epoch: unknown key"):
        Recipe.from_dict(d)


@pytest.mark.parametrize("export", ["multi30k_en_de", "ptb_sample", "ptb_sample_chart"])
def test_the_shipped_exports_recipes_load(export):
    info = json.loads((Path(REPO_ROOT) / "saved_models" / export / "assets" / "export.json").read_text())
    assert Recipe.from_dict(info["recipe"]).name


def test_recipes_load_refuses_a_misspelt_file(tmp_path):
    d = _tiny()
    d["model"]["d_modle"] = 64
    path = tmp_path / "r.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=r"^--recipe: .*r\.json: .*model\.d_modle: unknown key; did you mean "
                                         r"d_model\?"):
        recipes.load(str(path))


def test_kt_train_exits_2_with_one_line_naming_the_key(tmp_path):
    d = _tiny()
    d["model"]["d_modle"] = 64
    path = tmp_path / "r.json"
    path.write_text(json.dumps(d))
    result = run_cli("train", f"--recipe={path}", f"--workdir={tmp_path / 'run'}", timeout=300)
    assert_one_error_line(result, "--recipe", "model.d_modle: unknown key; did you mean d_model?")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("section,key,value,message", [
    ("model", "d_model", "64", 'model.d_model: expected an integer, got the string "64"'),
    ("model", "d_model", 64.5, "model.d_model: expected an integer, got the number 64.5"),
    ("model", "num_heads", True, "model.num_heads: expected an integer, got true"),
    ("model", "dropout", "0.1", 'model.dropout: expected a number, got the string "0.1"'),
    ("model", "shared_vocabulary", 1, "model.shared_vocabulary: expected true or false, got the number 1"),
    ("model", "norm", 3, "model.norm: expected a string, got the number 3"),
    ("model", "norm", "middle", "model.norm: must be 'post' or 'pre', got 'middle'"),  # an enum's own rule
    ("train", "warmup_steps", None, "train.warmup_steps: expected an integer, got null"),
    ("data", "bucket_boundaries", "8,16", 'data.bucket_boundaries: expected a list of integers or null, got the '
                                          'string "8,16"'),
    ("data", "bucket_boundaries", [8, "16"], 'data.bucket_boundaries: expected a list of integers, got a list '
                                             'holding the string "16"'),
    ("decode", "alpha_grid", [0.6, True], "decode.alpha_grid: expected a list of numbers, got a list holding true"),
    ("data", "train_prefix", 5, "data.train_prefix: expected a string or null, got the number 5"),
    (None, "name", 3, "name: expected a string, got the number 3"),
])
def test_a_value_of_the_wrong_type_is_named_with_its_field_and_what_it_wants(section, key, value, message):
    d = _tiny()
    (d if section is None else d[section])[key] = value
    with pytest.raises(ValueError) as caught:
        Recipe.from_dict(d)
    assert str(caught.value) == message


def test_right_types_in_json_form_still_load():
    d = _tiny()
    d["model"]["dropout"] = 0  # an integer where a number is wanted
    d["data"]["bucket_boundaries"] = [8, 16, 32]
    d["decode"]["alpha_grid"] = [0.6, 1]
    recipe = Recipe.from_dict(d)
    assert recipe.model.dropout == 0 and recipe.data.bucket_boundaries == (8, 16, 32)
    assert recipe.decode.alpha_grid == (0.6, 1)


def test_a_missing_section_is_named():
    d = _tiny()
    del d["train"]
    with pytest.raises(ValueError, match="^train: missing section$"):
        Recipe.from_dict(d)


def test_kt_train_names_a_wrongly_typed_field_in_one_line(tmp_path):
    d = _tiny()
    d["model"]["d_model"] = "64"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(d))
    result = run_cli("train", f"--recipe={path}", f"--workdir={tmp_path / 'run'}", timeout=300)
    assert_one_error_line(result, f"--recipe: {path}: model.d_model: expected an integer, got the string \"64\"")
    assert not (tmp_path / "run").exists()
