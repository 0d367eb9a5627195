"""Helpers for the fault-injection tests: one-line refusals, snapshots of a directory, a small tmpfs."""

import contextlib
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests import support as shared


def run_cli(program, *args, stdin=None, timeout=240, **run_kwargs):
    """``tests.support.run_cli`` -> CompletedProcess (text), whatever its exit code."""
    return shared.run_cli(program, *args, stdin=stdin, check=False, timeout=timeout, **run_kwargs)


def assert_one_error_line(result, *needles: str) -> str:
    """Exit code 2 and a stderr of exactly one line, ``error: ...``, holding every needle; returns that line."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, shared.failure_message(result, "2 and one stderr line")
    assert lines[0].startswith("error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def snapshot(directory) -> dict:
    """{relative path: (kind, size, mtime_ns, sha256)} of everything under ``directory``: equal snapshots mean
    nothing in it was written, created, removed or touched."""
    directory = Path(directory)
    found = {}
    for path in sorted(directory.rglob("*")):
        st = path.lstat()
        if path.is_file():
            found[str(path.relative_to(directory))] = ("file", st.st_size, st.st_mtime_ns,
                                                       hashlib.sha256(path.read_bytes()).hexdigest())
        else:
            found[str(path.relative_to(directory))] = ("dir", 0, 0, "")
    return found


def copy_tree(source, target) -> Path:
    shutil.copytree(source, target)
    return Path(target)


@contextlib.contextmanager
def tmpfs(path, size: str, read_only: bool = False):
    """A tmpfs of ``size`` (e.g. "1000k") mounted at ``path`` for the block; skips the test where it cannot be
    mounted (not root, or no mount permission in this container)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    os.makedirs(path, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield Path(path)
    finally:
        subprocess.run(["umount", str(path)], check=False)
