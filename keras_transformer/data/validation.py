"""One streaming pass over aligned local text: checks, counts, and a seeded sample for SentencePiece.

``tf.data`` reads local corpora (``corpora.py``) but cannot say *where* a file
is bad, so before a local split is used one Python pass reads its shard pairs
in binary, line by line (plain or gzip), never holding a file in memory:

* the two sides must have as many lines -> ``ValueError`` naming both files and counts;
* every line must be UTF-8 -> ``ValueError`` naming the file and the line;
* pairs with an empty or whitespace-only side are counted (the first 10 lines
  logged); the pipeline drops them in-graph with the same rule (ASCII
  whitespace, as ``tf.strings.strip``);
* at most ``ceil(sample_sentences / 2)`` non-empty pairs are drawn by a seeded
  reservoir (Li's Algorithm L) and written, one sentence per line, source then
  target, for the tokenizer (§5.1's BPE) to train on. A corpus no larger than
  the sample is taken whole, in file order.

Lines split on '\\n' only. ``TextLineDataset`` removes every '\\r' of a line
(``read_lines`` drops only a final one), so lines holding a '\\r' before their
end are counted and logged, and the sample drops '\\r' as the pipeline does.

The result is cached in ``<cache_dir>/<fingerprint>.json`` (the sample beside
it), keyed by the shard files' resolved paths, sizes and mtimes, and kept for
the process: a second start or a resume does not read the corpus again.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import itertools
import json
import math
import os
import random
import time
import zlib
from pathlib import Path
from typing import BinaryIO, Dict, Iterator, List, Optional, Sequence, Tuple

from absl import logging

Shard = Tuple[Path, Path]  # (source file, target file), line-aligned
_SHOWN = 10  # skipped lines named in the log
_memo: Dict[str, "CorpusCheck"] = {}  # fingerprint -> stats of this process's passes


@dataclasses.dataclass(frozen=True)
class CorpusCheck:
    """What one pass over a split's shards found; ``sample_path`` is set when a sample was drawn."""

    fingerprint: str
    pairs_read: int
    empty_skipped: int
    empty_lines: Tuple[str, ...]  # the first skipped pairs' line numbers ("<file>:<line>" for shards)
    carriage_returns: int  # lines with a '\r' before their end, which TextLineDataset removes
    sample_pairs: int = 0
    sample_path: Optional[str] = None


def fingerprint(shards: Sequence[Shard], mtime: bool = True) -> str:
    """A short hash of every shard file's resolved path, size and (``mtime``) mtime; the same for either direction.

    The check's cache includes mtimes (an edited file is checked again); names that must survive a
    copy of the same files, such as the tokenizer's cache key, leave them out.
    """
    parts = []
    for path in (p for shard in shards for p in shard):
        st = path.stat()
        parts.append(f"{path.resolve()}:{st.st_size}" + (f":{st.st_mtime_ns}" if mtime else ""))
    return hashlib.sha256("|".join(sorted(parts)).encode()).hexdigest()[:10]


def open_binary(path: Path) -> BinaryIO:
    """``path`` for binary reading, gunzipped when it ends in ``.gz``."""
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb", buffering=1 << 20)


def unreadable(path: Path, error: Exception, lines_read: Optional[int] = None) -> ValueError:
    """The error for a file that cannot be read to its end: a damaged or cut-short gzip stream, an I/O error."""
    what = "damaged gzip data" if Path(path).suffix == ".gz" else "a read error"
    where = "" if lines_read is None else f" after line {lines_read}"
    return ValueError(f"{path}: {what}{where} ({' '.join(str(error).split()) or type(error).__name__})")


def iter_lines(path: Path, f: BinaryIO) -> Iterator[bytes]:
    """The lines of ``f``, opened from ``path``; one that cannot be read is :func:`unreadable`'s ValueError."""
    n = 0
    try:
        for n, line in enumerate(f, 1):
            yield line
    except (OSError, EOFError, zlib.error) as e:  # gzip: BadGzipFile (an OSError), EOFError, zlib.error
        raise unreadable(path, e, n) from None


def aligned_lines(source: Path, target: Path) -> Iterator[Tuple[int, bytes, bytes]]:
    """(line number from 1, source line, target line), without the '\\n'; checks as it goes.

    Raises ValueError on invalid UTF-8 (file and line), on a file that cannot be read
    to its end (a damaged gzip stream: file and the last line read) and, at the end, when the
    line counts differ (both files and counts).
    """
    with open_binary(source) as fs, open_binary(target) as ft:
        for n, (x, y) in enumerate(itertools.zip_longest(iter_lines(source, fs), iter_lines(target, ft)), 1):
            if x is None or y is None:  # one file ended first: count both (only on this error path)
                raise ValueError(f"line counts differ: {source} has {_count_lines(source)} lines, "
                                 f"{target} has {_count_lines(target)}")
            try:
                x.decode("utf-8")
                y.decode("utf-8")
            except UnicodeDecodeError:
                _raise_invalid(((source, x), (target, y)), n)
            yield n, x.rstrip(b"\n"), y.rstrip(b"\n")


def _raise_invalid(lines, n: int) -> None:
    for path, line in lines:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: invalid UTF-8 on line {n} (byte {e.start} of the line)") from None


def _count_lines(path: Path) -> int:
    with open_binary(path) as f:
        return sum(1 for _ in iter_lines(path, f))


