"""What a training run may start from: a work directory it can continue, or weights it is told to start from.

    prepare_workdir(recipe, workdir, data_dir=None, corpus=TEXT) -> True when the run starts fresh
    shape_mismatch(old, new, where)   a ValueError naming the first model field that differs
    check_resume(workdir, recipe, policy)   a ValueError naming freeze or precision when a resume cannot keep them
    initial_weights(init_from, model, recipe, tokenizers)   --init_from: a work directory's or SavedModel's
                                      weights, mapped piece by piece onto a --new_vocabulary
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Optional, Tuple, Union

import numpy as np
import tensorflow as tf

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


def shape_mismatch(old: Recipe, new: Recipe, where: str, fields=SHAPE_FIELDS) -> None:
    """Raise ValueError naming the first model field whose value differs between ``where``'s run and this one."""
    for field in fields:
        before, now = getattr(old.model, field), getattr(new.model, field)
        if before != now and not (field == "max_length" and old.model.positional == "sinusoidal"):
            raise ValueError(f"{field}: {where} holds a model with {field}={before}, this run asks for {now}")


def check_resume(workdir: Union[str, os.PathLike], recipe: Recipe, policy: str) -> None:
    """Refuse continuing ``workdir``'s checkpoints with another optimizer layout: other ``--freeze`` layers (Adam's
    moments exist for the trained variables only) or float16 against the others (a ``LossScaleOptimizer`` holds
    its scale in the checkpoint). Between float32 and mixed_bfloat16 a run moves freely: the same variables."""
    workdir = WorkDir(workdir)
    before = workdir.read_recipe().train.freeze
    if before != recipe.train.freeze:
        raise ValueError(f"freeze: {workdir} was trained with --freeze={before!r}, this run asks for "
                         f"{recipe.train.freeze!r}; resume with the same, or start a new --workdir "
                         f"with --init_from={workdir}")
    trained = workdir.read_policy() or "float32"
    if (trained == "mixed_float16") != (policy == "mixed_float16"):
        raise ValueError(f"precision: {workdir} was trained under {trained}, this machine trains under {policy} "
                         "(the loss scale of mixed_float16 lives in the checkpoint); resume where it trained, or "
                         f"start a new --workdir with --init_from={workdir}")


def _init_source(init_from: Union[str, os.PathLike], recipe: Recipe) -> Tuple[Path, bool, Recipe]:
    """(path, is_saved_model, its recipe) of ``--init_from``; its model must have this recipe's shape (but for
    ``vocab_size`` with ``--new_vocabulary``)."""
    source = Path(init_from)
    if loading.is_saved_model(source):
        source_recipe, is_saved_model = Recipe.from_dict(loading.read_info(source)["recipe"]), True
    elif WorkDir(source).recipe_file.is_file():
        source_recipe, is_saved_model = WorkDir(source).read_recipe(), False
    else:
        raise FileNotFoundError(f"--init_from: {source} is neither a SavedModel nor a training work directory")
    fields = SHAPE_FIELDS
    if recipe.train.new_vocabulary:
        fields = tuple(f for f in SHAPE_FIELDS if f != "vocab_size")
    elif source_recipe.model.vocab_size != recipe.model.vocab_size:
        raise ValueError(f"vocab_size: {source} holds a model with vocab_size={source_recipe.model.vocab_size}, this "
                         f"run asks for {recipe.model.vocab_size}; --new_vocabulary trains this run's own "
                         "vocabulary and keeps the embedding rows of the pieces both share")
    untagged = [lang for lang in recipe.data.target_langs if lang not in source_recipe.data.target_langs]
    if untagged and not recipe.train.new_vocabulary:
        raise ValueError(f"target_langs: {source}'s vocabulary has no tag for {', '.join(untagged)} (its targets: "
                         f"{', '.join(source_recipe.data.target_langs) or 'one, untagged'}); --new_vocabulary trains "
                         "one that has")
    shape_mismatch(source_recipe, recipe, str(source), fields)
    return source, is_saved_model, source_recipe


def _source_tokenizers(source: Path, is_saved_model: bool, source_recipe: Recipe, data_dir, corpus) -> dict:
    """{role: SentencePiece model path} of ``--init_from``'s vocabulary: "shared", or "source" and "target"."""
    if is_saved_model:
        return {role: Path(path) for role, path in loading.tokenizer_models(source).items()}
    found = find_tokenizer(source, source_recipe, data_dir, corpus)
    return {role: Path(t.model_path) for role, t in found.models.items()}


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
        source, is_saved_model, source_recipe = _init_source(recipe.train.init_from, recipe)  # same shared_vocabulary
        if recipe.train.new_vocabulary:
            return fresh  # this run trains its own tokenizer on its data
        models = _source_tokenizers(source, is_saved_model, recipe, data_dir, corpus)
        for side in sides:
            target = tokenizer_path(side)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(models[side or "shared"], target)
    return fresh


