"""Damaged checkpoints: telling one from an intact one, walking back past it, setting it aside (never deleting it).

A checkpoint ``<dir>/ckpt-<step>`` is the file ``ckpt-<step>.index`` and its data shards
``ckpt-<step>.data-<i>-of-<n>``; ``tf.train.CheckpointManager`` writes the shards first and the index last.
A disk that filled up, a copy cut short or a file removed by hand leaves a damaged checkpoint: an index
without its data (or the reverse), a data shard shorter than its index says, bytes that fail their checksum.

    problem(prefix, read=True) -> None if the checkpoint reads back whole, else why not (one phrase)
    walk_back(directory) -> Walk(intact prefix or None, [(damaged prefix, problem)], newest first)
    set_aside(prefix, damaged_dir) -> the folder under damaged_dir its files were moved to
    reason(error) -> why a write failed, in a few words ("No space left on device")

``read=True`` reads every tensor back, so a short or corrupt shard is found before a run relies on it (one
extra read of the newest checkpoint when training resumes); ``read=False`` only checks that the files exist.
"""

from __future__ import annotations

import glob
import os
import re
import time
from typing import List, NamedTuple, Optional, Tuple

import tensorflow as tf

_FILE = re.compile(r"^ckpt-(\d+)\.(index|data-(\d+)-of-(\d+))$")


class Walk(NamedTuple):
    intact: Optional[str]  # the newest checkpoint that reads back whole (prefix), None if there is none
    damaged: List[Tuple[str, str]]  # (prefix, problem) of every newer one, newest first


def _steps(directory: str) -> List[int]:
    """Steps of every ``ckpt-<step>`` with an index or a data shard in ``directory``, newest first."""
    if not os.path.isdir(directory):
        return []
    return sorted({int(m.group(1)) for name in os.listdir(directory) if (m := _FILE.match(name))}, reverse=True)


def problem(prefix: str, read: bool = True) -> Optional[str]:
    """None if the checkpoint at ``prefix`` is whole; else why it cannot be restored, naming the file."""
    name = os.path.basename(prefix)
    shards = sorted(glob.glob(glob.escape(prefix) + ".data-*-of-*"))
    if not os.path.isfile(prefix + ".index"):
        if not shards:
            return f"no such checkpoint (no {name}.index)"
        return f"{name}.index is missing, its data is there (a write that did not finish, or a file removed)"
    counts = {int(m.group(4)) for s in shards if (m := _FILE.match(os.path.basename(s)))}
    expected = [f"{prefix}.data-{i:05d}-of-{n:05d}" for n in counts or {1} for i in range(n)]
    missing = [os.path.basename(p) for p in expected if not os.path.isfile(p)]
    if missing:
        return f"{missing[0]} is missing"
    if not read:
        return None
    try:
        reader = tf.train.load_checkpoint(prefix)
    except tf.errors.OpError as e:
        return f"{name}.index is unreadable ({_first_line(e)})"
    try:
        for key in reader.get_variable_to_shape_map():
            reader.get_tensor(key)
    except IndexError as e:  # the reader's "Read less bytes than requested"
        sizes = ", ".join(f"{os.path.basename(p)} has {os.path.getsize(p)} bytes" for p in expected)
        return f"its data is cut short ({sizes}; {e})"
    except tf.errors.OpError as e:
        return f"its data does not read back ({_first_line(e)})"
    return None


def _first_line(error: tf.errors.OpError) -> str:
    return (error.message or str(error)).strip().splitlines()[0]


def walk_back(directory: str, read: bool = True) -> Walk:
    """From the newest checkpoint in ``directory`` back to the newest intact one, collecting the damaged ones."""
    damaged = []
    for step in _steps(directory):
        prefix = os.path.join(directory, f"ckpt-{step}")
        found = problem(prefix, read)
        if found is None:
            return Walk(prefix, damaged)
        damaged.append((prefix, found))
    return Walk(None, damaged)


def reason(error: Exception) -> str:
    """Why a write failed, in a few words: an OSError's strerror ("No space left on device"), or a TensorFlow
    error's message without its graph decorations."""
    if getattr(error, "strerror", None):
        return error.strerror
    message = re.sub(r"\{\{[^}]*\}\}|\s*\[Op:\w+\]", "", " ".join(str(error).split())).strip()
    return message.rsplit("; ", 1)[-1]


def set_aside(prefix: str, damaged_dir: str) -> str:
    """Move a damaged checkpoint's files to ``<damaged_dir>/<time>/`` (``WorkDir.damaged``: out of the checkpoint
    folder, so that no rotation deletes them and no new save overwrites them); returns that folder."""
    target = os.path.join(damaged_dir, time.strftime("%Y%m%dT%H%M%S"))
    os.makedirs(target, exist_ok=True)
    for path in glob.glob(glob.escape(prefix) + ".*"):
        if _FILE.match(os.path.basename(path)):
            os.replace(path, os.path.join(target, os.path.basename(path)))
    return target
