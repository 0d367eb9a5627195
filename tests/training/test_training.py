"""Training loop: resume state, TensorBoard scalars, stopping at a step count or a time cap (synthetic data)."""

import glob
import json
import os

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from keras_transformer import training
from keras_transformer.checkpoints import CheckpointState
from keras_transformer.workdir import WorkDir

from tests.synthetic import as_dataset, copy_batches, small_recipe
from tests.testdata import corpora as generated


def _recipe(tiny_recipe, **train):
    return small_recipe(tiny_recipe, **dict(dict(train_steps=6, checkpoint_every=3, keep_checkpoints=2,
                                                 eval_batches=2), **train))


def _datasets():
    batches = copy_batches(num_batches=4)
    return as_dataset(batches), as_dataset(batches[:2], repeat=False)


def test_trains_to_the_step_count_and_writes_scalars(tiny_recipe, tmp_path):
    recipe = _recipe(tiny_recipe)
    summary = training.train(recipe, str(tmp_path), strategy="one_device", datasets=_datasets(), verbose=0)
    assert summary.steps == 6 and summary.resumed_from == 0
    assert WorkDir(tmp_path).read_recipe() == recipe
    checkpoints = sorted(glob.glob(str(tmp_path / "checkpoints" / "ckpt-*.index")))
    assert [os.path.basename(p) for p in checkpoints] == ["ckpt-3.index", "ckpt-6.index"]
    train_events = EventAccumulator(str(tmp_path / "tensorboard" / "train")).Reload()
    tags = set(train_events.Tags()["tensors"]) | set(train_events.Tags()["scalars"])
    for tag in ("loss", "smoothed_loss", "nll", "perplexity", "token_accuracy", "learning_rate",
                "tokens_per_second", "step_time"):
        assert tag in tags, tag
    val_events = EventAccumulator(str(tmp_path / "tensorboard" / "validation")).Reload()
    assert {"loss", "nll", "token_accuracy"} <= set(val_events.Tags()["tensors"]) | set(val_events.Tags()["scalars"])


@pytest.mark.slow
def test_second_run_resumes_with_optimizer_state(tiny_recipe, tmp_path):
    recipe = _recipe(tiny_recipe, train_steps=3)
    training.train(recipe, str(tmp_path), strategy="one_device", datasets=_datasets(), verbose=0)
    saved = training.compile_model(recipe)
    CheckpointState(saved, str(tmp_path / "checkpoints")).restore_latest()
    moments = [v.numpy() for v in saved.optimizer.variables if "momentum" in v.path]
    assert moments and all(np.abs(m).sum() > 0 for m in moments)
    assert int(saved.optimizer.iterations.numpy()) == 3

    summary = training.train(_recipe(tiny_recipe, train_steps=6), str(tmp_path), strategy="one_device",
                             datasets=_datasets(), verbose=0)
    assert summary.resumed_from == 3 and summary.steps == 6


@pytest.mark.slow
def test_wall_clock_cap_stops_early_and_checkpoints_the_step_reached(tiny_recipe, tmp_path):
    recipe = _recipe(tiny_recipe, max_train_minutes=1e-6)  # spent during the first step
    summary = training.train(recipe, str(tmp_path), strategy="one_device", datasets=_datasets(), verbose=0)
    assert summary.stopped_by_time and summary.steps == 1
    assert CheckpointState(training.compile_model(recipe), str(tmp_path / "checkpoints")).restore_latest() == 1

    summary = training.train(_recipe(tiny_recipe), str(tmp_path), strategy="one_device", datasets=_datasets(),
                             verbose=0)  # no cap: resumes and finishes
    assert not summary.stopped_by_time and (summary.resumed_from, summary.steps) == (1, 6)


def test_gradient_accumulation_counts_updates(tiny_recipe, tmp_path):
    recipe = _recipe(tiny_recipe, train_steps=2, checkpoint_every=2, gradient_accumulation_steps=2)
    summary = training.train(recipe, str(tmp_path), strategy="one_device", datasets=_datasets(), verbose=0)
    assert summary.steps == 2
    model = training.compile_model(recipe)
    CheckpointState(model, str(tmp_path / "checkpoints")).restore_latest()
    assert int(model.optimizer.iterations.numpy()) == 2  # updates, each of 2 micro-batches


def test_unknown_strategy_names_the_flag():
    import pytest

    with pytest.raises(ValueError, match="--strategy"):
        training.make_strategy("nope")


