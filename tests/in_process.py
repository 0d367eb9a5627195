"""Running a ``kt-*`` tool inside the test process, as its console script would run in a process of its own.

A tool defines its flags on absl's global ``FLAGS`` when its module is imported, and several tools define flags of
the same name (``--input``, ``--model``), so one process cannot hold two tools' modules at once. ``run_tool``
gives each run the state a fresh interpreter gives the program: the ``keras_transformer.cli`` modules imported
anew, with only their flags defined; ``sys.argv``, the standard streams, the working directory and the variables
the test sets; absl's run-once markers cleared. It then calls the console script's function
(``keras_transformer.cli.<tool>:run``), so the flag parsing, ``--help``, the one-line errors and the exit
statuses are the tool's own, and takes everything back afterwards: the test's own flags and modules, its
environment, streams, signal handlers, random state and Keras' global dtype policy.

What a tool in the test process shares with the test and cannot have of its own: TensorFlow's devices and thread
pools (already initialised, so a decoding tool keeps the test process's intra-op threads; ``init_devices`` is not
called), the variables read while TensorFlow is imported, and file descriptor 2 (``silence_native_stderr`` is not
called: native libraries write to the test's stderr). ``tests.support.run_cli`` sends a run whose environment
differs in such a variable, and anything signalled or run side by side, to a process of its own.

And the SavedModels it reads: ``loading.load_saved_model`` of a directory whose files (names, sizes, modification
times) are those of an earlier run's load gives that run's object back (``_saved_model_cache``), as a server keeps
a model loaded between requests. The tools only call a loaded SavedModel's functions; loading one and its
functions' first call took ~4 s of each run on the tests' tiny export. A changed or damaged directory is loaded
afresh, so its errors are the tool's own; ``tests/inference/test_export.py`` loads in fresh processes too.
"""

from __future__ import annotations

import collections
import contextlib
import io
import os
import random
import signal
import subprocess
import sys

import numpy as np
from absl import app, flags
from absl import logging as absl_logging

CLI_PACKAGE = "keras_transformer.cli"
SIGNALS = (signal.SIGINT, signal.SIGTERM)
CACHED_SAVED_MODELS = 4  # the most recently loaded; each holds its weights and traced functions
_loaded: collections.OrderedDict = collections.OrderedDict()  # {(directory, its files): loaded SavedModel}


class _Buffer(io.BytesIO):
    """A standard stream's bytes, kept when the text stream over it is closed or collected."""

    def close(self):
        pass


def _is_cli_module(name: str) -> bool:
    return name.startswith(CLI_PACKAGE + ".")


def _take_flags() -> dict:
    """Remove every flag but absl's own from ``FLAGS`` (a tool's, or a bench script's a test imported)
    -> {module name: [Flag]}."""
    taken = {module: list(module_flags) for module, module_flags in flags.FLAGS.flags_by_module_dict().items()
             if not module.startswith("absl.")}
    for name in {flag.name for module_flags in taken.values() for flag in module_flags}:
        delattr(flags.FLAGS, name)
    return taken


def _put_back_flags(taken: dict) -> None:
    for module, module_flags in taken.items():
        for flag in module_flags:
            flags.FLAGS[flag.name] = flag
            flags.FLAGS.register_flag_by_module(module, flag)


@contextlib.contextmanager
def _own_cli_modules():
    """No ``keras_transformer.cli`` submodule imported and no flag but absl's defined, as in a fresh interpreter;
    the test's own modules and flags back afterwards."""
    saved_modules = {name: module for name, module in sys.modules.items() if _is_cli_module(name)}
    saved_flags = _take_flags()
    for name in saved_modules:
        del sys.modules[name]
    try:
        yield
    finally:
        _take_flags()
        for name in [name for name in sys.modules if _is_cli_module(name)]:
            del sys.modules[name]
        sys.modules.update(saved_modules)
        _put_back_flags(saved_flags)


