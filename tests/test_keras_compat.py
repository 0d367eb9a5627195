"""The Keras behaviour each workaround in keras_transformer/_keras_compat.py exists for.

Each test asserts that stock Keras still does what the workaround works around; when one fails after a Keras
upgrade, upstream has changed: recheck the workaround and drop it if it is no longer needed.
"""

import inspect
import warnings

import keras
import numpy as np
import tensorflow as tf
from keras.src.backend.tensorflow import trainer as tf_trainer
from keras.src.trainers import epoch_iterator

from keras_transformer import _keras_compat
from keras_transformer.training.train_step import TransformerTrainer


def _source(function) -> str:
    return " ".join(inspect.getsource(function).split())


def test_keras_still_averages_the_first_distributed_batch_to_build():
    # SymbolicBuildOnce: Keras builds on the first batch averaged across replicas (ids become floats).
    assert 'self.distribute_strategy.reduce( "MEAN", maybe_distributed_data_batch' in _source(
        tf_trainer.TensorFlowTrainer._maybe_symbolic_build)


def test_the_trainer_skips_the_symbolic_build_once_built(tiny_recipe):
    from keras_transformer.training import compile_model

    assert TransformerTrainer._maybe_symbolic_build is _keras_compat.SymbolicBuildOnce._maybe_symbolic_build
    model = compile_model(tiny_recipe, tf.distribute.get_strategy())
    model._maybe_symbolic_build(iterator=iter(()))  # Keras' own would take a batch from the iterator
    assert model.built and model.optimizer.built


def test_keras_still_reduces_multi_worker_logs_along_axis_0():
    # per_replica_logs: under MultiWorkerMirroredStrategy each log value goes through reduce(..., axis=0).
    assert 'return strategy.reduce("MEAN", v, axis=0)' in _source(tf_trainer.reduce_per_replica)


def test_per_replica_logs_reshapes_only_under_multi_worker():
    logs = {"loss": tf.constant(2.5)}
    assert _keras_compat.per_replica_logs(logs, tf.distribute.get_strategy()) is logs


def _fit_with_unknown_length_validation():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    data = tf.data.Dataset.from_tensor_slices((np.ones((4, 2), "float32"), np.ones((4, 1), "float32"))).batch(2)
    validation = data.filter(lambda x, y: True)  # unknown cardinality, like the bucketed validation set
    model.fit(data.repeat(), epochs=1, steps_per_epoch=2, validation_data=validation, verbose=0, shuffle=False)


def test_keras_still_warns_when_a_validation_set_of_unknown_length_ends():
    assert "ran out of data" in _source(epoch_iterator.EpochIterator._interrupted_warning)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _fit_with_unknown_length_validation()
    assert any("ran out of data" in str(w.message) for w in caught)


def test_quiet_fit_silences_that_warning_for_its_call_only():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with _keras_compat.quiet_fit():
            _fit_with_unknown_length_validation()
        assert not any("ran out of data" in str(w.message) for w in caught)
        warnings.warn("Your input ran out of data; elsewhere")
    assert any("elsewhere" in str(w.message) for w in caught)  # the filter did not outlive the call
