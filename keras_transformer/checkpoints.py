"""A training work directory's checkpoints: listing, averaging (§6.1) and loading for inference.

§6.1: "For the base models, we used a single model obtained by averaging the
last 5 checkpoints, which were written at 10-minute intervals."

    list_checkpoints(directory)                        -> [Checkpoint(step, path)], oldest first
    average_checkpoints(workdir, num=5, output_dir=None, best=False) -> path of the averaged checkpoint
    load_for_inference(workdir, checkpoint="latest"|"averaged"|"best"|PATH, data_dir=None)
        -> (model, recipe, tokenizer)
    initial_weights(init_from, model)                  -> tokenizer file of the run the weights came from

Training writes ``tf.train.Checkpoint(model=..., optimizer=...)`` files under
``<workdir>/checkpoints``, and with ``keep_best_by`` the best ones by a
validation score under ``<workdir>/checkpoints/best`` (``best.json`` ranks
them). The average is of the model weights only (the optimizer's moments are
not averaged and not written); it goes to
``<workdir>/averaged/ckpt-<last step>``, with ``ckpt-<last step>.json``
beside it naming the checkpoints that went into it.

Where the weights are in a checkpoint: ``tf.train.Checkpoint(model=model)``
alone reaches only the shared embedding, because the encoder and decoder keep
their blocks in a Python list that Keras 3 tracks but ``tf.train.Checkpoint``
does not. Every trainable weight is reachable through the optimizer, whose
``_trainable_variables`` list (``model.trainable_variables`` order) the
checkpoint stores as ``optimizer/_trainable_variables/<i>``. So weights are
read through that path (:class:`_TrainableVariables`, which mirrors it) and an
average is written with both paths: the same layout as a training checkpoint
without the optimizer's slots, readable by anything that reads those.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import List, NamedTuple, Tuple, Union

import numpy as np
import tensorflow as tf
from absl import logging

from keras_transformer import checkpoint_health, training
from keras_transformer.config import Recipe
from keras_transformer.data import tokenizer as tokenizer_lib
from keras_transformer.model import Transformer, build_model

CHECKPOINT_DIR = "checkpoints"
BEST_DIR = os.path.join(CHECKPOINT_DIR, "best")
BEST_MANIFEST = "best.json"
AVERAGED_DIR = "averaged"
_CKPT = re.compile(r"^ckpt-(\d+)\.index$")


class Checkpoint(NamedTuple):
    step: int
    path: str  # the prefix: "<dir>/ckpt-<step>" (files <path>.index, <path>.data-*)


def list_checkpoints(directory: Union[str, os.PathLike]) -> List[Checkpoint]:
    """The ``ckpt-<step>`` checkpoints in ``directory``, sorted by step (oldest first).

    Found by their ``.index`` files, so a copied or moved work directory works
    (the ``checkpoint`` state file may hold the old absolute paths).
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), name) for name in os.listdir(directory) if (m := _CKPT.match(name))]
    return [Checkpoint(step, str(directory / name[: -len(".index")])) for step, name in sorted(found)]


class _TrainableVariables(tf.Module):
    """Stands in for the Keras optimizer in a checkpoint's object graph: only its list of model weights."""

    def __init__(self, model: Transformer):
        super().__init__(name="optimizer")
        if model.non_trainable_weights:
            raise ValueError(f"model: {len(model.non_trainable_weights)} non-trainable weights; the optimizer path "
                             "of a checkpoint does not hold them")
        self._trainable_variables = list(model.trainable_variables)


def _restore(model: Transformer, path: str) -> None:
    """Model weights from a checkpoint (training or averaged). Fails unless every weight is found with its shape;
    a damaged checkpoint is a ValueError naming it (and the newest intact one beside it)."""
    try:
        status = tf.train.Checkpoint(optimizer=_TrainableVariables(model)).read(path)  # read: no save_counter
    except (tf.errors.OpError, IndexError) as e:
        raise damaged_error(path, checkpoint_health.problem(path) or str(e).strip().splitlines()[0]) from None
    try:
        status.expect_partial().assert_existing_objects_matched()  # partial: the optimizer's slots stay unread
    except AssertionError as e:
        missing = str(e).split(" Python objects")[0].rsplit(" ", 1)[-1]
        raise ValueError(f"{path}: does not hold this model's {len(model.trainable_variables)} weights ({missing} "
                         "objects unmatched); not a checkpoint of this recipe's model?") from None


