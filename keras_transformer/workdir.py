"""A training work directory: the one place that names every path in it.

    <workdir>/
      recipe.json              the run's resolved recipe                  WorkDir.recipe_file (read/write_recipe)
      train.lock               held while a training run owns it          WorkDir.lock (workdir_lock)
      corpus/                  the corpus check's cache and sample        WorkDir.corpus_cache
      tokenizer/<key>.model    the SentencePiece model(s)                 WorkDir.tokenizer
      checkpoints/ckpt-<step>  the last ``keep_checkpoints`` of training  WorkDir.checkpoints
      checkpoints/best/        the best by validation, ranked in best.json  WorkDir.best, WorkDir.best_manifest
      checkpoints/damaged/     checkpoints set aside when a resume skips them  WorkDir.damaged
      averaged/ckpt-<step>     averages of checkpoints (§6.1), a .json beside each  WorkDir.averaged
      tensorboard/             TensorBoard scalars                        WorkDir.tensorboard
      train_summary.json       what the last training call did           WorkDir.train_summary
      pipeline.json            the kt-pipeline stages finished           WorkDir.pipeline_state (chosen_decode)
      corpus_fingerprint.json  the training corpus it was trained on     WorkDir.corpus_fingerprint (data_fingerprint)
      precision.json           the dtype policy it trains under           WorkDir.precision (read/write_policy)

Only names and the recipe file live here (no TensorFlow): writing and reading checkpoints is
``checkpoints/``, the lock is ``training/lock.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional, Union

from keras_transformer.config import Recipe

RECIPE_FILE = "recipe.json"
BEST_MANIFEST = "best.json"  # beside the best checkpoints: every validation's score and the ranking


class WorkDir:
    """The paths of the training work directory ``root`` (nothing is created until written)."""

    def __init__(self, root: Union[str, os.PathLike]):
        self.root = Path(root)

    def __fspath__(self) -> str:
        return str(self.root)

    def __str__(self) -> str:
        return str(self.root)

    def __repr__(self) -> str:
        return f"WorkDir({str(self.root)!r})"

    recipe_file = property(lambda self: self.root / RECIPE_FILE)
    lock = property(lambda self: self.root / "train.lock")
    corpus_cache = property(lambda self: self.root / "corpus")
    tokenizer = property(lambda self: self.root / "tokenizer")
    checkpoints = property(lambda self: self.root / "checkpoints")
    best = property(lambda self: self.checkpoints / "best")
    best_manifest = property(lambda self: self.best / BEST_MANIFEST)
    damaged = property(lambda self: self.checkpoints / "damaged")
    averaged = property(lambda self: self.root / "averaged")
    tensorboard = property(lambda self: self.root / "tensorboard")
    train_summary = property(lambda self: self.root / "train_summary.json")
    pipeline_state = property(lambda self: self.root / "pipeline.json")
    corpus_fingerprint = property(lambda self: self.root / "corpus_fingerprint.json")
    precision = property(lambda self: self.root / "precision.json")  # the Keras dtype policy the run trains under

    def write_policy(self, policy: str) -> None:
        self.precision.write_text(json.dumps({"policy": policy}) + "\n")

    def read_policy(self) -> Optional[str]:
        """The dtype policy the run trained under; None for a run from before it was recorded (never float16)."""
        return json.loads(self.precision.read_text())["policy"] if self.precision.is_file() else None

    def write_recipe(self, recipe: Recipe) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.recipe_file.write_text(recipe.to_json() + "\n")

    def read_recipe(self) -> Recipe:
        if not self.recipe_file.exists():
            raise FileNotFoundError(f"{self.recipe_file}: no {RECIPE_FILE}; is {self.root} a training work directory?")
        return Recipe.from_dict(json.loads(self.recipe_file.read_text()))

    def chosen_decode(self, checkpoint: Union[str, os.PathLike]) -> dict:
        """The decoding options kt-pipeline chose on the dev split for ``checkpoint`` when it is the average the
        pipeline evaluated under this directory's recipe (``{"alpha": 1.0}``: the defaults its export keeps);
        {} for any other checkpoint."""
        try:
            state = json.loads(self.pipeline_state.read_text())
            evaluated = state["done"]["evaluated"]
            same_recipe = state["key"]["recipe"] == json.loads(self.recipe_file.read_text())
        except (OSError, ValueError, KeyError, TypeError):
            return {}
        checkpoint = Path(checkpoint)
        same = (same_recipe and Path(evaluated["averaged"]).name == checkpoint.name
                and checkpoint.parent.resolve() == self.averaged.resolve())
        return dict(evaluated.get("decode", {})) if same else {}
