import dataclasses

import pytest

from keras_transformer import recipes
from keras_transformer.config import DataConfig, DecodeConfig, ModelConfig, Recipe, TrainConfig


@pytest.mark.parametrize("cls,field,value", [
    (ModelConfig, "num_heads", 7),  # 512 not divisible by 7
    (ModelConfig, "dropout", 1.5),
    (ModelConfig, "positional", "rotary"),
    (DataConfig, "corpus", "nope"),
    (DataConfig, "tokens_per_batch", 0),
    (DataConfig, "bpe_dropout", 1.0),
    (DataConfig, "bpe_dropout", -0.1),
    (TrainConfig, "train_steps", -1),
    (TrainConfig, "max_train_minutes", -5.0),
    (TrainConfig, "min_train_steps", -1),
    (TrainConfig, "label_smoothing", 1.0),
    (DecodeConfig, "alpha_grid", (0.6, -1.0)),
    (DecodeConfig, "alpha_grid", (float("nan"),)),
    (DecodeConfig, "stop_rule", "soon"),
])
def test_invalid_values_name_the_field(cls, field, value):
    with pytest.raises(ValueError, match=field):
        cls(**{field: value})


def test_configs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ModelConfig().d_model = 3


@pytest.mark.parametrize("name", recipes.names())
def test_recipe_json_round_trip(name):
    recipe = recipes.get(name)
    import json

    assert Recipe.from_dict(json.loads(recipe.to_json())) == recipe


def test_unknown_recipe_lists_known_ones():
    with pytest.raises(ValueError, match="base"):
        recipes.get("nope")


def test_recipe_files_of_older_versions_still_load():
    import json

    d = json.loads(recipes.get("tiny").to_json())
    d["train"]["steps_per_epoch"] = 100  # a field older versions wrote
    assert Recipe.from_dict(d) == recipes.get("tiny")


def test_a_parser_has_one_vocabulary():
    ptb = recipes.get("ptb_sample")
    with pytest.raises(ValueError, match="^shared_vocabulary: the parsing task reads and writes with one vocabulary"):
        dataclasses.replace(ptb, model=dataclasses.replace(ptb.model, shared_vocabulary=False))
