"""Checkpoint averaging (§6.1): "a single model obtained by averaging the last 5 checkpoints".

    average_checkpoints(workdir, num=5, output_dir=None, best=False) -> path of the averaged checkpoint

The average is of the model weights only (the optimizer's moments are not averaged and not written); it goes
to ``<workdir>/averaged/ckpt-<last step>``, with ``ckpt-<last step>.json`` beside it naming the checkpoints
that went into it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Union

import numpy as np
from absl import logging

from keras_transformer.checkpoints.state import best_checkpoints, list_checkpoints, restore_weights, write_weights
from keras_transformer.model import build_model
from keras_transformer.workdir import WorkDir


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

    model = build_model(recipe)
    sums = None  # one float64 array per model weight
    for ckpt in chosen:
        restore_weights(model, ckpt.path)
        values = [w.numpy() for w in model.weights]
        sums = [v.astype(np.float64) for v in values] if sums is None else [s + v for s, v in zip(sums, values)]
    for weight, total in zip(model.weights, sums):
        if np.issubdtype(weight.numpy().dtype, np.floating):
            weight.assign((total / len(chosen)).astype(weight.numpy().dtype))
        # non-float state (none in the Transformer today) keeps the last checkpoint's value

    out_dir = Path(output_dir) if output_dir is not None else workdir.averaged
    out_dir.mkdir(parents=True, exist_ok=True)
    prefix = write_weights(model, str(out_dir / f"ckpt-{chosen[-1].step}"))
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