def _scan(shards: Sequence[Shard], sample_pairs: int, seed: int):
    """The pass itself: (pairs_read, empty lines, carriage returns, reservoir of (source, target) bytes)."""
    rng = random.Random(seed)
    xs: List[bytes] = []
    ys: List[bytes] = []
    read = kept = carriage = 0
    skipped: List[str] = []
    skipped_count = 0
    w, pick = 1.0, -1  # Algorithm L: the next kept pair's index to enter the reservoir
    for source, target in shards:
        where = "" if len(shards) == 1 else f"{source.name}:"
        for n, x, y in aligned_lines(source, target):
            read += 1
            if (b"\r" in x or b"\r" in y) and (b"\r" in x[:-1] or b"\r" in y[:-1]):
                carriage += 1
            if not x.strip() or not y.strip():
                skipped_count += 1
                if len(skipped) < _SHOWN:
                    skipped.append(f"{where}{n}")
                continue
            if kept < sample_pairs:
                xs.append(x)
                ys.append(y)
                if kept == sample_pairs - 1:  # full: draw the first index to replace
                    w = math.exp(math.log(_uniform(rng)) / sample_pairs)
                    pick = kept + int(math.log(_uniform(rng)) / math.log1p(-w)) + 1
            elif kept == pick:
                slot = rng.randrange(sample_pairs)
                xs[slot], ys[slot] = x, y
                w *= math.exp(math.log(_uniform(rng)) / sample_pairs)
                pick += int(math.log(_uniform(rng)) / math.log1p(-w)) + 1
            kept += 1
    return read, skipped_count, tuple(skipped), carriage, xs, ys


def _uniform(rng: random.Random) -> float:
    """A uniform draw in the open interval (0, 1) (Algorithm L takes logs of it and of 1 - W)."""
    u = rng.random()
    while not 0.0 < u < 1.0:
        u = rng.random()
    return u


def _write_atomic(path: Path, chunks) -> None:
    partial = path.with_name(path.name + ".part")
    with open(partial, "wb") as f:
        for chunk in chunks:
            f.write(chunk)
    os.replace(partial, path)  # a crash never leaves a truncated file under the final name


def _sample_lines(xs: List[bytes], ys: List[bytes]) -> Iterator[bytes]:
    for x, y in zip(xs, ys):  # '\r' removed as TextLineDataset removes it
        yield x.replace(b"\r", b"") + b"\n" + y.replace(b"\r", b"") + b"\n"


def check(shards: Sequence[Shard], *, cache_dir=None, sample_sentences: int = 0, seed: int = 1) -> CorpusCheck:
    """Checks and counts ``shards`` (and samples them for the tokenizer), or reads the cached result.

    sample_sentences: sentences to sample, 2 per pair (0: none). A sample needs
    ``cache_dir``, where it is written as text. Raises ValueError on a line-count
    mismatch or invalid UTF-8 (module docstring).
    """
    shards = [(Path(s), Path(t)) for s, t in shards]
    key = fingerprint(shards)
    sample_pairs = -(-sample_sentences // 2)
    if sample_pairs and cache_dir is None:
        raise ValueError("sample_sentences: a sample is written to cache_dir, which is not given")
    stats_path = sample_path = None
    if cache_dir is not None:
        stats_path = Path(cache_dir) / f"{key}.json"
        if sample_pairs:
            sample_path = Path(cache_dir) / f"{key}.sample{sample_pairs}-seed{seed}.txt"
        if stats_path.is_file() and (sample_path is None or sample_path.is_file()):
            record = json.loads(stats_path.read_text())
            cached = CorpusCheck(key, record["pairs_read"], record["empty_skipped"], tuple(record["empty_lines"]),
                                 record["carriage_returns"])
            _memo[key] = cached
            logging.info("corpus check of %s from %s", shards[0][0], stats_path)
            _log(shards, cached)
            if sample_path is None:
                return cached
            return dataclasses.replace(cached, sample_pairs=_count_lines(sample_path) // 2,
                                       sample_path=str(sample_path))
    if key in _memo and sample_path is None:  # checked earlier in this process
        if stats_path is not None:
            _write_stats(stats_path, shards, _memo[key])
        return _memo[key]
    start = time.time()
    read, skipped_count, skipped, carriage, xs, ys = _scan(shards, sample_pairs, seed)
    result = CorpusCheck(key, read, skipped_count, skipped, carriage)
    seconds = max(time.time() - start, 1e-9)
    logging.info("checked %d pairs in %d shard(s) in %.1f s (%.0f pairs/s): %s", read, len(shards), seconds,
                 read / seconds, shards[0][0])
    _log(shards, result)
    _memo[key] = result
    if cache_dir is not None:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        if sample_path is not None:
            _write_atomic(sample_path, _sample_lines(xs, ys))
        _write_stats(stats_path, shards, result)
    if sample_path is None:
        return result
    return dataclasses.replace(result, sample_pairs=len(xs), sample_path=str(sample_path))


def _write_stats(path: Path, shards: Sequence[Shard], result: CorpusCheck) -> None:
    record = dict(dataclasses.asdict(result), files=[str(p.resolve()) for shard in shards for p in shard])
    del record["sample_pairs"], record["sample_path"]
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(path, [json.dumps(record, indent=1).encode()])


def _log(shards: Sequence[Shard], result: CorpusCheck) -> None:
    if result.empty_skipped:
        more = ", ..." if result.empty_skipped > len(result.empty_lines) else ""
        logging.warning("%s / %s: skipped %d pairs with an empty or whitespace-only side (lines %s%s)",
                        shards[0][0], shards[0][1], result.empty_skipped, ", ".join(result.empty_lines), more)
    if result.carriage_returns:
        logging.warning("%s / %s: %d lines hold a '\\r' before their end; tf.data's TextLineDataset removes it",
                        shards[0][0], shards[0][1], result.carriage_returns)
