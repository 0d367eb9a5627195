"""The training step (§5.3, §5.4): label-smoothed loss, token metrics, exact gradient accumulation.

``TransformerTrainer`` is the Transformer with ``train_step`` and ``test_step``
written out (the Keras "customise fit()" pattern), so that

* one log-softmax serves the loss and every metric (``losses.token_statistics``);
* an update may accumulate A micro-batches (§5.1's 25k-token batches on small
  devices) and still be the update of the concatenated batch.

Exact accumulation. Micro-batch i has T_i real target tokens over all replicas;
its all-reduced gradient ĝ_i is the gradient of its token mean. The update of
the concatenated batch uses

    g = Σ_i T_i ĝ_i / Σ_i T_i      (the gradient of Σ token losses ÷ Σ real tokens),

so each micro-step adds T_i ĝ_i and T_i to accumulators, and every A-th one
applies g with Adam and resets them. Averaging ĝ_i instead would weigh a
micro-batch of few tokens as much as a full one. The optimizer's iteration
counter, and so Eq. 3, counts updates: update n gets the same learning rate
with or without accumulation.

Under ``mixed_float16`` (``precision.py``) the loss is scaled by the ``LossScaleOptimizer``'s S before
the gradients are taken; the accumulated g is S times the true one, and the update applies g / S, or is
skipped (S halved) when any of it overflowed.

The accumulators live outside the checkpoint: checkpoints are written at update
boundaries, where they are zero, and a run stopped mid-update resumes from the
last full update, replaying that update's micro-batches (``training``).
"""

from __future__ import annotations

import functools
from typing import Union

import keras
import tensorflow as tf
from keras import ops

from keras_transformer import _keras_compat, losses
from keras_transformer.config import ModelConfig, Recipe
from keras_transformer.model import Transformer, model_class
from keras_transformer.training import freeze as freeze_lib


class _Accumulators:
    """T_i ĝ_i and T_i summed over the micro-batches of the current update (a plain object: never checkpointed)."""

    def __init__(self, variables):
        self.grads = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False, name="accumulated_gradient")
                      for v in variables]
        self.tokens = tf.Variable(0.0, trainable=False, name="accumulated_tokens")
        self.micro_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="micro_steps")


