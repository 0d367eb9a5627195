"""Decoding many lines in batches of similar length, whatever decodes them.

    is_blank(line) -> bool   empty or whitespace only: never decoded (its output is empty, its score 0)
    length_batches(lines, batch_size) -> [[index, ...], ...]   the lines that are not blank, by increasing length
    run_batches(fn, lines, batch_size, options, in_flight=1, aligned=None) -> (indices of a batch, fn's outputs), ...
    one_line(text) -> str   UTF-8 bytes as one line of text

Lines are sorted by length (words, then characters) so that short lines are not padded to long ones; callers
put the outputs back in input order by the indices. A blank line is in no batch: its output is the empty one,
as an exported signature answers a blank input (``serving.module``), and the model never sees it.
"""

from __future__ import annotations

import collections
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import tensorflow as tf


def is_blank(line: str) -> bool:
    """Empty or whitespace only (str.isspace's characters; ``serving.checks.BLANK_PATTERN`` in the graph)."""
    return not line.strip()


def length_batches(lines: Sequence[str], batch_size: int) -> List[List[int]]:
    """Indices of the lines that are not blank, in batches of at most ``batch_size``, by increasing length (words,
    then characters)."""
    if batch_size < 1:
        raise ValueError(f"batch_size: must be >= 1, got {batch_size}")
    kept = [i for i, line in enumerate(lines) if not is_blank(line)]
    order = sorted(kept, key=lambda i: (len(lines[i].split()), len(lines[i])))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def run_batches(fn: Callable, lines: Sequence[str], batch_size: int, options: Tuple[int, float, int],
                in_flight: int = 1, aligned: Optional[Sequence[str]] = None) -> Iterator[Tuple[List[int], dict]]:
    """Yields (indices of the batch's lines, ``fn(inputs [B] string, beam_size, alpha, extra_length)``) over
    length-sorted batches, in order; ``options`` = (beam_size, alpha, extra_length). ``aligned``: a string per line
    (a target prefix, constraints), passed after the inputs: ``fn(inputs, aligned [B] string, beam_size, ...)``.

    ``in_flight`` > 1 keeps that many batches decoding at once, each from its own thread (a TensorFlow function
    releases the GIL while it runs): a core that has finished its part of one batch's search starts on the next
    batch instead of waiting for the slowest item. Each batch's outputs are the same.
    """
    beam_size, alpha, extra_length = options
    tensors = (tf.constant(beam_size, tf.int32), tf.constant(alpha, tf.float32), tf.constant(extra_length, tf.int32))

    def decode(batch):
        columns = (lines,) if aligned is None else (lines, aligned)
        return fn(*(tf.constant([column[i] for i in batch], tf.string) for column in columns), *tensors)

    batches = length_batches(lines, batch_size)
    if in_flight <= 1:
        for batch in batches:
            yield batch, decode(batch)
        return
    with ThreadPoolExecutor(in_flight) as pool:
        pending = collections.deque()
        for batch in batches:
            pending.append((batch, pool.submit(decode, batch)))
            if len(pending) == in_flight:
                batch, future = pending.popleft()
                yield batch, future.result()
        for batch, future in pending:
            yield batch, future.result()


# Every character str.splitlines() breaks at: none may split an output line, whatever reads it.
_LINE_BREAKS = {ord(c): " " for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}


def one_line(text: bytes) -> str:
    """UTF-8 bytes -> str with each line break a space, so that output line i stays the output of line i."""
    return text.decode("utf-8", errors="replace").translate(_LINE_BREAKS)