def test_summary_file(tiny_recipe, tmp_path):
    training.train(_recipe(tiny_recipe, train_steps=3), str(tmp_path), strategy="one_device",
                   datasets=_datasets(), verbose=0)
    summary = json.loads((tmp_path / "train_summary.json").read_text())
    assert summary["steps"] == 3 and np.isfinite(summary["history"]["loss"][-1])


@pytest.mark.slow
def test_mixed_bfloat16_trains_and_leaves_float32_behind(tiny_recipe, tmp_path, monkeypatch):
    import keras

    from keras_transformer import precision

    monkeypatch.setattr(precision, "bfloat16_hardware", lambda strategy, cpuinfo=None: "CPU (amx_bf16)")
    recipe = _recipe(tiny_recipe, train_steps=2, checkpoint_every=2, mixed_precision=True)
    summary = training.train(recipe, str(tmp_path), strategy="one_device", datasets=_datasets(), verbose=0)
    assert summary.steps == 2 and np.isfinite(summary.history["loss"][-1])
    assert summary.policy == "mixed_bfloat16"
    assert keras.mixed_precision.dtype_policy().name == "float32"


def test_mixed_precision_without_bfloat16_hardware_trains_float32_and_says_so(tiny_recipe, tmp_path, monkeypatch,
                                                                             capsys):
    from keras_transformer import precision

    monkeypatch.setattr(precision, "bfloat16_hardware", lambda strategy, cpuinfo=None: None)
    recipe = _recipe(tiny_recipe, train_steps=2, checkpoint_every=2, mixed_precision=True)
    summary = training.train(recipe, str(tmp_path), strategy="one_device", datasets=_datasets(), verbose=0)
    assert summary.policy == "float32"
    assert json.loads((tmp_path / "train_summary.json").read_text())["policy"] == "float32"
    assert "mixed_precision: this machine has no bfloat16 arithmetic" in capsys.readouterr().err
    assert WorkDir(tmp_path).read_recipe() == recipe  # the recipe keeps asking: another machine may have it


@pytest.mark.slow
def test_a_resumed_run_with_dropout_ends_with_the_weights_of_an_uninterrupted_one(tiny_recipe, tmp_path):
    """The dropout layers' generator states are in the checkpoint: after a resume the masks are the ones an
    uninterrupted run draws, so 3 + 3 steps end bit for bit where 6 steps do."""
    import dataclasses

    recipe = _recipe(tiny_recipe)
    recipe = dataclasses.replace(recipe, model=dataclasses.replace(recipe.model, dropout=0.3))
    whole = training.train(recipe, str(tmp_path / "whole"), strategy="one_device", datasets=_datasets(), verbose=0)
    first = dataclasses.replace(recipe, train=dataclasses.replace(recipe.train, train_steps=3))
    training.train(first, str(tmp_path / "split"), strategy="one_device", datasets=_datasets(), verbose=0)
    resumed = training.train(recipe, str(tmp_path / "split"), strategy="one_device", datasets=_datasets(), verbose=0)
    assert resumed.resumed_from == 3 and resumed.weights_sha256 == whole.weights_sha256


@pytest.mark.slow
def test_word_dropout_by_frequency_counts_the_training_sources(tiny_recipe, tmp_path, multi30k_dir):
    """With source_token_dropout_alpha the trainer fills the model's piece counts from the recipe's training split
    (tokenized by the run's own tokenizer) before the first step, and the checkpoints keep them."""
    import dataclasses

    from keras_transformer import data
    from keras_transformer.checkpoints import restore_weights
    from keras_transformer.data import tokenizer

    recipe = _recipe(tiny_recipe, train_steps=3)
    recipe = dataclasses.replace(recipe, model=dataclasses.replace(recipe.model, source_token_dropout_alpha=2.0))
    training.train(recipe, str(tmp_path), strategy="one_device", datasets=_datasets(), verbose=0)
    expected = data.source_piece_counts(recipe, tmp_path, tokenizer.get_or_train(recipe, tmp_path))
    model = training.compile_model(recipe)
    restore_weights(model, CheckpointState(model, str(tmp_path / "checkpoints")).manager.latest_checkpoint)
    np.testing.assert_array_equal(model.piece_counts.numpy(), expected)
    assert expected.sum() > generated.SPLITS["train"] * 7  # every piece of the training sentences (6+ words), EOS