def _add(variable, value):
    return variable.assign_add(value)


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerTrainer(_keras_compat.SymbolicBuildOnce, Transformer):
    """The Transformer with the §5 training step; ``accumulation`` micro-batches per update.

    Built, compiled and its optimizer built before ``fit`` (``training.compile_model``), which therefore skips
    Keras' symbolic build (``_keras_compat.SymbolicBuildOnce``). A task's model class gets its trainer from
    ``trainer_class``.
    """

    inference_class = Transformer  # the model without this training step (model.build_like)
    CONFIG_KEYS = ("label_smoothing", "accumulation", "freeze")

    def __init__(self, config: Union[ModelConfig, dict], label_smoothing: float = 0.1, accumulation: int = 1,
                 freeze: str = "", **kwargs):
        super().__init__(config, **kwargs)
        if accumulation < 1:
            raise ValueError(f"gradient_accumulation_steps: must be >= 1, got {accumulation}")
        self.label_smoothing = label_smoothing
        self.accumulation = accumulation
        self.freeze = freeze  # TrainConfig.freeze: the weights training leaves alone (training/freeze.py)
        self.frozen_paths = ()  # their variable paths without the model's name, once built (a tuple: not tracked)
        self.token_metrics = losses.TokenMetrics()
        self._accumulators = None  # created by build(), in the strategy's scope

    def build(self, input_shape=None):
        super().build(input_shape)
        if self.freeze and not self.frozen_paths:  # before the accumulators and the optimizer see trainable_variables
            self.frozen_paths = tuple(freeze_lib.freeze(self, self.freeze))
        if self.accumulation > 1 and self._accumulators is None:
            self._accumulators = _Accumulators(self.trainable_variables)

    @property
    def metrics(self):
        return [self.token_metrics]

    def between_updates(self) -> bool:
        """Whether no accumulated update is under way (its micro-batches all applied, or none begun)."""
        return self._accumulators is None or int(self._accumulators.micro_steps.numpy()) % self.accumulation == 0

    def _statistics(self, data, training):
        """-> (statistics [B, T, 4], a term added to their summed loss; ``Transformer.training_statistics``)."""
        (source_ids, target_in_ids), target_out_ids, _ = keras.utils.unpack_x_y_sample_weight(data)  # [B, S], [B, T]
        return self.training_statistics(source_ids, target_in_ids, target_out_ids, training, self.label_smoothing)

    # Keras traces these inside its tf.function with AutoGraph on; they and everything they call are written in
    # TensorFlow's own control flow (tf.cond below), so converting their source would only cost tracing time.
    @tf.autograph.experimental.do_not_convert
    def train_step(self, data):
        with tf.GradientTape() as tape:
            stats, extra = self._statistics(data, training=True)  # [B, T, 4]
            tokens = losses.global_token_count(stats)  # T_i, all replicas
            loss = (ops.sum(stats[..., losses.SMOOTHED]) + extra) / tokens
            loss = self.optimizer.scale_loss(loss)  # S * loss under mixed_float16 (precision.py); else loss itself
        grads = tape.gradient(loss, self.trainable_variables)  # S * ĝ_i
        if self.accumulation == 1:
            self.optimizer.apply(grads, self.trainable_variables)
        else:
            self._accumulate(grads, tokens)
        self.token_metrics.update_state(stats)
        return self._logs()

    @tf.autograph.experimental.do_not_convert
    def test_step(self, data):
        self.token_metrics.update_state(self._statistics(data, training=False)[0])
        return self._logs()

    def _logs(self):
        return _keras_compat.per_replica_logs(self.token_metrics.result(), self.distribute_strategy)

    # -- gradient accumulation -------------------------------------------------------------------

    def _accumulate(self, grads, tokens):
        """Replica context: all-reduce T_i ĝ_i, then add it to the accumulators (cross-replica)."""
        context = tf.distribute.get_replica_context()
        grads = [g * tokens for g in grads]  # local part of T_i ĝ_i
        if context.num_replicas_in_sync > 1:
            grads = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)  # T_i ĝ_i on every replica
        # The update below is conditional; a merge_call inside a tf.cond is not allowed, so the whole
        # accumulate-or-apply runs in one unconditional merge_call, its condition inside.
        context.merge_call(self._accumulate_or_apply, args=(grads, tokens))

    def _accumulate_or_apply(self, strategy, grads, tokens):
        acc = self._accumulators
        for variable, grad in zip(acc.grads, grads):
            strategy.extended.update(variable, _add, args=(grad,), group=False)
        strategy.extended.update(acc.tokens, _add, args=(tokens,), group=False)
        micro_steps = acc.micro_steps.assign_add(1)

        def update(grads):
            optimizer = getattr(self.optimizer, "inner_optimizer", self.optimizer)  # Adam under a loss scale too
            learning_rate = optimizer.learning_rate  # Eq. 3 at the update count
            for variable, grad in zip(self.trainable_variables, grads):
                # What Keras' own optimizer.apply does per variable under a strategy, without its
                # replica-context merge_call (we are already in cross-replica context).
                strategy.extended.update(
                    variable.value, lambda var, g: optimizer.update_step(g, var, learning_rate),
                    args=(grad,), group=False)
            optimizer.iterations.assign_add(1)

        def apply():
            total = acc.tokens.read_value()  # Σ T_i
            grads = [summed.read_value() / total for summed in acc.grads]  # g, times S under a loss scale
            if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
                _apply_scaled(self.optimizer, grads, update)
            else:
                update(grads)
            for variable in acc.grads:
                variable.assign(tf.zeros_like(variable))
            acc.tokens.assign(0.0)
            return tf.constant(True)

        return tf.cond(micro_steps % self.accumulation == 0, apply, lambda: tf.constant(False))

    def get_config(self):
        return {**super().get_config(), "label_smoothing": self.label_smoothing, "accumulation": self.accumulation,
                "freeze": self.freeze}


def _apply_scaled(optimizer, grads, update) -> None:
    """``LossScaleOptimizer.apply``'s rule in cross-replica context: ``update(g / S)`` when every gradient is finite
    (S doubled after ``dynamic_growth_steps`` such updates in a row), else skip the update and halve S."""
    scale, counter = optimizer.dynamic_scale, optimizer.step_counter

    def finite():
        update([g / scale for g in grads])
        grow = counter == optimizer.dynamic_growth_steps - 1
        scale.assign(tf.where(grow, scale * 2.0, scale))
        counter.assign(tf.where(grow, tf.zeros_like(counter), counter + 1))
        return tf.constant(True)

    def overflow():
        scale.assign(scale * 0.5)
        counter.assign(tf.zeros_like(counter))
        return tf.constant(False)

    tf.cond(optimizer.check_finite(grads), finite, overflow)


@functools.lru_cache(maxsize=None)
def trainer_class(model_cls: type) -> type:
    """``TransformerTrainer`` over a task's model class (``model.model_class``): the §5 step around its model."""
    if model_cls is Transformer:
        return TransformerTrainer
    return type(f"{model_cls.__name__}Trainer", (TransformerTrainer, model_cls), {"inference_class": model_cls})


def build_trainer(recipe: Union[Recipe, ModelConfig], label_smoothing: float,
                  accumulation: int = 1, freeze: str = "") -> TransformerTrainer:
    """A built trainer of a recipe's model (of the paper's, for a ``ModelConfig``), all weights and accumulators
    created, the ``freeze`` weights not trainable; call under the strategy's scope."""
    kwargs = dict(label_smoothing=label_smoothing, accumulation=accumulation, freeze=freeze, name="transformer")
    if isinstance(recipe, ModelConfig):
        model = TransformerTrainer(recipe, **kwargs)
    else:
        model = trainer_class(model_class(recipe)).from_recipe(recipe, **kwargs)
    model.build()
    return model
