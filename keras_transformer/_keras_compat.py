"""Every workaround for Keras behaviour, in one place (checked with Keras 3.15.1 on TensorFlow 2.21).

Each names the Keras code it works around and the upstream thread, and has a test in
``tests/test_keras_compat.py`` that fails once upstream changes that code, so the workaround can then be
rechecked and dropped.

1. :class:`SymbolicBuildOnce` (a mixin of ``model.Transformer``). Keras' TensorFlow trainer builds the
   compiled loss and metrics on the first batch of ``fit``, which it first averages across replicas
   (``strategy.reduce("MEAN", batch)`` in ``TensorFlowTrainer._maybe_symbolic_build``): integer ids become
   floats, and under ``MultiWorkerMirroredStrategy`` it fails outright. ``training.compile_model`` builds
   the model, metrics and optimizer before ``fit``, so that build is skipped once everything is built.
2. :func:`per_replica_logs`. Under ``MultiWorkerMirroredStrategy`` Keras reduces each log value with
   ``strategy.reduce("MEAN", v, axis=0)`` (``reduce_per_replica``), which rejects scalars; [1]-shaped values
   reduce to the mean.
3. :func:`quiet_fit`. Keras warns "Your input ran out of data; interrupting training" whenever a dataset of
   unknown length ends (``EpochIterator.catch_stop_iteration``), and every validation pass over our
   bucketed validation set ends that way by design.

Upstream: keras-team/keras#20585 (Keras 3 and ``MultiWorkerMirroredStrategy``, open), which tracks the
multi-worker failures of items 1 and 2 (also tensorflow/tensorflow#72388).
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Dict, Iterator

import tensorflow as tf

KERAS_CHECKED = "3.15.1"  # the version these workarounds were last checked against
RAN_OUT_OF_DATA = ".*Your input ran out of data.*"  # the warning quiet_fit silences


class SymbolicBuildOnce:
    """Mixin for a ``keras.Model`` built before ``fit``: skips Keras' symbolic build once everything is built."""

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        compiled = [getattr(self, "_compile_loss", None), getattr(self, "_compile_metrics", None), self.optimizer]
        if self.built and all(c is None or c.built for c in compiled):
            return
        super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)


def per_replica_logs(logs: Dict[str, tf.Tensor], strategy: tf.distribute.Strategy) -> Dict[str, tf.Tensor]:
    """Scalar logs as [1]-shaped tensors under ``MultiWorkerMirroredStrategy`` (unchanged otherwise)."""
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return {name: tf.reshape(value, [1]) for name, value in logs.items()}
    return logs


@contextlib.contextmanager
def quiet_fit() -> Iterator[None]:
    """Around ``model.fit``: without the "ran out of data" warning of each validation pass (this call only)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=RAN_OUT_OF_DATA)
        yield