def _write(model: Transformer, prefix: str) -> str:
    """Model weights only, in a training checkpoint's layout (see the module docstring)."""
    return tf.train.Checkpoint(model=model, optimizer=_TrainableVariables(model)).write(prefix)


def best_checkpoints(workdir: Union[str, os.PathLike]) -> List[Checkpoint]:
    """The kept best checkpoints of a run trained with ``keep_best_by``, best first."""
    directory = Path(workdir) / BEST_DIR
    manifest = directory / BEST_MANIFEST
    if not manifest.is_file():
        raise FileNotFoundError(f"{manifest}: no best checkpoints (train with --keep_best_by=val_loss|val_bleu)")
    kept = json.loads(manifest.read_text())["kept"]  # [[step, score], ...], best first
    on_disk = {c.step: c for c in list_checkpoints(directory)}
    return [on_disk[step] for step, _ in kept if step in on_disk]


def average_checkpoints(workdir: Union[str, os.PathLike], num: int = 5,
                        output_dir: Union[str, os.PathLike, None] = None, best: bool = False) -> str:
    """Average the model weights of the last (``best``: the best) ``num`` checkpoints of ``workdir`` (§6.1).

    Returns the new prefix.

    Each weight is summed in float64 and divided by the number of checkpoints
    actually averaged (fewer than ``num`` if fewer exist; logged), so N copies
    of one checkpoint average to exactly that checkpoint. Written to
    ``<output_dir or workdir/averaged>/ckpt-<last step>`` plus a JSON manifest.
    """
    if num < 1:
        raise ValueError(f"num: must be >= 1, got {num}")
    workdir = Path(workdir)
    recipe = training.read_recipe(str(workdir))
    if best:
        chosen = sorted(best_checkpoints(workdir)[:num])  # oldest first, like the last N
    else:
        available = list_checkpoints(workdir / CHECKPOINT_DIR)
        if not available:
            raise FileNotFoundError(f"{workdir / CHECKPOINT_DIR}: no ckpt-<step> checkpoints to average")
        chosen = available[-num:]
    if len(chosen) < num:
        logging.warning("only %d checkpoints in %s; averaging those (asked for %d)", len(chosen), workdir, num)

    model = build_model(recipe.model)
    sums = None  # one float64 array per model weight
    for ckpt in chosen:
        _restore(model, ckpt.path)
        values = [w.numpy() for w in model.weights]
        sums = [v.astype(np.float64) for v in values] if sums is None else [s + v for s, v in zip(sums, values)]
    for weight, total in zip(model.weights, sums):
        if np.issubdtype(weight.numpy().dtype, np.floating):
            weight.assign((total / len(chosen)).astype(weight.numpy().dtype))
        # non-float state (none in the Transformer today) keeps the last checkpoint's value

    out_dir = Path(output_dir) if output_dir is not None else workdir / AVERAGED_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    prefix = _write(model, str(out_dir / f"ckpt-{chosen[-1].step}"))
    manifest = {
        "averaged": [c.path for c in chosen],
        "steps": [c.step for c in chosen],
        "num_requested": num,
        "best": best,
        "recipe": recipe.name,
    }
    with open(f"{prefix}.json", "w") as f:
        json.dump(manifest, f, indent=2)
    logging.info("averaged %d checkpoints (steps %s) into %s", len(chosen), manifest["steps"], prefix)
    return prefix


def damaged_error(prefix: str, problem: str) -> ValueError:
    """The error for a damaged checkpoint: what is wrong with it, and the newest intact one beside it."""
    intact = checkpoint_health.walk_back(os.path.dirname(prefix) or ".").intact
    hint = f"; the newest intact checkpoint beside it is {intact}" if intact and intact != prefix else ""
    return ValueError(f"checkpoint {prefix} is damaged: {problem}{hint}")


