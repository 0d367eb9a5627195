"""Running a program, the same way from every test directory.

A program is an entry point under keras_transformer/cli (``"train"``), a dotted module (a worker such as
``"tests.training.accumulation_worker"``) or a script path ending in ``.py`` (``"bench/bench_train.py"``).

``run_cli`` runs a tool in the test process (tests/in_process.py: its own flags, streams, working directory and
variables, its console script's exit status) unless the run needs a process of its own: a worker or a script, an
environment that differs in a variable read while TensorFlow is imported (anything but ``KT_`` variables other
than ``KT_VERBOSE_TF``, and ``PYTHONUNBUFFERED``), ``TF_CONFIG`` (a cluster), a ``Popen`` option, a thread
other than the main one, or ``fresh=True`` (what a test of the console script itself, of stdin or stdout as files,
or of the native stderr asks for). ``start_cli`` always starts a process: a program a test signals or runs side by
side. A process runs with this interpreter, in the repository root, with the repository first on ``PYTHONPATH``
and without an inherited ``TF_CONFIG`` (a test's run never joins a cluster by accident); the rest of the
environment, ``KT_DATA_DIR`` included, passes through. ``KT_TEST_PROCESSES=1`` gives every run a process (to
compare, or to rule the in-process runs out).
"""

import os
import shlex
import subprocess
import sys
import threading

import pytest

from tests import in_process
from tests.conftest import REPO_ROOT

CLI_PACKAGE = in_process.CLI_PACKAGE
STDERR_TAIL = 3000  # characters of stderr an assertion message shows
# Set to 1 to run every program in a process of its own (to compare, or to rule the in-process runs out).
PROCESSES_VARIABLE = "KT_TEST_PROCESSES"
RUNTIME_VARIABLES = frozenset({"PYTHONUNBUFFERED"})  # read at run time; so are the KT_ variables but KT_VERBOSE_TF


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


def in_process_variable(name: str) -> bool:
    """Whether a run may set variable ``name`` differently from the test process and still run in it."""
    return name in RUNTIME_VARIABLES or (name.startswith("KT_") and name != "KT_VERBOSE_TF")


def tool_name(program):
    """The keras_transformer/cli module ``program`` names ("translate", "keras_transformer.cli.translate"), or None."""
    name = program.removeprefix(CLI_PACKAGE + ".")
    return name if "." not in name and "/" not in name else None


def runs_in_process(program, env, popen_kwargs, fresh) -> bool:
    return (not fresh and tool_name(program) and not set(popen_kwargs) - {"cwd", "stderr"}
            and popen_kwargs.get("stderr", subprocess.STDOUT) == subprocess.STDOUT
            and all(in_process_variable(name) for name in env or {}) and "TF_CONFIG" not in os.environ
            and os.environ.get(PROCESSES_VARIABLE) != "1"
            and threading.current_thread() is threading.main_thread())  # a tool sets signal handlers


def run_cli(program, *args, stdin=None, env=None, check=True, timeout=240, fresh=False, **run_kwargs):
    """Run ``program args`` to its end -> ``subprocess.CompletedProcess`` with text ``stdout`` and ``stderr``.

    stdin: text on its standard input (None: none). env: variables set (None: removed) on top of
    ``environment()``. check: assert exit code 0, the message showing the command and its stderr tail; pass False
    to assert the exit code yourself. fresh: a process of its own, started from its console script's module.
    run_kwargs go to ``start_cli`` (``Popen`` options, e.g. ``preexec_fn``, ``cwd``; ``stderr=subprocess.STDOUT``
    merges the streams).
    """
    if runs_in_process(program, env, run_kwargs, fresh):
        result = in_process.run_tool(tool_name(program), args, stdin=stdin, env=env,
                                     cwd=run_kwargs.get("cwd", REPO_ROOT), merge_stderr="stderr" in run_kwargs)
    else:
        run_kwargs.setdefault("stdin", subprocess.PIPE if stdin is not None else subprocess.DEVNULL)
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
    """Start ``program args`` in a process of its own and return at once, for runs a test signals or runs side by
    side; ``finish_cli`` waits for it. stdout and stderr are text pipes unless popen_kwargs say otherwise (e.g.
    ``stderr=STDOUT``)."""
    popen_kwargs.setdefault("cwd", REPO_ROOT)
    popen_kwargs.setdefault("stdout", subprocess.PIPE)
    popen_kwargs.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen(python_command(program, *args), env=environment(env), text=True, **popen_kwargs)


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
