"""Training callbacks: step checkpoints, best checkpoints and early stopping, TensorBoard scalars, stop at a
step count.

The checkpoints themselves (what is written, how a run resumes) are ``checkpoints.CheckpointState``; these
callbacks decide when.
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Callable

import keras
import tensorflow as tf
from absl import logging

from keras_transformer.schedules import cooldown_multiplier, optimizer_step  # noqa: F401  (also imported from here)
from keras_transformer.workdir import BEST_MANIFEST

if TYPE_CHECKING:
    from keras_transformer.checkpoints import CheckpointState


class SaveCheckpoints(keras.callbacks.Callback):
    """Save every ``every`` update steps and at the end of training."""

    def __init__(self, state: CheckpointState, every: int):
        super().__init__()
        self.state = state
        self.every = every
        self._last_saved = None

    def _save(self):
        step = optimizer_step(self.model.optimizer)
        if step != self._last_saved:
            self.state.save(step)
            self._last_saved = step

    def on_train_batch_end(self, batch, logs=None):
        if optimizer_step(self.model.optimizer) % self.every == 0:
            self._save()

    def on_train_end(self, logs=None):
        self._save()


class KeepBest(keras.callbacks.Callback):
    """Keep the ``keep`` best checkpoints by a validation score in ``directory``; stop after ``patience``
    validations without a new best (0: never).

    ``monitor`` is a key of the epoch logs: ``val_loss`` (lower is better) or a task's dev score, ``val_bleu``
    or ``val_f1`` (higher; logged by ``DevBleu`` or ``DevF1``, which must run first). ``directory/best.json``
    (``BEST_MANIFEST``) holds every validation's (step, score) and the kept ones, best first, so a resumed run
    keeps its ranking and its patience. A validation fewer than ``min_gap`` steps after the one before competes
    with that one alone: the checkpoint a time budget ends on, a few steps after a regular one, is nearly the same
    weights, not a second checkpoint to average, so the better scoring of the two keeps the place (the earlier
    on a tie).
    """

    def __init__(self, state: CheckpointState, directory: str, monitor: str, keep: int = 5, patience: int = 0,
                 min_gap: int = 0):
        super().__init__()
        self.state, self.directory, self.monitor, self.keep, self.patience = state, directory, monitor, keep, patience
        self.min_gap = min_gap
        self.sign = 1.0 if monitor == "val_loss" else -1.0  # lower sign * score is better: a loss, or -BLEU, -F1
        self.manifest = os.path.join(directory, BEST_MANIFEST)
        saved = json.loads(tf.io.gfile.GFile(self.manifest).read()) if tf.io.gfile.exists(self.manifest) else {}
        if saved and saved["monitor"] != monitor:
            raise ValueError(f"keep_best_by: {directory} ranks checkpoints by {saved['monitor']}, not {monitor}")
        self.history = [tuple(x) for x in saved.get("history", [])]  # [(step, score)], in order
        self.kept = [tuple(x) for x in saved.get("kept", [])]  # [(step, score)], best first
        self.stopped_early = False

    def _rank(self, entry):
        step, score = entry
        return self.sign * score, step  # ties: the earlier step

    def on_epoch_end(self, epoch, logs=None):
        if not logs or self.monitor not in logs:
            return
        step, score = optimizer_step(self.model.optimizer), float(logs[self.monitor])
        if any(s == step for s, _ in self.history):
            return  # validated before an interruption; the ranking already has it
        previous = self.history[-1] if self.history and step - self.history[-1][0] < self.min_gap else None
        self.history.append((step, score))
        if previous in self.kept and self._rank(previous) <= self._rank((step, score)):
            ranked = list(self.kept)  # the near-twin before it scores as well and keeps the place
        else:
            ranked = sorted([e for e in self.kept if e != previous] + [(step, score)], key=self._rank)
        ranked = ranked[: self.keep]
        dropped = [e for e in self.kept if e not in ranked]
        if (step, score) in ranked:
            self.state.write(os.path.join(self.directory, f"ckpt-{step}"))
        for old_step, _ in dropped:  # kept ones only: never this step, which is new to the history
            if self.state.is_chief:
                for path in tf.io.gfile.glob(os.path.join(self.directory, f"ckpt-{old_step}.*")):
                    tf.io.gfile.remove(path)
        self.kept = ranked
        if self.state.is_chief:
            partial = self.manifest + ".part"
            with tf.io.gfile.GFile(partial, "w") as f:
                json.dump({"monitor": self.monitor, "kept": self.kept, "history": self.history}, f, indent=1)
            tf.io.gfile.rename(partial, self.manifest, overwrite=True)
        best_step = min(self.history, key=self._rank)[0]
        since_best = sum(1 for s, _ in self.history if s > best_step)
        if self.patience and since_best >= self.patience:
            self.stopped_early = True
            self.model.stop_training = True


class StopAtStep(keras.callbacks.Callback):
    """The paper counts steps (§5.2): stop once the optimizer has made ``train_steps`` updates.

    With ``max_seconds`` the run also stops once that much wall time has passed
    since this run's training began (a compute budget); ``SaveCheckpoints`` then saves the
    step reached, so the run can be resumed or evaluated from there. ``min_steps`` is a floor
    under that budget: past it, the run trains on to ``min_steps``. ``forecast_after`` steps
    into the run (timed from the end of its first, which traces the step), ``warn`` gets one
    line when the budget will buy fewer than ``min_steps``: how many it buys, and the minutes
    the floor will take on this machine.
    """

    def __init__(self, train_steps: int, max_seconds: float = 0.0, min_steps: int = 0, forecast_after: int = 50,
                 warn: Callable[[str], None] = logging.warning):
        super().__init__()
        self.train_steps, self.max_seconds, self.min_steps = train_steps, max_seconds, min_steps
        self.forecast_after, self.warn = forecast_after, warn
        self.stopped_by_time = False
        self.past_budget = False  # the budget ran out below min_steps
        self._start = self._first = None  # (time, step) when training began and after its first step

    def on_train_begin(self, logs=None):
        self._start = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        step, now = optimizer_step(self.model.optimizer), time.monotonic()
        if self._first is None:
            self._first = (now, step)
        elif self.min_steps and self.max_seconds and step == self._first[1] + self.forecast_after:
            per_step = (now - self._first[0]) / (step - self._first[1])  # since the traced first step
            reach = step + int(max(0.0, self.max_seconds - (now - self._start)) / per_step)  # where the budget stops
            if reach < self.min_steps:
                total = (now - self._start) + (self.min_steps - step) * per_step
                self.warn(f"at {per_step:.2f} s a step, the {self.max_seconds / 60:g}-minute budget "
                          f"(--max_train_minutes) buys ~{reach:,} steps, fewer than the {self.min_steps:,} this "
                          f"recipe needs (--min_train_steps): training on to step {self.min_steps:,}, "
                          f"~{total / 60:.0f} minutes on this machine (--min_train_steps=0 keeps the budget)")
        if step >= self.train_steps:
            self.model.stop_training = True
        elif self.max_seconds and now - self._start >= self.max_seconds:
            if step >= self.min_steps:
                self.stopped_by_time = True
                self.model.stop_training = True
            else:
                self.past_budget = True


class Cooldown(keras.callbacks.Callback):
    """Sets ``NoamSchedule.multiplier`` before each step from the run's progress (``cooldown_multiplier``).

    Progress is the larger of steps / ``train_steps`` and, with ``max_seconds``, the wall time since this run's
    training began over the budget (as ``StopAtStep`` counts it); where ``min_steps`` keeps a slow machine
    training past the budget, the time fraction is capped at steps / ``min_steps``, the run's real end.
    """

    def __init__(self, multiplier, cooldown: float, train_steps: int, max_seconds: float = 0.0, min_steps: int = 0):
        super().__init__()
        self.multiplier, self.cooldown = multiplier, cooldown
        self.train_steps, self.max_seconds, self.min_steps = train_steps, max_seconds, min_steps
        self._start = None

    def progress(self, step: int, elapsed: float) -> float:
        done = step / self.train_steps
        if self.max_seconds:
            by_time = elapsed / self.max_seconds
            done = max(done, min(by_time, step / self.min_steps) if self.min_steps else by_time)
        return done

    def on_train_begin(self, logs=None):
        self._start = time.monotonic()

    def on_train_batch_begin(self, batch, logs=None):
        step = optimizer_step(self.model.optimizer)
        self.multiplier.assign(cooldown_multiplier(self.progress(step, time.monotonic() - self._start), self.cooldown))


class TensorBoardScalars(keras.callbacks.Callback):
    """Scalars for TensorBoard under ``<logdir>/train`` and ``<logdir>/validation``.

    Every ``every`` steps: loss, smoothed loss, NLL, perplexity, token accuracy,
    learning rate, the loss scale under mixed_float16, target tokens/s and step time (s). After each validation pass:
    the validation metrics. Tokens are the real target tokens counted by ``model.token_metrics``.
    """

    def __init__(self, logdir: str, every: int = 50):
        super().__init__()
        self.every = every
        self.train_writer = tf.summary.create_file_writer(os.path.join(logdir, "train"))
        self.eval_writer = tf.summary.create_file_writer(os.path.join(logdir, "validation"))
        self._mark = None

    def _token_count(self):
        return float(self.model.token_metrics.tokens.numpy())

    def on_epoch_begin(self, epoch, logs=None):
        self._mark = (time.perf_counter(), 0.0, optimizer_step(self.model.optimizer))

    def on_train_batch_end(self, batch, logs=None):
        step = optimizer_step(self.model.optimizer)
        if step % self.every or self._mark is None:
            return
        now, tokens = time.perf_counter(), self._token_count()
        t0, tokens0, step0 = self._mark
        self._mark = (now, tokens, step)
        if step == step0:
            return
        optimizer = self.model.optimizer
        scalars = {k: float(v) for k, v in (logs or {}).items()}
        scalars["learning_rate"] = float(optimizer.learning_rate.numpy() if hasattr(optimizer.learning_rate, "numpy")
                                         else optimizer.learning_rate)
        if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):  # mixed_float16's dynamic loss scale S
            scalars["loss_scale"] = float(optimizer.dynamic_scale.numpy())
        scalars["tokens_per_second"] = (tokens - tokens0) / max(now - t0, 1e-9)
        scalars["step_time"] = (now - t0) / (step - step0)
        with self.train_writer.as_default(step=step):
            for name, value in scalars.items():
                tf.summary.scalar(name, value)
        self.train_writer.flush()

    def on_epoch_end(self, epoch, logs=None):
        step = optimizer_step(self.model.optimizer)
        val = {k[4:]: float(v) for k, v in (logs or {}).items() if k.startswith("val_")}
        with self.eval_writer.as_default(step=step):
            for name, value in val.items():
                tf.summary.scalar(name, value)
        self.eval_writer.flush()
        self._mark = (time.perf_counter(), self._token_count(), step)