def initial_weights(init_from: Union[str, os.PathLike], model: Transformer, recipe: Recipe,
                    tokenizers: Optional[tokenizer_lib.Tokenizers] = None, data_dir=None,
                    corpus: corpora.Corpus = corpora.TEXT) -> None:
    """Load the weights of ``init_from`` into ``model`` by variable path (fine-tuning; the optimizer starts afresh).

    ``init_from`` is a training work directory (its newest averaged checkpoint if any, else its latest) or an
    exported SavedModel. Raises ValueError naming the field when its model's shape differs from ``recipe``'s.
    With ``recipe.train.new_vocabulary``, ``tokenizers`` is this run's vocabulary: each embedding row of a piece
    the source vocabulary also has is copied from the source's row of that piece; the rows of new pieces keep
    ``model``'s own initialisation (N(0, d_model^-1), the shared embedding's), as a fresh model's would.
    """
    source, is_saved_model, source_recipe = _init_source(init_from, recipe)
    if recipe.train.new_vocabulary and model.tokenizer_tables:
        raise ValueError(f"new_vocabulary: the {recipe.task} task's model reads tables built from its vocabulary; "
                         "fine-tune it with the source's vocabulary")
    loaded = build_model(source_recipe, dtype_policy="float32")
    if is_saved_model:
        import tensorflow_text  # noqa: F401  (registers the SentencePiece ops of the text signatures)

        try:
            loading.assign_exported(loaded, loading.load_saved_model(source), source)  # by name
        except ValueError as e:
            raise ValueError(f"--init_from: {e}") from None
    else:
        has_average = bool(list_checkpoints(WorkDir(source).averaged))
        restore_weights(loaded, resolve_checkpoint(source, "averaged" if has_average else "latest"))
    rows = {}
    if recipe.train.new_vocabulary:
        old = _source_tokenizers(source, is_saved_model, source_recipe, data_dir, corpus)
        rows = _embedding_rows(old, tokenizers.models, recipe.model.shared_vocabulary)
    _copy_weights(loaded, model, rows)
    logging.info("initialised the weights from %s", source)


def _pieces(tokenizer: tokenizer_lib.Tokenizer) -> list:
    return [p.decode("utf-8") for p in tokenizer.id_to_piece(tf.range(tokenizer.vocab_size)).numpy()]


def _embedding_rows(old: dict, new: dict, shared: bool) -> dict:
    """{embedding variable path: (new ids, old ids) of the pieces both vocabularies hold}, logged per vocabulary."""
    rows = {}
    for path, role in (("shared_embedding/embeddings", "shared" if shared else "target"),
                       ("source_embedding/embeddings", "source")):
        if role not in new:
            continue
        old_ids = {piece: i for i, piece in enumerate(_pieces(tokenizer_lib.Tokenizer(old[role])))}
        pairs = [(j, old_ids[piece]) for j, piece in enumerate(_pieces(new[role])) if piece in old_ids]
        rows[path] = tuple(np.array(ids, dtype=np.int64) for ids in zip(*pairs))
        print(f"--init_from: {len(pairs):,} of the {new[role].vocab_size:,} pieces of the new {role} vocabulary keep "
              f"their embedding rows; {new[role].vocab_size - len(pairs):,} start from the initialisation",
              flush=True)
    return rows


def _relative(path: str) -> str:
    return path.split("/", 1)[-1]  # without the model's own name


def _copy_weights(source: Transformer, model: Transformer, rows: dict) -> None:
    """Each of ``model``'s weights from ``source``'s of the same path and shape; the ``rows`` of vocabulary-indexed
    ones; the rest (a new vocabulary's piece counts, a task's added weights) keep their values, named in the log."""
    by_path = {_relative(v.path): v for v in source.weights}
    kept = []
    for variable in model.weights:
        path = _relative(variable.path)
        loaded = by_path.get(path)
        if path in rows and len(rows[path]):
            value = variable.numpy()
            new_ids, old_ids = rows[path]
            value[new_ids] = loaded.numpy()[old_ids]
            variable.assign(value)
        elif loaded is not None and tuple(loaded.shape) == tuple(variable.shape):
            variable.assign(tf.cast(loaded, variable.dtype))
        else:
            kept.append(path)
    if kept:
        logging.info("--init_from: %d weights not in the source keep their values: %s", len(kept), ", ".join(kept))