def resolve_checkpoint(workdir: Union[str, os.PathLike], checkpoint: str = "latest") -> str:
    """"latest" (training), "averaged" (newest average), "best" (best kept by keep_best_by), or a prefix.

    The newest checkpoint is the newest one with any file: when its files are incomplete (no .index, a data
    shard missing) this is a ValueError naming it and the newest intact one, never a silent step back.
    """
    workdir = Path(workdir)
    if checkpoint == "best":
        found = best_checkpoints(workdir)
        if not found:
            raise FileNotFoundError(f"{workdir / BEST_DIR}: no best checkpoints on disk")
        path = found[0].path
    elif checkpoint in ("latest", "averaged"):
        directory = workdir / (CHECKPOINT_DIR if checkpoint == "latest" else AVERAGED_DIR)
        walk = checkpoint_health.walk_back(str(directory), read=False)  # the files only; reading is _restore's
        if walk.damaged:
            raise damaged_error(*walk.damaged[0])
        if walk.intact is None:
            hint = " (run kt-average first)" if checkpoint == "averaged" else ""
            raise FileNotFoundError(f"{directory}: no ckpt-<step> checkpoints{hint}")
        return walk.intact
    else:
        if not tf.io.gfile.exists(f"{checkpoint}.index"):
            raise FileNotFoundError(f"{checkpoint}: no such checkpoint (expected {checkpoint}.index)")
        path = checkpoint
    problem = checkpoint_health.problem(path, read=False)
    if problem:
        raise damaged_error(path, problem)
    return path


def resume_point(workdir: Union[str, os.PathLike]) -> checkpoint_health.Walk:
    """The checkpoint a training run in ``workdir`` resumes from: the newest that reads back whole, and the
    damaged newer ones walked back past. A ValueError when there are checkpoints but none is intact (the
    run is refused rather than silently started from scratch over them)."""
    directory = Path(workdir) / CHECKPOINT_DIR
    walk = checkpoint_health.walk_back(str(directory))
    if walk.damaged and walk.intact is None:
        found = "; ".join(f"{Path(prefix).name}: {problem}" for prefix, problem in walk.damaged)
        raise ValueError(f"{directory}: no intact checkpoint to resume from ({found}); move the damaged ones away "
                         "to train from scratch, or train in another --workdir")
    return walk


def find_tokenizer(workdir: Union[str, os.PathLike], recipe: Recipe, data_dir=None) -> tokenizer_lib.Tokenizer:
    """The work directory's own SentencePiece model (never retrained here).

    One ``<workdir>/tokenizer/*.model`` is used as is; with several, the one
    named by the recipe's cache key (which needs the training corpus under
    ``data_dir`` to compute).
    """
    directory = Path(workdir) / "tokenizer"
    models = sorted(directory.glob("*.model")) if directory.is_dir() else []
    if not models:
        raise FileNotFoundError(f"{directory}: no tokenizer (*.model); the work directory is incomplete")
    if len(models) == 1:
        return tokenizer_lib.Tokenizer(models[0])
    path = directory / f"{tokenizer_lib.cache_key(recipe, data_dir)}.model"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found among {len(models)} tokenizers in {directory}")
    return tokenizer_lib.Tokenizer(path)


def load_for_inference(model_arg: Union[str, os.PathLike], checkpoint: str = "latest",
                       data_dir=None) -> Tuple[Transformer, Recipe, tokenizer_lib.Tokenizer]:
    """(model with restored weights, recipe, tokenizer) of a training work directory or an exported SavedModel.

    ``checkpoint``: "latest" (newest training checkpoint), "averaged" (newest
    ``kt-average`` output), "best" (``keep_best_by``) or a checkpoint prefix path. The model is built
    from ``recipe.json`` in float32 (a mixed-precision run's variables are
    float32 anyway); dropout is off at inference.
    """
    workdir = Path(model_arg)
    if (workdir / "saved_model.pb").is_file():
        if checkpoint != "latest":
            raise ValueError(f"--checkpoint: {workdir} is an exported SavedModel; checkpoints apply to work "
                             "directories")
        from keras_transformer import export

        return export.load_exported(workdir)
    recipe = training.read_recipe(str(workdir))
    path = resolve_checkpoint(workdir, checkpoint)
    tok = find_tokenizer(workdir, recipe, data_dir)
    if tok.vocab_size != recipe.model.vocab_size:
        raise ValueError(f"{tok.model_path}: {tok.vocab_size} pieces, but the recipe's vocab_size is "
                         f"{recipe.model.vocab_size}")
    model = build_model(recipe.model)
    _restore(model, path)
    logging.info("restored %s", path)
    return model, recipe, tok


