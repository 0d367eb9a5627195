"""What a training run may start from: a work directory it can continue, or weights it is told to start from.

    prepare_workdir(recipe, workdir, data_dir=None, corpus=TEXT) -> True when the run starts fresh
    shape_mismatch(old, new, where)   a ValueError naming the first model field that differs
    initial_weights(init_from, model, recipe)   --init_from: a work directory's or SavedModel's weights
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Tuple, Union

from absl import logging

from keras_transformer.artifacts import find_tokenizer
from keras_transformer.checkpoints.state import list_checkpoints, resolve_checkpoint, restore_weights
from keras_transformer.config import Recipe
from keras_transformer.data import corpora
from keras_transformer.data import tokenizer as tokenizer_lib
from keras_transformer.model import Transformer, build_model
from keras_transformer.serving import loading
from keras_transformer.workdir import WorkDir


# Model fields that set the weights' shapes: a run can only resume or start from weights that agree on these.
SHAPE_FIELDS = ("vocab_size", "shared_vocabulary", "d_model", "d_ff", "num_heads", "num_encoder_layers",
                "num_decoder_layers", "d_k", "d_v", "positional", "max_length", "norm")


def shape_mismatch(old: Recipe, new: Recipe, where: str) -> None:
    """Raise ValueError naming the first model field whose value differs between ``where``'s run and this one."""
    for field in SHAPE_FIELDS:
        before, now = getattr(old.model, field), getattr(new.model, field)
        if before != now and not (field == "max_length" and old.model.positional == "sinusoidal"):
            raise ValueError(f"{field}: {where} holds a model with {field}={before}, this run asks for {now}")


def _init_source(init_from: Union[str, os.PathLike], recipe: Recipe) -> Tuple[Path, bool]:
    """(path, is_saved_model) of ``--init_from``; its model must have this recipe's shape."""
    source = Path(init_from)
    if loading.is_saved_model(source):
        shape_mismatch(Recipe.from_dict(loading.read_info(source)["recipe"]), recipe, str(source))
        return source, True
    if not WorkDir(source).recipe_file.is_file():
        raise FileNotFoundError(f"--init_from: {source} is neither a SavedModel nor a training work directory")
    shape_mismatch(WorkDir(source).read_recipe(), recipe, str(source))
    return source, False


def prepare_workdir(recipe: Recipe, workdir: Union[str, os.PathLike], data_dir=None,
                    corpus: corpora.Corpus = corpora.TEXT) -> bool:
    """Refuse, before anything is written, a work directory whose run this one cannot continue; True if fresh.

    A work directory with checkpoints resumes only with the same model shape and the same tokenizer
    (ValueError naming the field, never a silent retrain). A fresh one started ``--init_from`` another
    run gets that run's tokenizer, under the name this recipe's data looks it up by.
    """
    workdir = WorkDir(workdir)
    sides = [None] if recipe.model.shared_vocabulary else list(tokenizer_lib.SIDES)

    def tokenizer_path(side):  # the name this recipe's data looks a model up by (stats the corpus files)
        return workdir.tokenizer / f"{tokenizer_lib.cache_key(recipe, data_dir, side, corpus=corpus)}.model"

    fresh = not list_checkpoints(workdir.checkpoints)
    if not fresh:
        shape_mismatch(workdir.read_recipe(), recipe, str(workdir))
        others = sorted(p.name for p in workdir.tokenizer.glob("*.model"))  # none: trained on given batches
        missing = [tokenizer_path(side).name for side in sides if not tokenizer_path(side).is_file()] if others else []
        if missing:
            raise ValueError(f"tokenizer: {workdir} was trained with tokenizer/{others[0]} (another corpus, "
                             f"vocabulary or seed); this run's data needs {missing[0]}. Resume with the "
                             f"same data, or start a new --workdir (--init_from={workdir} keeps its weights)")
    elif recipe.train.init_from:
        source, is_saved_model = _init_source(recipe.train.init_from, recipe)  # the same shared_vocabulary
        if is_saved_model:
            models = loading.tokenizer_models(source)
        else:
            found = find_tokenizer(source, recipe, data_dir, corpus)
            models = {role: Path(t.model_path) for role, t in found.models.items()}
        for side in sides:
            target = tokenizer_path(side)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(models[side or "shared"], target)
    return fresh


def initial_weights(init_from: Union[str, os.PathLike], model: Transformer, recipe: Recipe) -> None:
    """Load the weights of ``init_from`` into ``model`` (fine-tuning; the optimizer starts afresh).

    ``init_from`` is a training work directory (its newest averaged checkpoint if any, else its
    latest) or an exported SavedModel. Raises ValueError naming the field when its model's shape
    differs from ``recipe``'s.
    """
    source, is_saved_model = _init_source(init_from, recipe)
    if is_saved_model:
        import tensorflow_text  # noqa: F401  (registers the SentencePiece ops of the text signatures)

        exported = build_model(recipe)
        try:
            loading.assign_exported(exported, loading.load_saved_model(source), source)  # by name
        except ValueError as e:
            raise ValueError(f"--init_from: {e}") from None
        for weight, value in zip(model.weights, exported.weights):
            weight.assign(value)
    else:
        has_average = bool(list_checkpoints(WorkDir(source).averaged))
        restore_weights(model, resolve_checkpoint(source, "averaged" if has_average else "latest"))
    logging.info("initialised the weights from %s", source)
