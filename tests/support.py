"""Running a program in its own process, the same way from every test directory.

A program is an entry point under keras_transformer/cli (``"train"``), a dotted module (a worker such as
``"tests.training.accumulation_worker"``) or a script path ending in ``.py`` (``"bench/bench_train.py"``). It runs
with this interpreter, in the repository root, with the repository first on ``PYTHONPATH`` and without an inherited
``TF_CONFIG`` (a test's run never joins a cluster by accident); the rest of the environment, ``KT_DATA_DIR``
included, passes through. Its process is a fork of a server that has imported TensorFlow (tests/forkserver.py)
unless that could change what it does; ``KT_TEST_FRESH_INTERPRETERS=1`` starts every program in a fresh interpreter.
"""

import atexit
import os
import select
import shutil
import shlex
import subprocess
import sys
import tempfile
import types
import warnings

import pytest

from tests import forkserver
from tests.conftest import REPO_ROOT

CLI_PACKAGE = "keras_transformer.cli"
STDERR_TAIL = 3000  # characters of stderr an assertion message shows
FORKED_OPTIONS = frozenset({"cwd", "stdin", "stdout", "stderr"})  # the Popen options a forked program takes
# Set to 1 to start every program in a fresh interpreter (to compare, or to rule the fork server out).
FRESH_VARIABLE = "KT_TEST_FRESH_INTERPRETERS"


def python_command(program, *args) -> list:
    """``[python, -m, module, *args]``, or ``[python, script, *args]`` for a path ending in ``.py``."""
    args = [str(a) for a in args]
    if program.endswith(".py"):
        return [sys.executable, program, *args]
    module = program if "." in program else f"{CLI_PACKAGE}.{program}"
    return [sys.executable, "-m", module, *args]


def environment(env=None) -> dict:
    """This process's environment, the repository first on PYTHONPATH, no TF_CONFIG; then ``env`` on top (a value
    of None removes that variable)."""
    merged = dict(os.environ)
    merged.pop("TF_CONFIG", None)
    merged["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")]))
    for name, value in (env or {}).items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    return merged


def failure_message(result, expected="0") -> str:
    """The command, its exit code against the expected one, and the tail of its stderr (of stdout where stderr
    was merged into it)."""
    command = shlex.join(result.args) if isinstance(result.args, (list, tuple)) else str(result.args)
    output = result.stderr if result.stderr is not None else (result.stdout or "")
    return (f"{command}\nexited {result.returncode}, expected {expected}; its stderr ends:\n"
            f"{output[-STDERR_TAIL:]}")


def run_cli(program, *args, stdin=None, env=None, check=True, timeout=240, **run_kwargs):
    """Run ``program args`` to its end -> ``subprocess.CompletedProcess`` with text ``stdout`` and ``stderr``.

    stdin: text written to its standard input (None: inherited). env: variables set (None: removed) on top of
    ``environment()``. check: assert exit code 0, the message showing the command and its stderr tail; pass False
    to assert the exit code yourself. run_kwargs go to ``start_cli`` (``Popen`` options, e.g. ``preexec_fn``, ``cwd``).
    """
    if stdin is not None:
        run_kwargs["stdin"] = subprocess.PIPE
    process = start_cli(program, *args, env=env, **run_kwargs)
    try:
        stdout, stderr = process.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    result = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    if check:
        assert result.returncode == 0, failure_message(result)
    return result


def start_cli(program, *args, env=None, **popen_kwargs):
    """Start ``program args`` and return at once, for runs a test signals or runs side by side; ``finish_cli``
    waits for it. stdout and stderr are text pipes unless popen_kwargs say otherwise (e.g. ``stderr=STDOUT``).

    The program is a fork of the test process's fork server (tests/forkserver.py: TensorFlow already imported)
    where that runs it as a fresh interpreter would, else a fresh interpreter; either way a ``Popen``-like object.
    """
    global _server
    popen_kwargs.setdefault("cwd", REPO_ROOT)
    popen_kwargs.setdefault("stdout", subprocess.PIPE)
    popen_kwargs.setdefault("stderr", subprocess.PIPE)
    command, merged = python_command(program, *args), environment(env)
    server = _fork_server()
    if server is not None and set(popen_kwargs) <= FORKED_OPTIONS and forkserver.serves(merged, server.env):
        try:
            return forkserver.ForkedProcess(server.path, command, merged, **{"stdin": None, **popen_kwargs})
        except OSError as error:  # the program did not start: the server is gone
            _server = False
            warnings.warn(f"the fork server failed ({error}): the programs from here run in fresh interpreters")
    return subprocess.Popen(command, env=merged, text=True, **popen_kwargs)


_server = None  # this process's fork server: started at the first program, False where it could not start


def _fork_server():
    """This test process's fork server (started on first use, ended with the process), or None."""
    global _server
    if _server is None:
        _server = False if os.environ.get(FRESH_VARIABLE) == "1" else _start_fork_server() or False
    return _server or None


def _start_fork_server():
    directory = tempfile.mkdtemp(prefix="kt-forkserver-")
    path, env = os.path.join(directory, "socket"), environment()
    # Its standard input is its lifeline: it ends when this process closes the pipe, or dies.
    process = subprocess.Popen([sys.executable, "-m", "tests.forkserver", path], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, env=env, cwd=REPO_ROOT)
    if not (select.select([process.stdout], [], [], 300)[0] and process.stdout.readline() == b"ready\n"):
        process.kill()
        shutil.rmtree(directory, ignore_errors=True)
        warnings.warn("the fork server did not start: every program runs in a fresh interpreter")
        return None

    def stop():
        process.stdin.close()
        process.wait(timeout=60)
        shutil.rmtree(directory, ignore_errors=True)

    atexit.register(stop)
    return types.SimpleNamespace(path=path, env=env)


def finish_cli(process, check=True, timeout=240) -> subprocess.CompletedProcess:
    """Wait for a ``start_cli`` process -> ``CompletedProcess`` as ``run_cli`` returns it, checked the same way."""
    stdout, stderr = process.communicate(timeout=timeout)
    result = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    if check:
        assert result.returncode == 0, failure_message(result)
    return result


def fetched(what: str, fetch) -> None:
    """Runs ``fetch``, which reads or downloads a real corpus as the tools do; skips the test with one line when the
    corpus cannot be had (offline, without it)."""
    try:
        fetch()
    except FileNotFoundError as e:
        pytest.skip(f"{what}: {e}")