@contextlib.contextmanager
def _process_state(argv, env: dict, cwd, stdin: bytes, merge_stderr: bool):
    """argv, environment, working directory and standard streams for a run -> (stdout, stderr) byte buffers."""
    import keras

    saved = (sys.argv, sys.stdin, sys.stdout, sys.stderr, dict(os.environ), os.getcwd(), random.getstate(),
             np.random.get_state(), keras.config.dtype_policy(), {s: signal.getsignal(s) for s in SIGNALS},
             absl_logging.get_verbosity(), absl_logging.get_absl_handler().python_handler.stream)
    stdout = _Buffer()
    stderr = stdout if merge_stderr else _Buffer()
    sys.argv = list(argv)
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(stdout, encoding="utf-8", write_through=True)
    sys.stderr = sys.stdout if merge_stderr else io.TextIOWrapper(stderr, encoding="utf-8", errors="backslashreplace",
                                                                   write_through=True)
    absl_logging.get_absl_handler().python_handler.stream = sys.stderr
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if cwd is not None:
        os.chdir(cwd)
    try:
        yield stdout, stderr
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        (sys.argv, sys.stdin, sys.stdout, sys.stderr, environ, cwd, random_state, np_state, policy, handlers,
         verbosity, log_stream) = saved
        os.environ.clear()
        os.environ.update(environ)
        os.chdir(cwd)
        random.setstate(random_state)
        np.random.set_state(np_state)
        keras.config.set_dtype_policy(policy)
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        absl_logging.set_verbosity(verbosity)
        absl_logging.get_absl_handler().python_handler.stream = log_stream


def _directory_state(path) -> tuple:
    """(relative path, size, mtime in ns) of every file under ``path``, sorted: what a load of it reads."""
    found = []
    for root, _, names in os.walk(path):
        for name in names:
            stat = os.stat(os.path.join(root, name))
            found.append((os.path.relpath(os.path.join(root, name), path), stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(found))


@contextlib.contextmanager
def _saved_model_cache():
    """``loading.load_saved_model`` answered from ``_loaded`` for a directory unchanged since its load."""
    from keras_transformer.serving import loading

    load = loading.load_saved_model

    def cached(export_dir):
        key = (os.path.realpath(export_dir), _directory_state(export_dir))
        if key not in _loaded:
            _loaded[key] = load(export_dir)  # an error is raised, not kept
            while len(_loaded) > CACHED_SAVED_MODELS:
                _loaded.popitem(last=False)
        _loaded.move_to_end(key)
        return _loaded[key]

    loading.load_saved_model = cached
    try:
        yield
    finally:
        loading.load_saved_model = load


@contextlib.contextmanager
def _absl_run_once():
    """absl's ``app.run`` sets up once a process; a tool run in the test process gets a first time each time."""
    was_parsed = flags.FLAGS.is_parsed()
    app._run_init.done = app._register_and_parse_flags_with_usage.done = False
    try:
        yield
    finally:
        app._run_init.done = app._register_and_parse_flags_with_usage.done = False
        flags.FLAGS.unparse_flags()
        if was_parsed:
            flags.FLAGS.mark_as_parsed()


def _exit_status(code) -> int:
    """What a process exiting with ``sys.exit(code)`` returns to its parent."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def run_tool(tool: str, args, stdin: str = "", env=None, cwd=None, merge_stderr=False) -> subprocess.CompletedProcess:
    """``kt-<tool> args`` in this process -> ``CompletedProcess`` (text stdout and stderr, the exit status).

    tool: a module of keras_transformer/cli (``"translate"``). env: variables set for the run (None: removed).
    merge_stderr: stderr into stdout (``stderr=subprocess.STDOUT``; the result's stderr is then None).
    An exception the tool does not catch ends it as it would end the program: its traceback on stderr, status 1.
    """
    from keras_transformer import tf_setup

    args = [str(arg) for arg in args]
    argv = [f"kt-{tool.replace('_', '-')}", *args]
    no_op = lambda *_, **__: None  # noqa: E731  (the test process's devices and stderr stay as they are)
    saved_setup = tf_setup.init_devices, tf_setup.silence_native_stderr
    tf_setup.init_devices = tf_setup.silence_native_stderr = no_op
    try:
        with _own_cli_modules(), _absl_run_once(), _saved_model_cache(), _process_state(
                argv, env or {}, cwd, (stdin or "").encode(), merge_stderr) as (stdout, stderr):
            try:
                __import__(f"{CLI_PACKAGE}.{tool}", fromlist=["run"]).run()
                status = 0
            except SystemExit as stop:
                status = _exit_status(stop.code)
            except BaseException:  # noqa: BLE001  (what the interpreter would do with it)
                import traceback

                traceback.print_exc()
                status = 1
    finally:
        tf_setup.init_devices, tf_setup.silence_native_stderr = saved_setup
    text = lambda buffer: buffer.getvalue().decode("utf-8", errors="backslashreplace")  # noqa: E731
    return subprocess.CompletedProcess(argv, status, text(stdout), None if merge_stderr else text(stderr))
