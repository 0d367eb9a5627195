"""Reading an export back: the SavedModel, its description and tokenizers, and its weights into a Keras model.

    is_saved_model(path) -> bool
    load_saved_model(export_dir) -> the loaded SavedModel (a damaged one: a ValueError naming it)
    read_info(export_dir) -> assets/export.json as a dict (a missing or unreadable one: an error naming it)
    tokenizer_models(export_dir) -> {role: path of its SentencePiece model}
    load_exported(export_dir) -> (model, recipe, tokenizer)   the Keras model back from an export
    assign_exported(model, loaded, export_dir)   a loaded export's variables into a model, by name
"""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path
from typing import Tuple

import tensorflow as tf

from keras_transformer.checkpoints import health as checkpoint_health
from keras_transformer.checkpoints.names import variable_names
from keras_transformer.config import Recipe
from keras_transformer.data.tokenizer import Tokenizer, TokenizerPair, Tokenizers
from keras_transformer.model import build_model

EXPORT_INFO = "export.json"  # assets/export.json: what the export holds (serving/writer.py)


def is_saved_model(path) -> bool:
    return Path(path, "saved_model.pb").is_file()


def read_info(export_dir) -> dict:
    """``assets/export.json`` of an export written by ``serving.writer.write``: recipe, decoding defaults, ..."""
    path = Path(export_dir, "assets", EXPORT_INFO)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; is {export_dir} a SavedModel written by kt-export?")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: unreadable ({getattr(e, 'strerror', None) or e}); not a complete kt-export "
                         "SavedModel") from None


def load_saved_model(export_dir):
    """``tf.saved_model.load``; a damaged SavedModel (a file cut short, removed or corrupt) is a ValueError naming
    the directory and what is wrong with it, not a reader's traceback."""
    try:
        return tf.saved_model.load(str(export_dir))
    except (tf.errors.OpError, IndexError, OSError) as e:
        if not os.path.isfile(os.path.join(export_dir, "saved_model.pb")):
            raise FileNotFoundError(f"{export_dir}: no saved_model.pb; not a SavedModel") from None
        variables = os.path.join(str(export_dir), "variables", "variables")
        problem = checkpoint_health.problem(variables)
        reason = f"in variables/, {problem}" if problem else " ".join(str(e).split("\n")[0].split())
        raise ValueError(f"{export_dir} is a damaged SavedModel: {reason}; export it again (kt-export)") from None


def tokenizer_models(export_dir) -> dict:
    """{role: path} of a text export's SentencePiece models in ``assets/``: "shared", or "source" and "target"
    (``export.json``'s ``tokenizers``; an export from before that record has one model, the shared one)."""
    assets = os.path.join(str(export_dir), "assets")
    with open(os.path.join(assets, EXPORT_INFO)) as f:
        roles = json.load(f).get("tokenizers")
    if roles is None:
        found = sorted(glob.glob(os.path.join(assets, "*.model")))
        roles = {"shared": os.path.basename(found[0])} if len(found) == 1 else {}
    if not roles:
        raise FileNotFoundError(f"{assets}: no SentencePiece model (exported with --ids_only?)")
    return {role: os.path.join(assets, name) for role, name in roles.items()}


def load_exported(export_dir) -> Tuple[object, Recipe, Tokenizers]:
    """(Keras model, recipe, tokenizer) rebuilt from a text SavedModel written by ``export``.

    The model is built from ``assets/export.json``'s recipe and takes the SavedModel's ``model_variables``
    by name (``assign_exported``). This lets an export be re-exported with newer decoding code or converted to
    another engine without its work directory.
    """
    info = read_info(export_dir)
    if "ensemble" in info:
        raise ValueError(f"{export_dir} is an ensemble of {info['ensemble']['members']} models: it translates "
                         "(kt-translate, kt-evaluate, TF Serving), but no one model can be read back from it; use the "
                         "models it was exported from")
    recipe = Recipe.from_dict(info["recipe"])
    models = {role: Tokenizer(path) for role, path in tokenizer_models(export_dir).items()}
    loaded = load_saved_model(export_dir)
    model = build_model(recipe)
    assign_exported(model, loaded, export_dir)
    return model, recipe, models["shared"] if "shared" in models else TokenizerPair(models["source"], models["target"])


def assign_exported(model, loaded, export_dir) -> None:
    """Set each of ``model.variables`` to the loaded export's variable of the same name (``variable_names``).

    ``loaded``: ``tf.saved_model.load`` of a directory ``export`` wrote. Every variable must be there with its
    shape (a ValueError naming the first that is not). An export written before variables were named by
    path (its names are those given at creation, e.g. ``transformer/encoder/kernel``, none of them a path)
    holds them in ``model.variables`` order and is read in that order.
    """
    saved = list(loaded.model_variables)
    names = variable_names(model)
    by_name = {v.name.rsplit(":", 1)[0]: v for v in saved}
    if len(saved) != len(names):
        raise ValueError(f"{export_dir}: {len(saved)} variables, but the model has {len(names)}")
    if by_name.keys().isdisjoint(names):
        values = saved  # an export from before the names: model.variables order
    else:
        missing = [name for name in names if name not in by_name]
        if missing:
            raise ValueError(f"{export_dir}: no variable {missing[0]} ({len(missing)} of the model's {len(names)} "
                             "missing); not an export of this recipe's model?")
        values = [by_name[name] for name in names]
    for variable, name, value in zip(model.variables, names, values):
        if tuple(variable.shape) != tuple(value.shape):
            raise ValueError(f"{export_dir}: variable {name} has shape {tuple(value.shape)} in the export, "
                             f"{tuple(variable.shape)} in the model")
        variable.assign(tf.cast(value, variable.dtype))  # a bfloat16 export's weights into a float32 model
