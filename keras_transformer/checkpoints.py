"""A training work directory's checkpoints: listing, averaging (§6.1) and loading for inference.

§6.1: "For the base models, we used a single model obtained by averaging the
last 5 checkpoints, which were written at 10-minute intervals."

    list_checkpoints(directory)                        -> [Checkpoint(step, path)], oldest first
    average_checkpoints(workdir, num=5, output_dir=None) -> path of the averaged checkpoint
    load_for_inference(workdir, checkpoint="latest"|"averaged"|PATH, data_dir=None)
        -> (model, recipe, tokenizer)

Training writes ``tf.train.Checkpoint(model=..., optimizer=...)`` files under
``<workdir>/checkpoints``. The average is of the model weights only (the
optimizer's moments are not averaged and not written); it goes to
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
from pathlib import Path
from typing import List, NamedTuple, Tuple, Union

import numpy as np
import tensorflow as tf
from absl import logging

from keras_transformer import training
from keras_transformer.config import Recipe
from keras_transformer.data import tokenizer as tokenizer_lib
from keras_transformer.model import Transformer, build_model

CHECKPOINT_DIR = "checkpoints"
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
    """Model weights from a checkpoint (training or averaged). Fails unless every weight is found with its shape."""
    status = tf.train.Checkpoint(optimizer=_TrainableVariables(model)).read(path)  # read: no save_counter
    try:
        status.expect_partial().assert_existing_objects_matched()  # partial: the optimizer's slots stay unread
    except AssertionError as e:
        missing = str(e).split(" Python objects")[0].rsplit(" ", 1)[-1]
        raise ValueError(f"{path}: does not hold this model's {len(model.trainable_variables)} weights ({missing} "
                         "objects unmatched); not a checkpoint of this recipe's model?") from None


def _write(model: Transformer, prefix: str) -> str:
    """Model weights only, in a training checkpoint's layout (see the module docstring)."""
    return tf.train.Checkpoint(model=model, optimizer=_TrainableVariables(model)).write(prefix)


def average_checkpoints(workdir: Union[str, os.PathLike], num: int = 5,
                        output_dir: Union[str, os.PathLike, None] = None) -> str:
    """Average the model weights of the last ``num`` checkpoints of ``workdir`` (§6.1); returns the new prefix.

    Each weight is summed in float64 and divided by the number of checkpoints
    actually averaged (fewer than ``num`` if fewer exist; logged), so N copies
    of one checkpoint average to exactly that checkpoint. Written to
    ``<output_dir or workdir/averaged>/ckpt-<last step>`` plus a JSON manifest.
    """
    if num < 1:
        raise ValueError(f"num: must be >= 1, got {num}")
    workdir = Path(workdir)
    recipe = training.read_recipe(str(workdir))
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
        "recipe": recipe.name,
    }
    with open(f"{prefix}.json", "w") as f:
        json.dump(manifest, f, indent=2)
    logging.info("averaged %d checkpoints (steps %s) into %s", len(chosen), manifest["steps"], prefix)
    return prefix


def resolve_checkpoint(workdir: Union[str, os.PathLike], checkpoint: str = "latest") -> str:
    """"latest" (training), "averaged" (newest average), or an explicit checkpoint prefix -> a prefix."""
    workdir = Path(workdir)
    if checkpoint in ("latest", "averaged"):
        directory = workdir / (CHECKPOINT_DIR if checkpoint == "latest" else AVERAGED_DIR)
        found = list_checkpoints(directory)
        if not found:
            hint = " (run kt-average first)" if checkpoint == "averaged" else ""
            raise FileNotFoundError(f"{directory}: no ckpt-<step> checkpoints{hint}")
        return found[-1].path
    if not tf.io.gfile.exists(f"{checkpoint}.index"):
        raise FileNotFoundError(f"{checkpoint}: no such checkpoint (expected {checkpoint}.index)")
    return checkpoint


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
    """(model with restored weights, recipe, tokenizer) of a training work directory.

    ``checkpoint``: "latest" (newest training checkpoint), "averaged" (newest
    ``kt-average`` output) or a checkpoint prefix path. The model is built
    from ``recipe.json`` in float32 (a mixed-precision run's variables are
    float32 anyway); dropout is off at inference.
    """
    workdir = Path(model_arg)
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
