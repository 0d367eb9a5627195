"""BLEU and chrF on a sample of the dev set at each Keras epoch end (one epoch = one checkpoint interval).

    DevBleu(tokenizer, sources, references, logdir, beam_size=4, alpha=0.6, extra_length=50, batch_size=32)
    DevBleu.from_eval_split(recipe, tokenizer, logdir, num_samples, data_dir=None)

The sample is translated with the paper's beam search (§6.1; ``translate_ids``)
in one ``tf.function`` per model: raw strings in, detokenized strings out, the
SentencePiece ops built inside the graph. The best hypotheses are scored with
``metric.score`` (sacrebleu, detokenized and cased), and the two numbers go

* to TensorBoard as ``bleu`` and ``chrf`` under ``<logdir>/validation`` (the
  directory ``callbacks.TensorBoardScalars`` writes validation loss to), at the
  optimizer step;
* into the epoch's ``logs`` as ``val_bleu`` and ``val_chrf`` (History, and any
  later callback such as ModelCheckpoint(monitor="val_bleu"), see them).

Put it *after* ``TensorBoardScalars`` in the callbacks list: that callback
writes every ``val_*`` entry of ``logs``, and would otherwise write these twice.
"""

from __future__ import annotations

import os
from typing import List, Optional, Sequence

import keras
import tensorflow as tf
from absl import logging

from keras_transformer import PAD_ID
from keras_transformer.tasks.translation import metric
from keras_transformer.schedules import optimizer_step
from keras_transformer.data.tokenizer import append_eos
from keras_transformer.decoding import translate_ids


class DevBleu(keras.callbacks.Callback):
    """Beam-decode ``sources`` and score them against ``references`` after every epoch."""

    def __init__(self, tokenizer, sources: Sequence[str], references: Sequence[str], logdir: str, beam_size: int = 4,
                 alpha: float = 0.6, extra_length: int = 50, batch_size: int = 32):
        super().__init__()
        if len(sources) != len(references):
            raise ValueError(f"references: {len(references)} lines for {len(sources)} sources")
        if not sources:
            raise ValueError("sources: empty; nothing to translate")
        if batch_size < 1:
            raise ValueError(f"batch_size: must be >= 1, got {batch_size}")
        self.tokenizer = tokenizer
        self.sources, self.references = list(sources), list(references)
        self.beam_size, self.alpha, self.extra_length, self.batch_size = beam_size, alpha, extra_length, batch_size
        self.writer = tf.summary.create_file_writer(os.path.join(logdir, "validation"))
        self.last_hypotheses: Optional[List[str]] = None
        self.last_scores: Optional[dict] = None
        self._translate_fn = None

    @classmethod
    def from_eval_split(cls, recipe, tokenizer, logdir: str, num_samples: int, data_dir=None) -> "DevBleu":
        """The first ``num_samples`` pairs of ``recipe.data.eval_split``, decoded with ``recipe.decode``'s settings."""
        from keras_transformer.data import corpora

        pairs, _ = corpora.load_split(recipe.data, recipe.data.eval_split, data_dir)
        sources, references = [], []
        for source, reference in pairs.take(num_samples).as_numpy_iterator():
            sources.append(source.decode("utf-8"))
            references.append(reference.decode("utf-8"))
        d = recipe.decode
        return cls(tokenizer, sources, references, logdir, d.beam_size, d.alpha, d.extra_length)

    def set_model(self, model):
        super().set_model(model)
        self._translate_fn = tf.function(self._translate_batch, input_signature=[tf.TensorSpec([None], tf.string)],
                                         autograph=False)

    def _translate_batch(self, strings):
        """[B] source strings -> [B] detokenized best hypotheses (traced once per model)."""
        ids = self.tokenizer.source.tokenize(strings)[:, : self.model.config.max_length - 1]  # [B, (S - 1)]
        source_ids = append_eos(ids).to_tensor(PAD_ID)  # [B, S], EOS-terminated as in training
        sequences, _ = translate_ids(self.model, source_ids, self.beam_size, self.alpha, self.extra_length,
                                     num_hypotheses=1)  # [B, K, T]; the search may stop once the best is final
        return self.tokenizer.target.detokenize(sequences[:, 0, :])  # [B], best beam up to its EOS

    def translate(self) -> List[str]:
        """The model's best translations of ``sources``, in order."""
        hypotheses = []
        for start in range(0, len(self.sources), self.batch_size):
            batch = tf.constant(self.sources[start: start + self.batch_size], tf.string)  # [B]
            hypotheses += [h.decode("utf-8", errors="replace") for h in self._translate_fn(batch).numpy().tolist()]
        return hypotheses

    def on_epoch_end(self, epoch, logs=None):
        hypotheses = self.translate()
        scores = metric.score(hypotheses, self.references)
        step = optimizer_step(self.model.optimizer)
        with self.writer.as_default(step=step):
            tf.summary.scalar("bleu", scores["bleu"])
            tf.summary.scalar("chrf", scores["chrf"])
        self.writer.flush()
        if logs is not None:
            logs["val_bleu"], logs["val_chrf"] = scores["bleu"], scores["chrf"]
        self.last_hypotheses, self.last_scores = hypotheses, scores
        logging.info("step %d: dev BLEU %.2f chrF %.2f on %d sentences (%s)", step, scores["bleu"], scores["chrf"],
                     len(hypotheses), scores["signature"])
