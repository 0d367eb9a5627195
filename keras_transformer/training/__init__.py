"""Training (§5): ``model.fit`` under a ``tf.distribute`` strategy (``fit.py``), the train step with gradient
accumulation and label smoothing (``train_step.py``), the callbacks that checkpoint, log and keep the best
(``callbacks.py``), what a run may start from (``init_from.py``) and the work directory's lock (``lock.py``)."""

from keras_transformer.training.fit import (TrainSummary, batch_plan, compile_model, is_chief, make_strategy,
                                           steps_for_epochs, task_id, train, weights_digest)

__all__ = ["TrainSummary", "batch_plan", "compile_model", "is_chief", "make_strategy", "steps_for_epochs",
           "task_id", "train", "weights_digest"]
