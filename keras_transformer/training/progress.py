"""What a person watching a training run reads: one progress line for the whole run.

    Progress(train_steps, max_seconds=0, interactive=None, every=50)   a Keras callback
    progress_line(step, expected, elapsed, eta, loss, seconds_per_step, val) -> str
    recipe_summary(recipe, recipe_file) -> [str]   the recipe in a few lines, as a run opens

    step 1,250/~3,300   38% [=======>............]  11m02s elapsed, ETA 18m10s  0.53 s/step  loss 2.312  val ppl 5.12

In a terminal the line is rewritten in place ("\\r") about once a second; piped (a log file, CI) it is printed
as a plain line every ``every`` steps and after each validation, one line per step: a step that ends a
validation epoch is printed once, after it, with its scores. Expected steps: the recipe's ``train_steps``,
or fewer where a wall-clock budget (``max_train_minutes``) will stop the run first, from the time a step has
taken so far in this run (validation included); the line marks such an estimate with "~". A recipe's
``min_train_steps`` is a floor under that estimate (the run trains on to it, ``callbacks.StopAtStep``).
TensorBoard keeps every scalar (``callbacks.TensorBoardScalars``); this line shows the few that tell how the run goes.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Dict, Optional

import keras

from keras_transformer.schedules import optimizer_step

BAR = 20  # characters of the bar
_VAL = (("perplexity", "val ppl", "{:.2f}"), ("bleu", "val BLEU", "{:.2f}"), ("f1", "val F1", "{:.2f}"))


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def progress_line(step: int, expected: int, elapsed: float, eta: Optional[float], loss: Optional[float] = None,
                  seconds_per_step: Optional[float] = None, val: Optional[Dict[str, float]] = None,
                  estimated: bool = False) -> str:
    """One line: steps done of expected, a bar, elapsed and remaining time, speed, loss and the last validation.

    ``estimated``: ``expected`` comes from the time budget (written "~3,300"). ``eta`` None: not known yet.
    """
    done = min(1.0, step / expected) if expected else 0.0
    filled = int(done * BAR)
    bar = "=" * filled + (">" if filled < BAR else "") + "." * max(0, BAR - filled - 1)
    parts = [f"step {step:,}/{'~' if estimated else ''}{expected:,}", f"{done:4.0%} [{bar}]",
             f"{_duration(elapsed)} elapsed, ETA {_duration(eta) if eta is not None else '?'}"]
    if seconds_per_step:
        parts.append(f"{seconds_per_step:.2f} s/step")
    if loss is not None and math.isfinite(loss):
        parts.append(f"loss {loss:.3f}")
    for key, name, form in _VAL:
        if val and key in val:
            parts.append(f"{name} {form.format(val[key])}")
    return "  ".join(parts)


class Progress(keras.callbacks.Callback):
    """The run's progress line (module docstring); ``interactive`` None: whether stdout is a terminal."""

    def __init__(self, train_steps: int, max_seconds: float = 0.0, interactive: Optional[bool] = None,
                 every: int = 50, stream=None, min_steps: int = 0):
        super().__init__()
        self.train_steps, self.max_seconds, self.every, self.min_steps = train_steps, max_seconds, every, min_steps
        self.stream = stream or sys.stdout
        self.interactive = self.stream.isatty() if interactive is None else interactive
        self.val: Dict[str, float] = {}
        self._start = self._first_step = None
        self._shown = 0.0  # when the terminal line was last rewritten
        self._width = 0

    def on_train_begin(self, logs=None):
        self._start, self._first_step = time.monotonic(), optimizer_step(self.model.optimizer)

    def line(self, step: int, loss: Optional[float] = None) -> str:
        elapsed = time.monotonic() - self._start
        run = step - self._first_step
        per_step = elapsed / run if run > 0 else None
        expected, estimated, eta = self.train_steps, False, None
        if per_step:
            eta = (self.train_steps - step) * per_step
            if self.max_seconds:
                left = max(0.0, self.max_seconds - elapsed)
                if left < eta:  # the budget stops the run first, unless the recipe's floor is further
                    expected, estimated, eta = min(self.train_steps, step + int(left / per_step)), True, left
                    if expected < self.min_steps:
                        expected, estimated, eta = self.min_steps, False, (self.min_steps - step) * per_step
        return progress_line(step, expected, elapsed, eta, loss, per_step, self.val, estimated)

    def _show(self, text: str, final: bool = False) -> None:
        if self.interactive:
            pad = " " * max(0, self._width - len(text))
            self._width = len(text)
            self.stream.write("\r" + text + pad + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def on_train_batch_end(self, batch, logs=None):
        step = optimizer_step(self.model.optimizer)
        now = time.monotonic()
        if self.interactive:
            if now - self._shown < 1.0:
                return
        elif step % self.every or batch + 1 == (self.params or {}).get("steps"):
            return  # not a step mark, or the epoch's last step: on_epoch_end prints it, with the validation
        self._shown = now
        self._show(self.line(step, (logs or {}).get("loss")))

    def on_epoch_end(self, epoch, logs=None):
        validated = {k[4:]: float(v) for k, v in (logs or {}).items() if k.startswith("val_")}
        self.val.update(validated)
        step = optimizer_step(self.model.optimizer)
        if not self.interactive and (validated or step % self.every == 0):
            self._show(self.line(step, (logs or {}).get("loss")))

    def on_train_end(self, logs=None):
        if self.interactive:
            self._show(self.line(optimizer_step(self.model.optimizer), (logs or {}).get("loss")), final=True)


def recipe_summary(recipe, recipe_file) -> list:
    """What a run opens with, after its precision (``precision.policy_reason``): the recipe's name, model, data and
    budget in a few lines (the whole recipe is in ``recipe_file``)."""
    from keras_transformer.model import count_parameters

    m, d, t = recipe.model, recipe.data, recipe.train
    vocabulary = f"{m.vocab_size:,} pieces{' shared' if m.shared_vocabulary else ' per language'}"
    budget = f"{t.train_steps:,} steps"
    if t.max_train_minutes:
        budget = f"{t.max_train_minutes:g} minutes or {budget}, whichever comes first"
    if t.min_train_steps:
        budget += f" (at least {t.min_train_steps:,} steps)"
    return [f"recipe {recipe.name} ({recipe.task}; all of it in {recipe_file})",
            f"  model: {count_parameters(recipe) / 1e6:.1f}M parameters, {m.num_encoder_layers}+{m.num_decoder_layers} "
            f"layers, d_model {m.d_model}, d_ff {m.d_ff}, {m.num_heads} heads, {m.norm}-LN, dropout {m.dropout:g}, "
            f"{vocabulary}",
            f"  data: {d.corpus} {d.source_lang}->{','.join(d.target_langs) or d.target_lang}, {d.tokens_per_batch:,} "
            f"tokens per batch, pairs up to {d.max_length} subwords",
            f"  budget: {budget}; a checkpoint every {t.checkpoint_every:,}, warm-up {t.warmup_steps:,} (Eq. 3)"]
