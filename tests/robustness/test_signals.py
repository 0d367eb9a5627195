"""SIGTERM and SIGINT during kt-train: the step reached is saved, the program exits 143 or 130 with one line, and
the same command resumes to the weights of an uninterrupted run (keras_transformer/preemption.py)."""

import os
import re
import signal
import subprocess
import threading
import time

import pytest
import tensorflow as tf

from keras_transformer.training import preemption
from tests.robustness.training_runs import summary, train_flags
from tests.support import failure_message, run_cli, start_cli

STARTED = "step 50/"  # the first progress line printed when piped: training runs
STEPS = 150  # a run's length: 100 steps left after STARTED


def _interrupt(flags, signum, timeout=300):
    """Start kt-train, send ``signum`` once it prints STARTED -> CompletedProcess (stdout, stderr)."""
    process = start_cli("train", *flags)
    deadline, seen = time.time() + timeout, []
    for line in process.stdout:  # stderr holds a line or two; its pipe does not fill meanwhile
        seen.append(line)
        if line.startswith(STARTED) or time.time() > deadline:
            break
    assert process.poll() is None, "".join(seen)[-3000:]
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=timeout)
    return subprocess.CompletedProcess(process.args, process.returncode, "".join(seen) + stdout, stderr)


@pytest.fixture(scope="module")
def uninterrupted(local_corpus, tmp_path_factory):
    """{accumulation: weights digest} of uninterrupted runs of STEPS steps."""
    digests = {}
    for accumulation in (1, 2):
        workdir = tmp_path_factory.mktemp("whole") / "run"
        run_cli("train", *train_flags(local_corpus, workdir, STEPS, f"--gradient_accumulation_steps={accumulation}"),
                timeout=600)
        digests[accumulation] = summary(workdir)["weights_sha256"]
    return digests


@pytest.mark.slow
@pytest.mark.parametrize("signum,code,accumulation", [(signal.SIGTERM, 143, 1), (signal.SIGINT, 130, 2)])
def test_a_signal_saves_the_step_exits_and_the_same_command_resumes_bit_identically(
        local_corpus, uninterrupted, tmp_path, signum, code, accumulation):
    workdir = tmp_path / "run"
    flags = train_flags(local_corpus, workdir, STEPS, f"--gradient_accumulation_steps={accumulation}")
    first = _interrupt(flags, signum)
    assert first.returncode == code, failure_message(first, code)
    assert "Traceback" not in first.stderr
    name = signal.Signals(signum).name
    lines = [line for line in first.stderr.splitlines() if line.startswith("interrupted")]
    assert len(lines) == 1, first.stderr[-3000:]
    match = re.fullmatch(rf"interrupted by {name} at step (\d+): saved {re.escape(str(workdir))}/checkpoints/"
                         r"ckpt-(\d+); run the same command to resume", lines[0])
    assert match and match.group(1) == match.group(2), lines[0]
    step = int(match.group(1))
    assert 50 <= step < STEPS  # stopped soon after the signal, long before the end
    assert (workdir / "checkpoints" / f"ckpt-{step}.index").is_file()
    assert not (workdir / "train_summary.json").exists()  # the run did not finish

    second = run_cli("train", *flags, timeout=600)  # the same command; the lock was released
    assert f"trained tiny to step {STEPS}" in second.stdout
    assert summary(workdir)["resumed_from"] == step
    assert summary(workdir)["weights_sha256"] == uninterrupted[accumulation]


class _State:
    """A CheckpointState stand-in: catch_signals only hands it to the callback."""


def test_the_handlers_only_record_a_second_sigint_gets_the_default_and_the_old_ones_come_back():
    before = {s: signal.getsignal(s) for s in preemption.SIGNALS}
    with preemption.catch_signals(_State(), tf.distribute.get_strategy()) as callbacks:
        (callback,) = callbacks
        assert callback.signum is None
        os.kill(os.getpid(), signal.SIGTERM)  # recorded, nothing else: the process lives on
        time.sleep(0.1)
        assert callback.signum == signal.SIGTERM
        assert signal.getsignal(signal.SIGINT) is signal.SIG_DFL  # a second Ctrl-C now stops at once
        assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, before[signal.SIGTERM])
        os.kill(os.getpid(), signal.SIGTERM)  # a repeated SIGTERM is recorded again, not fatal
        time.sleep(0.1)
        assert callback.signum == signal.SIGTERM
    # callback.model is None (no fit ran), so leaving does not try to save
    assert {s: signal.getsignal(s) for s in preemption.SIGNALS} == before


def test_no_handlers_outside_the_main_thread():
    before = {s: signal.getsignal(s) for s in preemption.SIGNALS}
    found = []

    def run():
        with preemption.catch_signals(_State(), tf.distribute.get_strategy()) as callbacks:
            found.append(callbacks)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert found == [[]]
    assert {s: signal.getsignal(s) for s in preemption.SIGNALS} == before


def test_the_exit_code_is_128_plus_the_signal_and_the_line_names_the_checkpoint():
    interrupted = preemption.TrainingInterrupted(signal.SIGTERM, 37, "runs/x/checkpoints/ckpt-37")
    assert isinstance(interrupted, SystemExit) and interrupted.code == 143
    assert interrupted.message == ("interrupted by SIGTERM at step 37: saved runs/x/checkpoints/ckpt-37; run the same "
                                   "command to resume")
    assert preemption.TrainingInterrupted(signal.SIGINT, 1, "p").code == 130
