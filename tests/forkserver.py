"""A fork server for the programs the tests start: TensorFlow imported once, each program a fork of that process.

Importing TensorFlow takes ~6 s of CPU on a 2-core AVX2 machine and the suite starts a few hundred programs, so a
fresh interpreter for each costs a large share of the suite's time. The server is a process that imports the
package (TensorFlow and Keras with it) and nothing else: it runs no TensorFlow op, so no runtime, thread pool or
device exists yet when it forks. For each program it forks a supervisor, which forks the program and reports its
process id and, at the end, its exit code. The program is the fork: it gets its own standard streams, working
directory, environment and arguments, and runs as ``python -m module`` (or ``python script.py``) would, from its
first line, with the program's own modules not yet imported.

Only what the server cannot reproduce goes to a fresh interpreter (``tests.support`` decides): an environment
that differs in a variable read while TensorFlow is imported (anything not in ``RUNTIME_VARIABLES``), or a
``subprocess`` option it does not pass on (``preexec_fn``, ...). ``tests/test_forkserver.py`` checks that a
program sees the same process as it would in a fresh interpreter.

Protocol, one Unix-socket connection per program: the client sends a length-prefixed JSON request (argv, env,
cwd) with the program's stdin, stdout and stderr as passed file descriptors; the server answers ``pid N`` when
the program has started and ``exit CODE`` (Popen's convention: -N for signal N) when it has ended.
"""

import io
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import traceback

# Variables a program may set differently from the server's environment: read at run time, not while TensorFlow
# is imported (pytest sets PYTEST_CURRENT_TEST for each test). The project's KT_ variables are read at run time
# but for KT_VERBOSE_TF. Any other difference (TF_CPP_MIN_LOG_LEVEL, TF_ENABLE_ONEDNN_OPTS, KERAS_BACKEND,
# PYTHONPATH, ...) sends the program to a fresh interpreter.
RUNTIME_VARIABLES = frozenset({"TF_CONFIG", "PYTHONUNBUFFERED", "PYTEST_CURRENT_TEST"})
IMPORT_TIME_KT_VARIABLES = frozenset({"KT_VERBOSE_TF"})
_HEADER = struct.Struct("!I")


def serves(env, server_env) -> bool:
    """Whether a program with environment ``env`` runs the same in a fork of a server started with ``server_env``."""
    names = {name for name in set(env) | set(server_env) if name not in RUNTIME_VARIABLES
             and (not name.startswith("KT_") or name in IMPORT_TIME_KT_VARIABLES)}
    return all(env.get(name) == server_env.get(name) for name in names)


# --- the server -------------------------------------------------------------------------------------------------

def _receive_request(conn):
    """-> (request dict, [stdin, stdout, stderr] file descriptors)."""
    data, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
    while len(data) < _HEADER.size:
        data += conn.recv(_HEADER.size - len(data))
    (length,) = _HEADER.unpack(data)
    payload = b""
    while len(payload) < length:
        chunk = conn.recv(length - len(payload))
        if not chunk:
            raise ConnectionError("request cut short")
        payload += chunk
    if len(fds) != 3:
        raise ConnectionError(f"expected 3 file descriptors, got {len(fds)}")
    return json.loads(payload), fds


def _standard_streams(unbuffered):
    """New sys.stdin/stdout/stderr over descriptors 0-2, buffered as a starting interpreter buffers them."""
    def text(fd, mode, line_buffering, write_through=False):
        raw = io.FileIO(fd, mode, closefd=False)
        buffered = raw if write_through and mode == "w" else (
            io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw))
        return io.TextIOWrapper(buffered, encoding=sys.stdout.encoding, errors="backslashreplace" if fd == 2 else
                                sys.stdout.errors, line_buffering=line_buffering, write_through=write_through)

    sys.stdin = sys.__stdin__ = text(0, "r", False)
    sys.stdout = sys.__stdout__ = text(1, "w", os.isatty(1), write_through=unbuffered)
    sys.stderr = sys.__stderr__ = text(2, "w", True, write_through=unbuffered)


def _run_program(request, fds):
    """In the forked program: take its streams, directory, environment and arguments, run it, exit. No return."""
    code = 1
    try:
        high = [os.dup(fd) for fd in fds]  # out of 0-2 first: a passed descriptor may be one of them
        for fd in fds:
            os.close(fd)
        for target, fd in enumerate(high):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        _standard_streams(bool(request["env"].get("PYTHONUNBUFFERED")))
        program, args = request["argv"][0], request["argv"][1:]
        import runpy

        sys.argv = [program, *args]  # for a module, runpy puts its file in sys.argv[0], as -m does
        if program.endswith(".py"):
            sys.path[0] = os.path.dirname(os.path.abspath(program))
            runner = lambda: runpy.run_path(program, run_name="__main__")  # noqa: E731
        else:
            sys.path[0] = os.getcwd()
            runner = lambda: runpy.run_module(program, run_name="__main__", alter_sys=True)  # noqa: E731
        try:
            runner()
            code = 0
        except SystemExit as exit_:
            code = _exit_code(exit_.code)
        except KeyboardInterrupt:
            traceback.print_exc()
            code = -signal.SIGINT
        except BaseException:  # noqa: BLE001  (reported as the interpreter reports it, exit 1)
            traceback.print_exc()
            code = 1
        threading._shutdown()  # what the interpreter does at exit: wait for non-daemon threads, then atexit
        import atexit

        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001  (a closed or broken stream: nothing more to say)
                pass
        if code < 0:  # an uncaught KeyboardInterrupt ends the interpreter by SIGINT
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        os._exit(code)


