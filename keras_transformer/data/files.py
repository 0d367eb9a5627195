"""Reading and writing the text files a user hands the tools: plain or .gz UTF-8, stdin and stdout as '-'.

    read_text(path) -> [line]      a file's lines (a ValueError or FileNotFoundError naming it)
    read_input(path) -> [line]     the same, or stdin for '-'
    is_stream(path) -> bool        '-' on a terminal or a pipe: lines come as a person or a program writes them
    stream_chunks(idle_seconds, max_lines) -> [[line], ...]   stdin's lines as they arrive, a chunk at a time
    check_output(path)             can it take output? checked before the work whose result goes there
    write_lines(path, lines)       whole or not at all; '-' is stdout
    read_lines(path) -> [line]     no checks: what the corpus readers use
    file_fingerprint(path) -> {size, mtime_ns, edges_sha256}   names a file's content without reading it all
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import select
import stat
import sys
import zlib
from pathlib import Path
from typing import Iterator, List, Sequence, Union

from keras_transformer.data import validation


def read_text(path: Union[str, os.PathLike]) -> List[str]:
    """Lines of a plain or .gz UTF-8 file (a trailing newline does not add an empty line)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a directory, not a text file")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        return read_lines(path)
    except OSError as e:  # e.g. permission denied
        raise ValueError(f"{path}: {e.strerror or e}") from None


def check_output(path) -> None:
    """Raise ValueError when ``path`` ('-': stdout) cannot take output: stdout closed, a directory, a parent that is
    a file. Called before the work whose result goes there, so that no translation is done for nothing."""
    if str(path) == "-":
        if sys.stdout is None:
            raise ValueError("stdout is closed; give a file with --output=FILE")
        return
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a directory; give a file name")
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise ValueError(f"{path}: {parent} is not a directory")


def write_lines(path, lines: Sequence[str]) -> None:
    """One line each, UTF-8, final newline; '-' is stdout.

    A file is written whole or not at all: into ``<path>.partial-<pid>`` beside it, then renamed over ``path``,
    so a full disk or a kill never leaves half an output or destroys an older file of that name. OSError
    (naming the file) when it cannot be written.
    """
    text = "".join(f"{line}\n" for line in lines)
    if str(path) == "-":
        check_output(path)
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.partial-{os.getpid()}")
    try:
        with open(partial, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(partial, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise OSError(e.errno, e.strerror, str(path)) from None  # named by the file asked for, not the partial one


def read_input(path) -> List[str]:
    """Lines of a plain/.gz file, or of stdin for '-'. ValueError (naming stdin or the file, and the line) when
    stdin is closed or the text cannot be read."""
    if str(path) == "-":
        if sys.stdin is None:
            raise ValueError("stdin is closed; give a file with --input=FILE")
        raw = sys.stdin.buffer.read()
        try:
            data = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            line = raw.count(b"\n", 0, e.start) + 1
            raise ValueError(f"stdin: invalid UTF-8 on line {line} (byte {e.start})") from None
        lines = data.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return [line[:-1] if line.endswith("\r") else line for line in lines]
    return read_text(path)


def is_stream(path) -> bool:
    """Whether --input ``path`` is stdin on a terminal, a pipe or a socket (not a file redirected with '<')."""
    if str(path) != "-" or sys.stdin is None:
        return False
    try:
        return not stat.S_ISREG(os.fstat(sys.stdin.fileno()).st_mode)
    except (OSError, ValueError):  # no file descriptor (a test's replaced stdin): read it whole
        return False


def stream_chunks(idle_seconds: float = 0.05, max_lines: int = 2048) -> Iterator[List[str]]:
    """stdin's lines, a chunk each time no more input is waiting for ``idle_seconds`` (or ``max_lines`` are in),
    so that a person typing, or a program that writes a line and waits for its answer, gets it at once.

    Lines are split and decoded as ``read_input`` does ('\n', a CR before it dropped, UTF-8: a ValueError naming
    the line and byte); the last line may lack its newline.
    """
    fd = sys.stdin.fileno()
    buffer, pending, offset, number = b"", [], 0, 0  # unread bytes, lines not yet yielded, bytes and lines before

    def decode(raw: bytes) -> str:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"stdin: invalid UTF-8 on line {number + 1} (byte {offset + e.start})") from None
        return text[:-1] if text.endswith("\r") else text

    while True:
        waiting = select.select([fd], [], [], idle_seconds if pending else None)[0]
        data = os.read(fd, 1 << 16) if waiting else b""
        ended = waiting and not data
        buffer += data
        *complete, buffer = buffer.split(b"\n")
        if ended and buffer:
            complete.append(buffer)  # a last line without its newline
        for raw in complete:
            pending.append(decode(raw))
            offset, number = offset + len(raw) + 1, number + 1
        if pending and (not waiting or ended or len(pending) >= max_lines):
            yield pending
            pending = []
        if ended:
            return


def read_lines(path: Path) -> List[str]:
    """One sentence per line, UTF-8, plain or gzip. Splits on '\\n' only (not on U+2028 etc.)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        try:
            data = f.read()
        except (OSError, EOFError, zlib.error) as e:  # a damaged or cut-short gzip stream
            raise validation.unreadable(path, e) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ValueError(f"{path}: invalid UTF-8 on line {line} (byte {e.start})") from None
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it does not start a new one
    return [line[:-1] if line.endswith("\r") else line for line in lines]


EDGE_BYTES = 4096  # hashed at each end of a local file


def file_fingerprint(path: Path) -> dict:
    """A file's size, mtime and a SHA-256 of its first and last ``EDGE_BYTES`` (never a full read)."""
    st = path.stat()
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        digest.update(f.read(EDGE_BYTES))
        if st.st_size > EDGE_BYTES:
            f.seek(max(EDGE_BYTES, st.st_size - EDGE_BYTES))
            digest.update(f.read(EDGE_BYTES))
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "edges_sha256": digest.hexdigest()}
