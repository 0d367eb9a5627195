"""A training run's checkpoint files: listing, writing, restoring, and choosing one by name.

    list_checkpoints(directory)                        -> [Checkpoint(step, path)], oldest first
    CheckpointState(model, directory, max_to_keep)     -> a training run's checkpoints: save, restore, write
    restore_weights(model, path), write_weights(model, prefix)   the model's weights alone
    resolve_checkpoint(workdir, "latest"|"averaged"|"best"|PATH) -> a checkpoint prefix, never a damaged one
    resume_point(workdir) -> the newest intact checkpoint a run resumes from, and the damaged ones after it
    best_checkpoints(workdir) -> the kept best by a validation score, best first

Training writes ``tf.train.Checkpoint(model=..., optimizer=...)`` files under
``<workdir>/checkpoints`` (:class:`CheckpointState`; every path of a work directory is named by
``workdir.WorkDir``), and with ``keep_best_by`` the best ones by a validation score under
``<workdir>/checkpoints/best`` (``best.json`` ranks them). Weights are found by their paths in the model
(``model/encoder/layer_0/self_attention/query_dense/_kernel``, ``names.py``), so a training checkpoint and
an average (``averaging.py``, §6.1) read the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import List, NamedTuple, Union

import keras
import tensorflow as tf

from keras_transformer.checkpoints import health as checkpoint_health
from keras_transformer.model import Transformer
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
    step counter, the optimizer's moments and the dropout layers' random-generator states restored: a resumed
    run draws the dropout masks an uninterrupted one would, and ends with the same weights. (A checkpoint
    written before the generator states were saved restores without them.)
    """

    def __init__(self, model, directory, max_to_keep=5, is_chief=True, task_id=0):
        self._seeds = tf.train.Checkpoint(seeds=seed_states(model))
        self.checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer, seeds=self._seeds.seeds)
        # Under multi-worker training every worker must write; only the chief's files are kept.
        directory = directory if is_chief else os.path.join(directory, f".worker_{task_id}")
        self.is_chief = is_chief
        self.manager = tf.train.CheckpointManager(self.checkpoint, directory, max_to_keep=max_to_keep)

    def restore(self, prefix: str) -> int:
        """Restore the checkpoint at ``prefix``; returns its step."""
        model, optimizer = self.checkpoint.model, self.checkpoint.optimizer
        tf.train.Checkpoint(model=model, optimizer=optimizer).restore(prefix).assert_existing_objects_matched()
        self._seeds.read(prefix).expect_partial()  # absent from older checkpoints: the generators start afresh
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


def seed_states(model) -> list:
    """The ``tf.Variable`` state of each random generator of ``model`` (its dropout layers' ``SeedGenerator``):
    not weights, but what decides the dropout masks of the next steps."""
    return [v.value for v in model.variables
            if isinstance(v, keras.Variable) and v.path.endswith("seed_generator_state")]


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


def restore_weights(model: Transformer, path: str) -> None:
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


def write_weights(model: Transformer, prefix: str) -> str:
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
        walk = checkpoint_health.walk_back(str(directory), read=False)  # the files only; reading is restore_weights'
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


