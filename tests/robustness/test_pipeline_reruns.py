"""kt-pipeline killed in a stage (SIGTERM, as a scheduler sends it) stops with exit 143 and one line, and the
same command then finishes the job without redoing the stages done (WORKDIR/pipeline.json)."""

import json
import signal
import time

import pytest

from tests.robustness.training_runs import train_flags
from tests.support import finish_cli, run_cli, start_cli


def _signal_after(process, line: str, signum=signal.SIGTERM, timeout=600):
    """Send ``signum`` once ``line`` appears in the process's stdout; returns the stdout read so far."""
    seen, deadline = [], time.time() + timeout
    while time.time() < deadline:
        out = process.stdout.readline()
        if not out:
            break
        seen.append(out)
        if line in out:
            process.send_signal(signum)
            return "".join(seen)
    pytest.fail(f"{line!r} never printed; stdout: {''.join(seen)[-2000:]}")


@pytest.mark.slow
def test_killed_in_training_then_in_evaluation_the_same_command_finishes(local_corpus, tmp_path):
    workdir, export_dir = tmp_path / "run", tmp_path / "export"
    flags = [*train_flags(local_corpus, workdir, 120), f"--test_prefix={local_corpus}/dev",
             f"--export_dir={export_dir}", "--eval_sentences=8"]
    unbuffered = {"PYTHONUNBUFFERED": "1"}

    training = start_cli("pipeline", *flags, env=unbuffered)
    _signal_after(training, "step 50/")  # in stage 1: training checkpoints the step and exits 143
    stopped = finish_cli(training, check=False, timeout=300)
    assert stopped.returncode == 143 and "interrupted by SIGTERM at step" in stopped.stderr, stopped.stderr[-2000:]
    assert not export_dir.exists()

    evaluating = start_cli("pipeline", *flags, env=unbuffered)
    _signal_after(evaluating, "[2/5] averaged")  # training is done: the signal stops the stages after it
    stopped = finish_cli(evaluating, check=False, timeout=300)
    assert stopped.returncode == 143 and "stopped by SIGTERM" in stopped.stderr, stopped.stderr[-2000:]
    assert "Traceback" not in stopped.stderr and not export_dir.exists()

    done = run_cli("pipeline", *flags, timeout=600)
    assert "step 50/" not in done.stdout  # no training step again
    assert "[3/5] " in done.stdout and "[4/5] exported the SavedModel" in done.stdout
    again = run_cli("pipeline", *flags, timeout=600)  # and once more, after success: every stage is done
    assert "[1/5] already trained tiny to step 120" in again.stdout and "[4/5] already exported" in again.stdout
    metadata = json.loads((export_dir / "metadata.json").read_text())
    assert metadata["step"] == 120 and metadata["test_sentences"] == 8
