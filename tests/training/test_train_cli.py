"""kt-train end to end on Multi30k: validation loss falls, SIGKILL + restart resumes, bad flags fail clearly."""

import json
import signal
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from keras_transformer.schedules import NoamSchedule
from tests.support import run_cli, start_cli


def _scalars(logdir, tag):
    events = EventAccumulator(logdir).Reload()
    if tag in events.Tags()["tensors"]:
        return {e.step: float(tf.make_ndarray(e.tensor_proto)) for e in events.Tensors(tag)}
    return {e.step: e.value for e in events.Scalars(tag)}


@pytest.fixture(scope="module")
def killed_and_resumed(tmp_path_factory, multi30k_dir):
    """Train tiny for 150 steps, SIGKILL the process after its step-100 checkpoint, run the same command again."""
    workdir = tmp_path_factory.mktemp("train") / "run"
    flags = ["--recipe=tiny", f"--workdir={workdir}", "--train_steps=150", "--checkpoint_every=50", "--seed=7"]
    first = start_cli("train", *flags, stderr=subprocess.STDOUT)  # killed mid-run below
    index = workdir / "checkpoints" / "ckpt-100.index"
    deadline = time.time() + 400
    while not index.exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.5)
    assert first.poll() is None, first.stdout.read()[-3000:]
    time.sleep(1.0)  # into the next interval, maybe mid-write of nothing: the kill must not matter
    first.send_signal(signal.SIGKILL)
    first.wait()
    second = run_cli("train", *flags, timeout=600)
    return workdir, second


@pytest.mark.slow
def test_restart_resumes_at_the_last_checkpoint_and_finishes(killed_and_resumed):
    workdir, second = killed_and_resumed
    summary = json.loads((workdir / "train_summary.json").read_text())
    assert summary["resumed_from"] >= 100  # not from zero
    assert summary["steps"] == 150
    assert "trained tiny to step 150" in second.stdout
    # Every kept checkpoint restores cleanly (no corrupt file).
    from keras_transformer import training
    from keras_transformer.checkpoints import CheckpointState
    from keras_transformer.workdir import WorkDir

    recipe = WorkDir(workdir).read_recipe()
    model = training.compile_model(recipe)
    state = CheckpointState(model, str(workdir / "checkpoints"))
    for path in state.manager.checkpoints:
        tf.train.Checkpoint(model=model, optimizer=model.optimizer).restore(path).assert_existing_objects_matched()
    assert int(model.optimizer.iterations.numpy()) == 150


@pytest.mark.slow
def test_learning_rate_continues_from_the_restored_step(killed_and_resumed):
    workdir, _ = killed_and_resumed
    lr = _scalars(str(workdir / "tensorboard" / "train"), "learning_rate")
    schedule = NoamSchedule(64, 100, 2.0)  # tiny recipe: d_model 64, warmup 100, scale 2
    assert 150 in lr
    np.testing.assert_allclose(lr[150], float(schedule(150)), rtol=1e-5)


@pytest.mark.slow
def test_validation_loss_falls(killed_and_resumed):
    workdir, _ = killed_and_resumed
    val = _scalars(str(workdir / "tensorboard" / "validation"), "loss")
    steps = sorted(val)
    assert steps[0] == 50 and steps[-1] == 150
    assert val[150] < val[50] - 0.3, val


@pytest.mark.parametrize("flags,flag_name", [
    (["--recipe=nope", "--workdir=/tmp/x"], "--recipe"),
    (["--data_dir=/nonexistent/data", "--workdir={tmp}"], "--data_dir"),
    (["--train_steps=-5", "--workdir={tmp}"], "--train_steps"),
    (["--tokens_per_batch=10", "--workdir={tmp}"], "--tokens_per_batch"),
    (["--strategy=multi_worker", "--workdir={tmp}"], "--strategy"),
])
def test_bad_flags_exit_with_one_line_naming_the_flag(flags, flag_name, tmp_path):
    out = run_cli("train", *[f.format(tmp=tmp_path) for f in flags], check=False, timeout=300)  # run without TF_CONFIG
    assert out.returncode != 0
    lines = [line for line in out.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and flag_name in lines[0], out.stderr[-2000:]