# Model fields that set the weights' shapes: a run can only resume or start from weights that agree on these.
SHAPE_FIELDS = ("vocab_size", "d_model", "d_ff", "num_heads", "num_encoder_layers", "num_decoder_layers", "d_k",
                "d_v", "positional", "max_length", "norm")


def shape_mismatch(old: Recipe, new: Recipe, where: str) -> None:
    """Raise ValueError naming the first model field whose value differs between ``where``'s run and this one."""
    for field in SHAPE_FIELDS:
        before, now = getattr(old.model, field), getattr(new.model, field)
        if before != now and not (field == "max_length" and old.model.positional == "sinusoidal"):
            raise ValueError(f"{field}: {where} holds a model with {field}={before}, this run asks for {now}")


def _init_source(init_from: Union[str, os.PathLike], recipe: Recipe) -> Tuple[Path, bool]:
    """(path, is_saved_model) of ``--init_from``; its model must have this recipe's shape."""
    from keras_transformer import export, inference

    source = Path(init_from)
    if inference.is_saved_model(source):
        info = json.loads((source / "assets" / export.EXPORT_INFO).read_text())
        shape_mismatch(Recipe.from_dict(info["recipe"]), recipe, str(source))
        return source, True
    if not (source / training.RECIPE_FILE).is_file():
        raise FileNotFoundError(f"--init_from: {source} is neither a SavedModel nor a training work directory")
    shape_mismatch(training.read_recipe(str(source)), recipe, str(source))
    return source, False


def prepare_workdir(recipe: Recipe, workdir: Union[str, os.PathLike], data_dir=None) -> bool:
    """Refuse, before anything is written, a work directory whose run this one cannot continue; True if fresh.

    A work directory with checkpoints resumes only with the same model shape and the same tokenizer
    (ValueError naming the field, never a silent retrain). A fresh one started ``--init_from`` another
    run gets that run's tokenizer, under the name this recipe's data looks it up by.
    """
    workdir = Path(workdir)

    def tokenizer_path():  # the name this recipe's data looks its tokenizer up by (stats the corpus files)
        return workdir / "tokenizer" / f"{tokenizer_lib.cache_key(recipe, data_dir)}.model"

    fresh = not list_checkpoints(workdir / CHECKPOINT_DIR)
    if not fresh:
        shape_mismatch(training.read_recipe(str(workdir)), recipe, str(workdir))
        others = sorted(p.name for p in (workdir / "tokenizer").glob("*.model"))
        if others and not tokenizer_path().is_file():
            raise ValueError(f"tokenizer: {workdir} was trained with tokenizer/{others[0]} (another corpus, "
                             f"vocabulary or seed); this run's data needs {tokenizer_path().name}. Resume with the "
                             f"same data, or start a new --workdir (--init_from={workdir} keeps its weights)")
    elif recipe.train.init_from:
        source, is_saved_model = _init_source(recipe.train.init_from, recipe)
        models = (sorted((source / "assets").glob("*.model")) if is_saved_model
                  else [Path(find_tokenizer(source, recipe, data_dir).model_path)])
        if len(models) != 1:
            raise FileNotFoundError(f"--init_from: {source} holds {len(models)} tokenizer models, expected one")
        target = tokenizer_path()
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(models[0], target)
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

        from keras_transformer import export

        values = export.load_saved_model(source).model_variables  # export.Translator: a Transformer's .variables
        exported = build_model(recipe.model)
        if [tuple(v.shape) for v in values] != [tuple(v.shape) for v in exported.variables]:
            raise ValueError(f"--init_from: {source}'s {len(values)} variables do not match this model's")
        for variable, value in zip(exported.variables, values):
            variable.assign(value)
        for weight, value in zip(model.weights, exported.weights):
            weight.assign(value)
    else:
        has_average = bool(list_checkpoints(source / AVERAGED_DIR))
        _restore(model, resolve_checkpoint(source, "averaged" if has_average else "latest"))
    logging.info("initialised the weights from %s", source)
