"""The learning-rate schedule of §5.3, Eq. 3, and the paper's Adam settings.

    lrate = d_model^-0.5 · min(step_num^-0.5, step_num · warmup_steps^-1.5)     (Eq. 3)

Keras optimizers call the schedule with their 0-based iteration count while
applying the update of step ``iterations + 1``; the schedule uses
``step_num = step + 1``, so the first update uses step_num = 1 as in the paper.
``scale`` multiplies the whole expression (1.0 is the paper).

``cooldown`` (not in the paper) takes the rate linearly to 0 over the last fraction of a run whose end is
set by a wall-clock budget as well as a step count: the schedule multiplies Eq. 3 by ``multiplier``, a
variable that ``training.callbacks.Cooldown`` sets from the run's progress (``cooldown_multiplier``).
"""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_transformer")
class NoamSchedule(keras.optimizers.schedules.LearningRateSchedule):
    def __init__(self, d_model, warmup_steps=4000, scale=1.0, cooldown=0.0):
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale
        self.cooldown = cooldown
        # Not a checkpointed variable: Cooldown recomputes it from the run's progress at every step.
        self.multiplier = keras.Variable(1.0, dtype="float32", trainable=False, name="cooldown") if cooldown else None

    def __call__(self, step):
        step_num = ops.cast(step, "float32") + 1.0
        rate = (
            self.scale
            * self.d_model**-0.5
            * ops.minimum(ops.power(step_num, -0.5), step_num * self.warmup_steps**-1.5)
        )
        return rate if self.multiplier is None else rate * self.multiplier

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale,
                "cooldown": self.cooldown}


def cooldown_multiplier(progress: float, cooldown: float) -> float:
    """1 until the last ``cooldown`` fraction of the run, then linearly to 0 at its end (``progress`` 1)."""
    return min(1.0, max(0.0, (1.0 - progress) / cooldown))


def noam_schedule(d_model, train_config) -> NoamSchedule:
    """Eq. 3 with the recipe's warm-up, scale and cooldown."""
    return NoamSchedule(d_model, train_config.warmup_steps, train_config.learning_rate_scale, train_config.cooldown)


def paper_adam(d_model, train_config, schedule: NoamSchedule = None, **kwargs) -> keras.optimizers.Adam:
    """Adam with β1 = 0.9, β2 = 0.98, ε = 1e-9 (§5.3) on the Eq. 3 schedule (``schedule``: that one, built by
    ``noam_schedule``, so that its caller keeps a handle on it).

    Gradient accumulation is not the optimizer's: ``train_step.TransformerTrainer`` applies
    one update per A micro-batches, so ``iterations`` (and Eq. 3) counts updates.
    """
    t = train_config
    return keras.optimizers.Adam(
        learning_rate=schedule or noam_schedule(d_model, t),
        beta_1=t.adam_beta_1,
        beta_2=t.adam_beta_2,
        epsilon=t.adam_epsilon,
        **kwargs,
    )


def optimizer_step(optimizer) -> int:
    """Parameter updates done so far (``train_step.TransformerTrainer`` counts updates, not micro-batches)."""
    return int(optimizer.iterations.numpy())
