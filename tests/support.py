"""Running a program in a fresh process, the same way from every test directory.

A program is an entry point under keras_transformer/cli (``"train"``), a dotted module (a worker such as
``"tests.training.accumulation_worker"``) or a script path ending in ``.py`` (``"bench/bench_train.py"``). It runs
with this interpreter, in the repository root, with the repository first on ``PYTHONPATH`` and without an inherited
``TF_CONFIG`` (a test's run never joins a cluster by accident); the rest of the environment, ``KT_DATA_DIR``
included, passes through.
"""

import os
import shlex
import subprocess
import sys

from tests.conftest import REPO_ROOT

CLI_PACKAGE = "keras_transformer.cli"
STDERR_TAIL = 3000  # characters of stderr an assertion message shows


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
    to assert the exit code yourself. run_kwargs go to ``subprocess.run`` (e.g. ``preexec_fn``, ``cwd``).
    """
    run_kwargs.setdefault("cwd", REPO_ROOT)
    result = subprocess.run(python_command(program, *args), env=environment(env), input=stdin, capture_output=True,
                            text=True, timeout=timeout, **run_kwargs)
    if check:
        assert result.returncode == 0, failure_message(result)
    return result


def start_cli(program, *args, env=None, **popen_kwargs) -> subprocess.Popen:
    """Start ``program args`` and return at once, for runs a test signals or runs side by side; ``finish_cli``
    waits for it. stdout and stderr are text pipes unless popen_kwargs say otherwise (e.g. ``stderr=STDOUT``)."""
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
