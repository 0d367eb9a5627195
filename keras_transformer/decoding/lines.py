"""Decoding many lines in batches of similar length, whatever decodes them.

    length_batches(lines, batch_size) -> [[index, ...], ...]   by increasing length
    run_batches(fn, lines, batch_size, options) -> (indices of a batch, fn's outputs for it), batch by batch
    one_line(text) -> str   UTF-8 bytes as one line of text

Lines are sorted by length (words, then characters) so that short lines are not padded to long ones; callers
put the outputs back in input order by the indices.
"""

from __future__ import annotations

from typing import Callable, Iterator, List, Sequence, Tuple

import tensorflow as tf


def length_batches(lines: Sequence[str], batch_size: int) -> List[List[int]]:
    """Indices of ``lines`` in batches of at most ``batch_size``, by increasing length (words, then characters)."""
    if batch_size < 1:
        raise ValueError(f"batch_size: must be >= 1, got {batch_size}")
    order = sorted(range(len(lines)), key=lambda i: (len(lines[i].split()), len(lines[i])))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def run_batches(fn: Callable, lines: Sequence[str], batch_size: int,
                options: Tuple[int, float, int]) -> Iterator[Tuple[List[int], dict]]:
    """Yields (indices of the batch's lines, ``fn(inputs [B] string, beam_size, alpha, extra_length)``) over
    length-sorted batches; ``options`` = (beam_size, alpha, extra_length)."""
    beam_size, alpha, extra_length = options
    tensors = (tf.constant(beam_size, tf.int32), tf.constant(alpha, tf.float32), tf.constant(extra_length, tf.int32))
    for batch in length_batches(lines, batch_size):
        yield batch, fn(tf.constant([lines[i] for i in batch], tf.string), *tensors)


# Every character str.splitlines() breaks at: none may split an output line, whatever reads it.
_LINE_BREAKS = {ord(c): " " for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}


def one_line(text: bytes) -> str:
    """UTF-8 bytes -> str with each line break a space, so that output line i stays the output of line i."""
    return text.decode("utf-8", errors="replace").translate(_LINE_BREAKS)
