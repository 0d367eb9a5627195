"""A training work directory's checkpoints: listing, averaging (§6.1) and loading for inference.

§6.1: "For the base models, we used a single model obtained by averaging the
last 5 checkpoints, which were written at 10-minute intervals."

    list_checkpoints(directory)                        -> [Checkpoint(step, path)], oldest first
    average_checkpoints(workdir, num=5, output_dir=None, best=False) -> path of the averaged checkpoint
    load_for_inference(workdir, checkpoint="latest"|"averaged"|"best"|PATH, data_dir=None)
        -> (model, recipe, tokenizer)
    initial_weights(init_from, model)                  -> tokenizer file of the run the weights came from
    CheckpointState(model, directory, max_to_keep)     -> a training run's checkpoints: save, restore, write

Training writes ``tf.train.Checkpoint(model=..., optimizer=...)`` files under
``<workdir>/checkpoints`` (:class:`CheckpointState`; every path of a work directory is named by
``workdir.WorkDir``), and with ``keep_best_by`` the best ones by a validation score under
``<workdir>/checkpoints/best`` (``best.json`` ranks them). The average is of the model weights only (the
optimizer's moments are not averaged and not written); it goes to ``<workdir>/averaged/ckpt-<last step>``,
with ``ckpt-<last step>.json`` beside it naming the checkpoints that went into it. Weights are found by
their paths in the model (``model/encoder/layer_0/self_attention/query_dense/_kernel``), so a training
checkpoint and an average read the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import List, NamedTuple, Tuple, Union

import numpy as np
import tensorflow as tf
from absl import logging

from keras_transformer import checkpoint_health
from keras_transformer.config import Recipe
from keras_transformer.data import tokenizer as tokenizer_lib
from keras_transformer.model import Transformer, build_model
from keras_transformer.workdir import WorkDir

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


class CheckpointState:
    """The model and optimizer state of a training run (the latest ``max_to_keep`` checkpoints kept).

    A ``tf.train.CheckpointManager`` writes a checkpoint's files first and only then points its index at them,
    so a process killed mid-write leaves the previous checkpoint intact and a restart resumes from it with the
    step counter and the optimizer's moments restored.
    """

    def __init__(self, model, directory, max_to_keep=5, is_chief=True, task_id=0):
        self.checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
        # Under multi-worker training every worker must write; only the chief's files are kept.
        directory = directory if is_chief else os.path.join(directory, f".worker_{task_id}")
        self.is_chief = is_chief
        self.manager = tf.train.CheckpointManager(self.checkpoint, directory, max_to_keep=max_to_keep)

    def restore(self, prefix: str) -> int:
        """Restore the checkpoint at ``prefix``; returns its step."""
        self.checkpoint.restore(prefix).assert_existing_objects_matched()
        return checkpoint_step(prefix)

    def restore_latest(self) -> int:
        """Restore the newest checkpoint the manager knows of, if any; returns its step (0 when starting fresh).

        Training resumes through ``restore(resume_point(workdir).intact)`` instead, which walks back past
        damaged checkpoints.
        """
        path = self.manager.latest_checkpoint
        return self.restore(path) if path else 0

    def save(self, step: int) -> str:
        try:
            path = self.manager.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as e:
            raise checkpoint_write_error(os.path.join(self.manager.directory, f"ckpt-{step}"), e) from None
        if not self.is_chief:
            tf.io.gfile.rmtree(os.path.dirname(path))
        return path

    def write(self, prefix: str) -> None:
        """A copy of the current state at ``prefix`` (outside the manager's last-K rotation); chief only.

        Every worker writes (multi-worker saving is collective); the others' copies are removed.
        """
        if self.is_chief:
            try:
                self.checkpoint.write(prefix)
            except (tf.errors.OpError, OSError) as e:
                raise checkpoint_write_error(prefix, e) from None
        else:
            scratch = os.path.join(os.path.dirname(prefix), f".worker_{id(self)}")
            self.checkpoint.write(os.path.join(scratch, "ckpt"))
            tf.io.gfile.rmtree(scratch)


def checkpoint_write_error(prefix: str, error: Exception) -> OSError:
    """The error for a checkpoint that could not be written (a full disk, a read-only directory): its path and
    the reason. TensorFlow has removed the partial data file by then; its empty ``<prefix>_temp`` folder goes
    too. The checkpoints written before stay intact, so the same command resumes once the cause is fixed."""
    with contextlib.suppress(OSError):
        os.rmdir(f"{prefix}_temp")
    return OSError(f"{prefix}: could not write this checkpoint ({checkpoint_health.reason(error)}); the checkpoints "
                   "before it are intact, and the same command resumes from the newest of them once the cause is fixed")


def checkpoint_step(path: str) -> int:
    return int(path.rsplit("-", 1)[-1])


def _restore(model: Transformer, path: str) -> None:
    """Model weights from a checkpoint (training or averaged). Fails unless every weight is found with its shape;
    a damaged checkpoint is a ValueError naming it (and the newest intact one beside it)."""
    try:
        status = tf.train.Checkpoint(model=model).read(path)  # read: no save_counter
    except (tf.errors.OpError, IndexError) as e:
        raise damaged_error(path, checkpoint_health.problem(path) or str(e).strip().splitlines()[0]) from None
    try:
        status.expect_partial().assert_existing_objects_matched()  # partial: a training checkpoint's optimizer
    except AssertionError as e:
        missing = str(e).split(" Python objects")[0].rsplit(" ", 1)[-1]
        raise ValueError(f"{path}: does not hold this model's {len(model.weights)} weights ({missing} "
                         "objects unmatched); not a checkpoint of this recipe's model?") from None


def _write(model: Transformer, prefix: str) -> str:
    """Model weights only, at the paths a training checkpoint has them."""
    return tf.train.Checkpoint(model=model).write(prefix)


def best_checkpoints(workdir: Union[str, os.PathLike]) -> List[Checkpoint]:
    """The kept best checkpoints of a run trained with ``keep_best_by``, best first."""
    directory, manifest = WorkDir(workdir).best, WorkDir(workdir).best_manifest
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
    workdir = WorkDir(workdir)
    recipe = workdir.read_recipe()
    if best:
        chosen = sorted(best_checkpoints(workdir)[:num])  # oldest first, like the last N
    else:
        available = list_checkpoints(workdir.checkpoints)
        if not available:
            raise FileNotFoundError(f"{workdir.checkpoints}: no ckpt-<step> checkpoints to average")
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

    out_dir = Path(output_dir) if output_dir is not None else workdir.averaged
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
            raise FileNotFoundError(f"{WorkDir(workdir).best}: no best checkpoints on disk")
        path = found[0].path
    elif checkpoint in ("latest", "averaged"):
        directory = WorkDir(workdir).checkpoints if checkpoint == "latest" else WorkDir(workdir).averaged
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
    directory = WorkDir(workdir).checkpoints
    walk = checkpoint_health.walk_back(str(directory))
    if walk.damaged and walk.intact is None:
        found = "; ".join(f"{Path(prefix).name}: {problem}" for prefix, problem in walk.damaged)
        raise ValueError(f"{directory}: no intact checkpoint to resume from ({found}); move the damaged ones away "
                         "to train from scratch, or train in another --workdir")
    return walk


def find_tokenizer(workdir: Union[str, os.PathLike], recipe: Recipe, data_dir=None) -> tokenizer_lib.Tokenizers:
    """The work directory's own SentencePiece model(s) (never retrained here): a ``Tokenizer``, or a
    ``TokenizerPair`` for separate vocabularies.

    A model whose name (the cache key up to its hash) is the only one of its kind in
    ``<workdir>/tokenizer`` is used as is; with several, the one named by the recipe's
    whole cache key (which needs the training corpus under ``data_dir`` to compute).
    """
    directory = WorkDir(workdir).tokenizer
    models = sorted(directory.glob("*.model")) if directory.is_dir() else []
    if not models:
        raise FileNotFoundError(f"{directory}: no tokenizer (*.model); the work directory is incomplete")

    def find(side):
        kind = tokenizer_lib.cache_key(recipe, side=side, digest=False)
        candidates = [p for p in models if p.name.rsplit("_", 1)[0] == kind]
        if len(candidates) == 1 or (len(models) == 1 and side is None):  # an --init_from copy keeps its name
            return tokenizer_lib.Tokenizer((candidates or models)[0])
        path = directory / f"{tokenizer_lib.cache_key(recipe, data_dir, side)}.model"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: not found among {len(models)} tokenizers in {directory}")
        return tokenizer_lib.Tokenizer(path)

    if recipe.model.shared_vocabulary:
        return find(None)
    return tokenizer_lib.TokenizerPair(*(find(side) for side in tokenizer_lib.SIDES))


def load_for_inference(model_arg: Union[str, os.PathLike], checkpoint: str = "latest",
                       data_dir=None) -> Tuple[Transformer, Recipe, tokenizer_lib.Tokenizers]:
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
    recipe = WorkDir(workdir).read_recipe()
    path = resolve_checkpoint(workdir, checkpoint)
    tok = find_tokenizer(workdir, recipe, data_dir)
    for model_tokenizer in tok.models.values():
        if model_tokenizer.vocab_size != recipe.model.vocab_size:
            raise ValueError(f"{model_tokenizer.model_path}: {model_tokenizer.vocab_size} pieces, but the recipe's "
                             f"vocab_size is {recipe.model.vocab_size}")
    model = build_model(recipe.model)
    _restore(model, path)
    logging.info("restored %s", path)
    return model, recipe, tok


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
    from keras_transformer import export, inference

    source = Path(init_from)
    if inference.is_saved_model(source):
        info = json.loads((source / "assets" / export.EXPORT_INFO).read_text())
        shape_mismatch(Recipe.from_dict(info["recipe"]), recipe, str(source))
        return source, True
    if not WorkDir(source).recipe_file.is_file():
        raise FileNotFoundError(f"--init_from: {source} is neither a SavedModel nor a training work directory")
    shape_mismatch(WorkDir(source).read_recipe(), recipe, str(source))
    return source, False


def prepare_workdir(recipe: Recipe, workdir: Union[str, os.PathLike], data_dir=None) -> bool:
    """Refuse, before anything is written, a work directory whose run this one cannot continue; True if fresh.

    A work directory with checkpoints resumes only with the same model shape and the same tokenizer
    (ValueError naming the field, never a silent retrain). A fresh one started ``--init_from`` another
    run gets that run's tokenizer, under the name this recipe's data looks it up by.
    """
    workdir = WorkDir(workdir)
    sides = [None] if recipe.model.shared_vocabulary else list(tokenizer_lib.SIDES)

    def tokenizer_path(side):  # the name this recipe's data looks a model up by (stats the corpus files)
        return workdir.tokenizer / f"{tokenizer_lib.cache_key(recipe, data_dir, side)}.model"

    fresh = not list_checkpoints(workdir.checkpoints)
    if not fresh:
        shape_mismatch(workdir.read_recipe(), recipe, str(workdir))
        others = sorted(p.name for p in workdir.tokenizer.glob("*.model"))
        missing = [tokenizer_path(side).name for side in sides if not tokenizer_path(side).is_file()]
        if others and missing:
            raise ValueError(f"tokenizer: {workdir} was trained with tokenizer/{others[0]} (another corpus, "
                             f"vocabulary or seed); this run's data needs {missing[0]}. Resume with the "
                             f"same data, or start a new --workdir (--init_from={workdir} keeps its weights)")
    elif recipe.train.init_from:
        source, is_saved_model = _init_source(recipe.train.init_from, recipe)  # the same shared_vocabulary
        if is_saved_model:
            from keras_transformer import export

            models = export.tokenizer_models(source)
        else:
            models = {role: Path(t.model_path) for role, t in find_tokenizer(source, recipe, data_dir).models.items()}
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

        from keras_transformer import export

        exported = build_model(recipe.model)
        try:
            export.assign_exported(exported, export.load_saved_model(source), source)  # by name
        except ValueError as e:
            raise ValueError(f"--init_from: {e}") from None
        for weight, value in zip(model.weights, exported.weights):
            weight.assign(value)
    else:
        has_average = bool(list_checkpoints(WorkDir(source).averaged))
        _restore(model, resolve_checkpoint(source, "averaged" if has_average else "latest"))
    logging.info("initialised the weights from %s", source)
