"""A decoder step's log-probabilities, normalised only where a search reads them.

    log P(y | prefix) = log softmax(z)_y = (z_y - m) - log Σ_v exp(z_v - m),      m = max_v z_v

A search reads the 2K best tokens of each row (beam search) or the best one
(greedy). Taking the log-softmax of all V columns and then banning tokens writes
two [N, V] tensors a step that are read only there. ``LogProbs`` keeps the
logits z [N, V] and each row's m and log Σ exp(z - m) [N, 1]; ``top_k`` ranks
the logits (the shift is the same across a row, so the order is the
log-probabilities') and normalises only the k it keeps. Tokens never to be
chosen (PAD and BOS, ``banned``) are dropped from each row's k + 2 best rather
than masked in all V columns; a parser's tree constraint, which differs from
row to row, sets its banned logits to NEG_INF (``ban``). The arithmetic is
``tf.nn.log_softmax``'s, (z - m) - log Σ exp(z - m), so the values kept are the
kernel's (tests/decoding/test_log_probs.py). The normaliser runs over every
token, banned ones included: a ban removes a token, it does not renormalise
the others.

The k best of a row come from ``top_k_by_blocks``: the same values and indices
as ``tf.math.top_k`` over all V, taken from the k column blocks with the
highest maxima.
"""

from __future__ import annotations

from typing import NamedTuple, Tuple, Union

import tensorflow as tf

NEG_INF = -1.0e9  # log-prob of a banned token and score of an empty n-best slot; finite (-inf gives NaN in sums)


def columns(x):
    """x's last dimension: a Python int where it is static, else a scalar tensor."""
    return x.shape[-1] if x.shape[-1] is not None else tf.shape(x)[-1]


def smallest(a, b):
    """min(a, b): a Python int where both are known when traced (static shapes for XLA), else a tensor."""
    a_known, b_known = tf.get_static_value(a), tf.get_static_value(b)
    return min(int(a_known), int(b_known)) if a_known is not None and b_known is not None else tf.minimum(a, b)


def _block_size(v):
    """The vocabulary block of ``top_k_by_blocks``: the smallest divisor of V in [64, 256], or None."""
    return next((b for b in range(64, 257) if v is not None and v % b == 0), None)


def top_k_by_blocks(x, k):
    """``tf.math.top_k(x, k)`` over the last axis of x [N, V]: the same values and indices (ties to the lower
    index), taken from the k column blocks with the highest maxima. Each of the k best lies in such a block
    (a block passed over has k blocks ahead of it whose maxima rank before all its elements), so one max over
    x and a top-k over [N, k * block] replace a top-k over all V. Plain ``tf.math.top_k`` where the static V
    has no block size (``_block_size``) or k is not below the number of blocks.
    """
    block = _block_size(x.shape[-1])
    if block is None:
        return tf.math.top_k(x, k=k)
    n, blocks = tf.shape(x)[0], x.shape[-1] // block

    def by_blocks():
        x_blocks = tf.reshape(x, [n, blocks, block])  # [N, V / b, b]
        _, best = tf.math.top_k(tf.reduce_max(x_blocks, axis=2), k=k)  # [N, k] block ids
        best = tf.sort(best, axis=1)  # in column order, so that ties still go to the lower index
        values, picked = tf.math.top_k(tf.reshape(tf.gather(x_blocks, best, batch_dims=1), [n, -1]), k=k)  # [N, k]
        return values, tf.gather(best, picked // block, batch_dims=1) * block + picked % block

    known = tf.get_static_value(k)  # a static k picks the way here (XLA compiles both sides of a tf.cond)
    if known is not None:
        return by_blocks() if known < blocks else tuple(tf.math.top_k(x, k=k))
    return tf.cond(tf.less(k, blocks), by_blocks, lambda: tuple(tf.math.top_k(x, k=k)))


class LogProbs(NamedTuple):
    """log P [N, V] = (logits - shift) - log_sum, evaluated only where read."""

    logits: tf.Tensor  # [N, V] float32 (NEG_INF where ``ban`` banned a token)
    shift: tf.Tensor  # [N, 1] m: each row's largest logit, banned tokens included
    log_sum: tf.Tensor  # [N, 1] log Σ_v exp(z_v - m)
    banned: Tuple[int, ...] = ()  # token ids never chosen in any row (PAD, BOS)

    @classmethod
    def from_logits(cls, logits, banned: Tuple[int, ...] = ()) -> "LogProbs":
        """logits [N, V] (any float dtype); banned: token ids never to be chosen."""
        logits = tf.cast(logits, tf.float32)
        shift = tf.reduce_max(logits, axis=-1, keepdims=True)  # [N, 1]
        log_sum = tf.math.log(tf.reduce_sum(tf.exp(logits - shift), axis=-1, keepdims=True))  # [N, 1]
        return cls(logits, shift, log_sum, tuple(banned))

    def ban(self, allowed) -> "LogProbs":
        """allowed [N, V] bool: the others are banned (NEG_INF), the normaliser unchanged."""
        return self._replace(logits=tf.where(allowed, self.logits, NEG_INF))

    def top_k(self, k):
        """(values [N, k] log P, ids [N, k] int32): each row's k most probable tokens that are not banned, best
        first (ties to the lower id, as ``tf.math.top_k``)."""
        if not self.banned:
            values, ids = top_k_by_blocks(self.logits, k)
        else:  # the k + |banned| best hold the k best allowed: drop the banned, keep the order
            values, ids = top_k_by_blocks(self.logits, smallest(k + len(self.banned), columns(self.logits)))
            allowed = tf.reduce_all(tf.not_equal(ids[:, :, None], self.banned), axis=2)  # [N, k + |banned|]
            values, picked = tf.math.top_k(tf.where(allowed, values, NEG_INF), k=k)  # [N, k]
            ids = tf.gather(ids, picked, batch_dims=1)
        return (values - self.shift) - self.log_sum, ids

    def dense(self):
        """[N, V] log P, banned tokens near NEG_INF."""
        logits = self.logits
        if self.banned:
            columns = tf.range(tf.shape(logits)[-1])[:, None]  # [V, 1]
            logits = tf.where(tf.reduce_any(tf.equal(columns, self.banned), axis=1)[None, :], NEG_INF, logits)
        return (logits - self.shift) - self.log_sum


def as_log_probs(log_probs: Union[LogProbs, tf.Tensor]) -> LogProbs:
    """A step's output as ``LogProbs``: a plain [N, V] tensor is taken as log-probabilities already."""
    if isinstance(log_probs, LogProbs):
        return log_probs
    zeros = tf.zeros([tf.shape(log_probs)[0], 1])  # [N, 1]
    return LogProbs(log_probs, zeros, zeros)