def _exit_code(value) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def _supervise(conn, request, fds):
    """In the supervisor fork: start the program, report its pid, wait, report its exit code. No return."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the server ignores it; waitpid needs the default
    pid = os.fork()
    if pid == 0:
        conn.close()
        _run_program(request, fds)
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall(f"pid {pid}\n".encode())
        _, status = os.waitpid(pid, 0)
        conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
    finally:
        os._exit(0)


def serve(path):
    """Listen on ``path`` until standard input (the client's lifeline) closes."""
    import keras_transformer  # noqa: F401  (TensorFlow, with the package's import-time settings)
    import keras  # noqa: F401

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors reap themselves
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    while True:
        readable, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in readable and not os.read(sys.stdin.fileno(), 1):
            return
        if listener not in readable:
            continue
        conn, _ = listener.accept()
        try:
            request, fds = _receive_request(conn)
        except (OSError, ValueError) as error:
            print(f"forkserver: bad request: {error}", file=sys.stderr)
            conn.close()
            continue
        if os.fork() == 0:
            listener.close()
            _supervise(conn, request, fds)
        conn.close()
        for fd in fds:
            os.close(fd)


# --- the client -------------------------------------------------------------------------------------------------

class ForkedProcess:
    """A program started by the server, with the parts of ``subprocess.Popen`` the tests use."""

    def __init__(self, path, command, env, cwd, stdin, stdout, stderr):
        """command: ``[python, -m, module, *args]`` or ``[python, script, *args]``, as for ``Popen``."""
        self.args, self.returncode = command, None
        argv = command[2:] if command[1] == "-m" else command[1:]
        self.stdin = self.stdout = self.stderr = None
        child_fds, close_after = [], []
        for number, spec in enumerate((stdin, stdout, stderr)):
            if spec == subprocess.STDOUT and number == 2:
                child_fds.append(child_fds[1])
                continue
            if spec == subprocess.PIPE:
                read, write = os.pipe()
                mine, theirs = (write, read) if number == 0 else (read, write)
                setattr(self, ("stdin", "stdout", "stderr")[number], open(mine, "w" if number == 0 else "r"))
                child_fds.append(theirs)
                close_after.append(theirs)
            elif spec == subprocess.DEVNULL:
                fd = os.open(os.devnull, os.O_RDWR)
                child_fds.append(fd)
                close_after.append(fd)
            elif spec is None:
                child_fds.append(number)
            else:
                child_fds.append(spec if isinstance(spec, int) else spec.fileno())
        payload = json.dumps({"argv": [os.fspath(a) for a in argv], "env": env, "cwd": os.fspath(cwd)}).encode()
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._conn.connect(path)
            socket.send_fds(self._conn, [_HEADER.pack(len(payload))], child_fds)
            self._conn.sendall(payload)
            self._reader = self._conn.makefile("r")
            line = self._reader.readline()
        finally:
            for fd in close_after:
                os.close(fd)
        if not line.startswith("pid "):
            raise OSError(f"the fork server did not start {argv[0]}")
        self.pid = int(line.split()[1])

    def poll(self):
        if self.returncode is None and select.select([self._conn], [], [], 0)[0]:
            self._read_exit()
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None:
            if not select.select([self._conn], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._read_exit()
        return self.returncode

    def _read_exit(self):
        line = self._reader.readline()
        self.returncode = int(line.split()[1]) if line.startswith("exit ") else -signal.SIGKILL
        self._reader.close()
        self._conn.close()

    def communicate(self, input=None, timeout=None):
        """Write ``input``, read stdout and stderr to their ends, wait -> (stdout, stderr)."""
        results = {}

        def drain(name):
            stream = getattr(self, name)
            results[name] = stream.read()
            stream.close()

        readers = [threading.Thread(target=drain, args=(name,), daemon=True)
                   for name in ("stdout", "stderr") if getattr(self, name) is not None]
        for reader in readers:
            reader.start()
        if self.stdin is not None:
            try:
                if input:
                    self.stdin.write(input)
                self.stdin.close()
            except BrokenPipeError:
                pass
        self.wait(timeout)
        for reader in readers:
            reader.join()
        return results.get("stdout"), results.get("stderr")

    def send_signal(self, signum):
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)


if __name__ == "__main__":
    serve(sys.argv[1])
