"""Labeled bracket F1 on a sample of the dev trees at each Keras epoch end (one epoch = one checkpoint interval).

    DevF1(recipe, tokenizer, gold_trees, logdir, batch_size=32)
    DevF1.from_eval_split(recipe, tokenizer, logdir, num_samples, data_dir=None)

The parser's dev score during training, as translation's is dev BLEU (``tasks/translation/dev.py``): the
sample's sentences are parsed by the model being trained through the exported module's own graph (``Parser``,
constrained beam search with the recipe's decoding options, traced once), scored by EVALB COLLINS
(``metric.score``), and the F1 goes

* to TensorBoard as ``f1`` (and ``exact_match``) under ``<logdir>/validation``, at the optimizer step;
* into the epoch's ``logs`` as ``val_f1`` (and ``val_exact_match``), which ``keep_best_by=val_f1`` and early
  stopping rank by.

Put it after ``TensorBoardScalars`` in the callbacks list, as ``DevBleu``.
"""

from __future__ import annotations

import os
from typing import Optional, Sequence

import keras
import tensorflow as tf
from absl import logging

from keras_transformer.artifacts import Loaded
from keras_transformer.data import corpora
from keras_transformer.schedules import optimizer_step
from keras_transformer.tasks.parsing import treebank
from keras_transformer.tasks.parsing.lines import evaluate
from keras_transformer.tasks.parsing.module import parser_module


class DevF1(keras.callbacks.Callback):
    """Parse the gold trees' sentences with the model being trained and score them after every epoch."""

    def __init__(self, recipe, tokenizer, gold_trees: Sequence, logdir: str, batch_size: int = 32):
        super().__init__()
        if not gold_trees:
            raise ValueError("gold_trees: empty; nothing to parse")
        self.recipe, self.tokenizer, self.gold, self.batch_size = recipe, tokenizer, list(gold_trees), batch_size
        self.writer = tf.summary.create_file_writer(os.path.join(logdir, "validation"))
        self.last_scores: Optional[dict] = None
        self._parser: Optional[Loaded] = None

    @classmethod
    def from_eval_split(cls, recipe, tokenizer, logdir: str, num_samples: int, data_dir=None) -> "DevF1":
        """The first ``num_samples`` trees of ``recipe.data.eval_split``, parsed with ``recipe.decode``'s options."""
        split = treebank.load(recipe.data, recipe.data.eval_split, corpora.resolve_data_dir(data_dir))
        return cls(recipe, tokenizer, split.trees[:num_samples], logdir)

    def set_model(self, model):
        super().set_model(model)
        module = parser_module(model, self.tokenizer, self.recipe)
        self._parser = Loaded(module.parse_with_options, module.defaults, self.recipe, "the model in training",
                              module)

    def on_epoch_end(self, epoch, logs=None):
        scores, _ = evaluate(self._parser, self.gold, self.batch_size)
        step = optimizer_step(self.model.optimizer)
        with self.writer.as_default(step=step):
            tf.summary.scalar("f1", scores["f1"])
            tf.summary.scalar("exact_match", scores["exact_match"])
        self.writer.flush()
        if logs is not None:
            logs["val_f1"], logs["val_exact_match"] = scores["f1"], scores["exact_match"]
        self.last_scores = scores
        logging.info("step %d: dev F1 %.2f (exact %.2f) on %d trees, %d repaired", step, scores["f1"],
                     scores["exact_match"], len(self.gold), scores["repaired"])
