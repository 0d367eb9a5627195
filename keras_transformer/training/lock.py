"""One training run per work directory: ``<workdir>/train.lock``, held while the run lives.

    with workdir_lock.hold(workdir):   # raises WorkdirBusy naming the owner (pid, host, start time, command)
        ...

The lock is an advisory ``flock`` on the file, so the kernel releases it when its process dies, however it
dies: a lock file left by a killed run is stale, detected as such (nobody holds the flock) and taken over,
with a note naming the dead owner. The file records its owner (pid, host, start time, command line) for the
message a second run gets. Where the file system has no ``flock`` (some network mounts), the owner's pid is
checked instead when it ran on this host; a lock from another host is then honoured until removed by hand.
The standard library's ``fcntl.flock``, not the ``filelock`` package: that would add a dependency and keeps no
owner to name.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
from typing import Iterator, Optional

from keras_transformer.workdir import WorkDir



class WorkdirBusy(ValueError):
    """Another live run owns the work directory."""


def _owner() -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "command": " ".join([os.path.basename(sys.argv[0] or "python")] + sys.argv[1:])[:500]}


def _describe(owner: Optional[dict], path: str) -> str:
    if not owner:
        return f"another process (lock file {path})"
    return (f"{owner.get('command') or 'another run'} (pid {owner.get('pid')} on {owner.get('host')}, since "
            f"{owner.get('started')}; lock file {path})")


def _read(fd: int) -> Optional[dict]:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return json.loads(os.read(fd, 1 << 16).decode() or "null")
    except (OSError, ValueError):
        return None


def _alive_here(owner: Optional[dict]) -> bool:
    """Whether ``owner`` may still be running: its pid exists on this host, or it ran on another host."""
    if not owner or not isinstance(owner.get("pid"), int):
        return False
    if owner.get("host") != socket.gethostname():
        return True  # cannot tell; honour it
    try:
        os.kill(owner["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, another user's
    return True


@contextlib.contextmanager
def hold(workdir, log=None) -> Iterator[str]:
    """Own ``workdir`` for the duration of the block; yields the lock path. The directory is created if needed
    (and removed again if the block left it empty).

    ``log(message)`` receives the note when a stale lock is taken over (default: stderr).
    """
    created = not os.path.isdir(workdir)
    os.makedirs(workdir, exist_ok=True)
    path = str(WorkDir(workdir).lock)
    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        previous = _read(fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise WorkdirBusy(f"{workdir} is in use by {_describe(previous, path)}; wait for that run to end, "
                                  "or train in another --workdir") from None
            if _alive_here(previous) and previous.get("pid") != os.getpid():  # no flock here: go by the pid
                os.close(fd)
                raise WorkdirBusy(f"{workdir} is in use by {_describe(previous, path)}; if that run is gone, "
                                  f"remove {path}") from None
        try:  # the file may have been removed (and recreated) by its last owner between our open and our lock
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    if previous:
        log(f"note: took over the stale lock of {_describe(previous, path)}: that run is no longer running")
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, (json.dumps(_owner()) + "\n").encode())
    os.fsync(fd)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.remove(path)  # while still holding it, so no one locks a file about to vanish
        os.close(fd)
        if created:
            with contextlib.suppress(OSError):
                os.rmdir(workdir)  # a run refused before writing anything leaves no empty directory behind
