"""Exact gradient accumulation: one update over A micro-batches == the update of their concatenation,
and Eq. 3 sees the update count, under every strategy and through kt-train."""

import json

import numpy as np
import pytest

from keras_transformer.schedules import NoamSchedule
from tests.support import run_cli
from tests.training.test_train_cli import _scalars


@pytest.fixture(scope="module")
def accumulated():
    out = run_cli("tests.training.accumulation_worker", timeout=900)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["one_device", "mirrored_1", "mirrored_2"])
def test_accumulated_gradient_equals_the_concatenated_batch_gradient(accumulated, strategy):
    assert accumulated["tokens"] == [72, 12, 40, 8]  # micro-batches of very different token counts
    sgd = accumulated[f"sgd/{strategy}"]  # SGD(1): the update is minus the gradient
    assert sgd["updates"] == 1
    assert sgd["relative_update_diff"] < 1e-5 and sgd["max_abs_diff"] < 1e-6, sgd
    # Averaging the micro-batch means instead is far off on such batches.
    assert accumulated["sgd/mean_of_micro_batch_means_relative_diff"] > 0.1


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["one_device", "mirrored_1", "mirrored_2"])
def test_first_accumulated_adam_update_has_the_eq3_step_size(accumulated, strategy):
    adam = accumulated[f"adam/{strategy}"]
    lr_1 = float(NoamSchedule(32, 100, 2.0)(0))  # the worker's model: d_model 32, warmup 100, scale 2; at step_num 1
    assert adam["updates"] == 1
    assert adam["max_update"] == pytest.approx(lr_1, rel=1e-3)  # Adam's first step moves weights by ~lr
    assert adam["relative_update_diff"] < 1e-2, adam  # Adam amplifies float noise where the gradient is ~0


def _kt_train(workdir, *flags):
    return run_cli("train", "--recipe=tiny", f"--workdir={workdir}", "--train_steps=4", "--checkpoint_every=2",
                   "--seed=3", *flags, timeout=600)


@pytest.mark.slow
def test_kt_train_accumulates_under_the_default_strategy_and_eq3_counts_updates(tmp_path):
    from keras_transformer import training
    from keras_transformer.checkpoints import CheckpointState
    from keras_transformer.workdir import WorkDir

    workdir = tmp_path / "a4"
    out = _kt_train(workdir, "--gradient_accumulation_steps=4")
    assert "tokens per update: 2048 per side = 1 replica(s) x 4 micro-batch(es) x 512" in out.stdout
    model = training.compile_model(WorkDir(workdir).read_recipe())
    assert CheckpointState(model, str(workdir / "checkpoints")).restore_latest() == 4
    assert int(model.optimizer.iterations.numpy()) == 4  # 4 updates of 4 micro-batches each
    learning_rate = _scalars(str(workdir / "tensorboard" / "train"), "learning_rate")
    schedule = NoamSchedule(64, 100, 2.0)
    for step in (2, 4):  # Eq. 3 at the update count, as a run without accumulation has it
        np.testing.assert_allclose(learning_rate[step], float(schedule(step)), rtol=1e-6)
