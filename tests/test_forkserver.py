"""tests/forkserver.py: a program forked from the server sees the process a fresh interpreter gives it, exits with
the same code, and is stopped by the same signals; what the server cannot reproduce goes to a fresh interpreter."""

import json
import signal
import subprocess

import pytest

from tests import forkserver, support
from tests.support import finish_cli, run_cli, start_cli

PROBE = "tests.forkserver_probe"


def _forked_or_skip():
    if support._fork_server() is None:
        pytest.skip("no fork server in this run (KT_TEST_FRESH_INTERPRETERS=1, or it could not start)")


def _probe(*args, **kwargs):
    return run_cli(PROBE, *args, check=False, **kwargs)


def test_a_program_runs_in_a_fork_where_the_server_can_run_it_and_fresh_where_it_cannot():
    _forked_or_skip()
    assert isinstance(start_cli(PROBE, "--exit=0"), forkserver.ForkedProcess)
    # TF_CPP_MIN_LOG_LEVEL is read while TensorFlow is imported; preexec_fn cannot be sent to another process.
    for kwargs in ({"env": {"TF_CPP_MIN_LOG_LEVEL": "3"}}, {"preexec_fn": lambda: None}):
        process = start_cli(PROBE, "--exit=0", **kwargs)
        assert isinstance(process, subprocess.Popen)
        finish_cli(process)


def test_serves_allows_only_run_time_variables_to_differ():
    server_env = {"PATH": "/bin", "TF_CPP_MIN_LOG_LEVEL": "2"}
    assert forkserver.serves(dict(server_env, TF_CONFIG="{}", KT_DATA_DIR="/d", PYTHONUNBUFFERED="1",
                                  PYTEST_CURRENT_TEST="t"), server_env)
    assert not forkserver.serves(dict(server_env, KT_VERBOSE_TF="1"), server_env)
    assert not forkserver.serves(dict(server_env, TF_CPP_MIN_LOG_LEVEL="3"), server_env)
    assert not forkserver.serves(dict(server_env, KERAS_BACKEND="jax"), server_env)
    assert not forkserver.serves({"PATH": "/bin"}, server_env)


@pytest.mark.parametrize("how, code", [("0", 0), ("3", 3), ("raise", 1), ("message", 1)])
def test_a_forked_program_sees_and_ends_as_a_fresh_one(how, code, monkeypatch):
    _forked_or_skip()
    args = ("x", "--read_stdin", f"--exit={how}")
    kwargs = {"stdin": "a line\n", "env": {"TF_CONFIG": "{}", "KT_DATA_DIR": "/nowhere"}}
    forked = _probe(*args, **kwargs)
    monkeypatch.setattr(support, "_server", False)
    fresh = _probe(*args, **kwargs)
    assert forked.returncode == fresh.returncode == code, (forked.stderr[-2000:], fresh.stderr[-2000:])
    report = json.loads(forked.stdout)
    assert report == json.loads(fresh.stdout)
    assert report["argv"] == list(args) and report["stdin"] == "a line" and report["main"] == "__main__"
    assert report["env"]["TF_CONFIG"] == "{}" and report["env"]["KT_DATA_DIR"] == "/nowhere"
    assert report["matmul"] == 64.0 ** 3 and not report["own_module_loaded"]
    last = {"0": "to stderr", "3": "to stderr", "raise": "RuntimeError: the probe was told to raise",
            "message": "the probe was told to exit with a message"}[how]
    assert forked.stderr.strip().splitlines()[-1] == fresh.stderr.strip().splitlines()[-1] == last


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_signalled_program_ends_by_its_signal_with_its_output_merged_as_asked(signum):
    _forked_or_skip()
    process = start_cli(PROBE, "--exit=sleep", stderr=subprocess.STDOUT)
    assert isinstance(process, forkserver.ForkedProcess)
    assert json.loads(process.stdout.readline())["argv"] == ["--exit=sleep"]
    assert process.stdout.readline() == "to stderr\n"  # stderr into the same pipe
    assert process.poll() is None
    process.send_signal(signum)
    assert process.wait(timeout=60) == -signum
    assert finish_cli(process, check=False).returncode == -signum


def test_a_program_past_its_timeout_is_killed():
    with pytest.raises(subprocess.TimeoutExpired):
        run_cli(PROBE, "--exit=sleep", timeout=15)
