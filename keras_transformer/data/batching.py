"""Token-budget batches from a fixed grid of padded shapes (§5.1).

§5.1: "Sentence pairs were batched together by approximate sequence length.
Each training batch contained a set of sentence pairs containing approximately
25000 source tokens and 25000 target tokens."

Each pair becomes source = x + [EOS], target_in = [BOS] + y and
target_out = y + [EOS] (§3.1: the output embeddings are offset by one
position). A pair is dropped when len(x) + 1 or len(y) + 1 exceeds
``max_length`` (as the paper's code does; :func:`count_length_filter` says how
many).

BPE-dropout. With ``bpe_dropout`` p > 0 training tokenizes each pair anew at
every pass (Provilkov et al., 2020: each BPE merge skipped with probability p),
after the shuffle and the repeat, so the model sees many segmentations of one
sentence; the length filter and the buckets see the sampled lengths.
Evaluation batches are never sampled.

Buckets. ``bucket_boundaries`` (default: geometric, ×1.2 from 8 up to
``max_length``) are padded lengths. A pair goes to the cell (S, T) of the
smallest boundaries that hold its source and target; cells whose boundary
indices differ by more than ``MAX_BUCKET_SKEW`` are not used (such rare pairs
pad their shorter side up), so the buckets, their shapes and their batch
sizes are all known before training starts: few shapes for XLA to compile.

Budget rule. ``tokens_per_batch`` is the GLOBAL budget of one parameter
update, per side, in padded tokens: §5.1's ~25000 source + 25000 target tokens
whatever the hardware. :func:`plan_batches` splits it over R replicas and A
accumulated micro-batches (A derived from ``max_tokens_per_device`` when the
recipe does not fix it): each replica's micro-batch gets
``replica_tokens = tokens_per_batch // (R × A)``. A cell (S, T) holds
b = replica_tokens // max(S, T) pairs per replica, and the micro-batch that
``make_batches`` yields holds R × b pairs, so ``tf.distribute`` splits it
evenly into batches of b pairs, each within the device budget; A of them make
one update. Training drops a cell's final partial batch (so every training
shape is in :func:`bucket_shapes`; with ``repeat`` the pairs carry over to the
next epoch); evaluation keeps it.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Tuple

import numpy as np
import tensorflow as tf

from keras_transformer import BOS_ID, PAD_ID
from keras_transformer.config import DataConfig
from keras_transformer.data.tokenizer import append_eos

MAX_BUCKET_SKEW = 2  # max distance between a cell's source and target boundary indices
_TOKENIZE_CHUNK = 512  # sentences per tokenizer call: one op call per chunk, not per sentence


def bucket_boundaries(cfg: DataConfig) -> Tuple[int, ...]:
    """Padded lengths used on both sides: the config's, else 8, 10, 12, 14, 17, ... max_length."""
    if cfg.bucket_boundaries is not None:
        b = tuple(cfg.bucket_boundaries)
        return b if b[-1] == cfg.max_length else b + (cfg.max_length,)
    b, x = [], 8
    while x < cfg.max_length:
        b.append(x)
        x = max(x + 1, int(round(x * 1.2)))
    return tuple(b) + (cfg.max_length,)


@dataclasses.dataclass(frozen=True)
class BatchPlan:
    """One update's token budget (§5.1) split over ``replicas`` × ``accumulation`` micro-batches."""

    replicas: int  # R: devices training in sync
    accumulation: int  # A: micro-batches accumulated into one update
    replica_tokens: int  # padded tokens per side of one micro-batch on one replica

    @property
    def tokens_per_update(self) -> int:
        """Padded tokens per side in one update, summed over replicas and micro-batches."""
        return self.replicas * self.accumulation * self.replica_tokens


def plan_batches(cfg: DataConfig, num_replicas: int = 1, gradient_accumulation_steps: int = 0) -> BatchPlan:
    """Split the global ``tokens_per_batch`` over ``num_replicas`` devices and A micro-batches.

    A is ``gradient_accumulation_steps`` when given (> 0), else the fewest micro-batches
    that keep each replica's share within ``max_tokens_per_device`` (1 when that is 0).
    Raises ValueError naming the field when a micro-batch cannot hold one pair of the
    longest bucket or exceeds the device budget.
    """
    if num_replicas < 1:
        raise ValueError(f"num_replicas: must be >= 1, got {num_replicas}")
    device = cfg.max_tokens_per_device
    accumulation = gradient_accumulation_steps
    if not accumulation:
        accumulation = -(-cfg.tokens_per_batch // (num_replicas * device)) if device else 1
    replica_tokens = cfg.tokens_per_batch // (num_replicas * accumulation)
    longest = bucket_boundaries(cfg)[-1]
    if device and device < longest:
        raise ValueError(f"max_tokens_per_device: {device} is too small for the longest bucket "
                         f"({longest} tokens per side, from max_length={cfg.max_length})")
    if device and replica_tokens > device:
        raise ValueError(f"gradient_accumulation_steps: {accumulation} micro-batches on {num_replicas} replica(s) "
                         f"give {replica_tokens} tokens per device, above max_tokens_per_device={device}")
    if replica_tokens < longest:
        split = "" if num_replicas * accumulation == 1 else (
            f" split over {num_replicas} replica(s) x {accumulation} micro-batches ({replica_tokens} each)")
        raise ValueError(
            f"tokens_per_batch: {cfg.tokens_per_batch}{split} is too small for the longest bucket "
            f"({longest} tokens per side, from max_length={cfg.max_length}); "
            f"it must be at least {longest * num_replicas * accumulation}"
        )
    return BatchPlan(num_replicas, accumulation, replica_tokens)


def bucket_shapes(cfg: DataConfig, plan: Optional[BatchPlan] = None) -> List[Tuple[int, int, int]]:
    """Every (micro-batch size summed over replicas, S, T) a training batch can have.

    ``plan`` defaults to :func:`plan_batches` of ``cfg`` on one replica.
    """
    plan = plan or plan_batches(cfg)
    b = bucket_boundaries(cfg)
    return [
        (plan.replicas * (plan.replica_tokens // max(s, t)), s, t)
        for i, s in enumerate(b)
        for j, t in enumerate(b)
        if abs(i - j) <= MAX_BUCKET_SKEW
    ]


def _encode(tokenizer, sources: tf.Tensor, targets: tf.Tensor, bpe_dropout=0.0):
    """[N] strings -> ragged source [N, (S)], target_in [N, (T)], target_out [N, (T)]."""
    x = tokenizer.source.tokenize(sources, bpe_dropout)  # [N, (len x)]
    y = tokenizer.target.tokenize(targets, bpe_dropout)  # [N, (len y)]
    bos = tf.fill([y.nrows(), 1], BOS_ID)  # [N, 1]
    source = append_eos(x)  # [N, (len x + 1)]
    target_in = tf.concat([bos, y], axis=1)  # [N, (len y + 1)]
    target_out = append_eos(y)  # [N, (len y + 1)]
    return source, target_in, target_out


def _fits(source: tf.RaggedTensor, target_out: tf.RaggedTensor, max_length: int) -> tf.Tensor:
    """[N] bool: both sides, EOS included, within max_length."""
    return (source.row_lengths() <= max_length) & (target_out.row_lengths() <= max_length)


def _cell_keys(source: tf.RaggedTensor, target_out: tf.RaggedTensor, boundaries) -> tf.Tensor:
    """[N] int64 key i * n + j of the cell (boundaries[i], boundaries[j]) each pair pads to."""
    n = len(boundaries)
    bounds = tf.constant(boundaries, tf.int64)  # [n]
    i = tf.searchsorted(bounds, source.row_lengths(), side="left")  # [N] first boundary >= length
    j = tf.searchsorted(bounds, target_out.row_lengths(), side="left")  # [N]
    i, j = tf.maximum(i, j - MAX_BUCKET_SKEW), tf.maximum(j, i - MAX_BUCKET_SKEW)  # stay in the band
    return tf.cast(i, tf.int64) * n + tf.cast(j, tf.int64)


def make_batches(
    pairs: tf.data.Dataset,
    tokenizer,
    cfg: DataConfig,
    *,
    training: bool,
    plan: Optional[BatchPlan] = None,
    deterministic: bool = False,
    repeat: Optional[bool] = None,
) -> tf.data.Dataset:
    """(source, target) strings -> ((source_ids [B, S], target_in_ids [B, T]), target_out_ids [B, T]).

    training: shuffle pairs with ``cfg.seed``, drop each cell's partial batch, and segment by BPE-dropout when
    ``cfg.bpe_dropout`` > 0 (then not reproducible, even with ``deterministic``).
    repeat: cycle the pairs forever before bucketing (default: ``training``).
    deterministic: fix the order of parallel work (with the seed: same batches every run).
    plan: the split of the update's budget (default: one replica, no accumulation). B is one
    micro-batch over all replicas, ``plan.replicas`` × the per-replica batch (module docstring).
    """
    shapes = bucket_shapes(cfg, plan)
    boundaries = bucket_boundaries(cfg)
    n = len(boundaries)
    # Lookup tables over the full n × n grid of cells, indexed by key = i * n + j; cells off the band stay 0.
    batch_size, size_s, size_t = [0] * (n * n), [0] * (n * n), [0] * (n * n)
    for size, s, t in shapes:
        key = boundaries.index(s) * n + boundaries.index(t)
        batch_size[key], size_s[key], size_t[key] = size, s, t
    batch_size = tf.constant(batch_size, tf.int64)
    size_s, size_t = tf.constant(size_s, tf.int32), tf.constant(size_t, tf.int32)

    def encode(sources, targets):  # a chunk of [N] pairs, vectorised: one tokenizer call per side
        source, target_in, target_out = _encode(tokenizer, sources, targets, cfg.bpe_dropout if training else 0.0)
        fits = _fits(source, target_out, cfg.max_length)  # [N]
        source, target_in, target_out = (tf.ragged.boolean_mask(r, fits) for r in (source, target_in, target_out))
        return _cell_keys(source, target_out, boundaries), source, target_in, target_out

    def pad(rows: tf.RaggedTensor, length: tf.Tensor) -> tf.Tensor:  # [B, (len)] -> [B, length]
        dense = rows.to_tensor(PAD_ID)  # [B, longest row]
        return tf.pad(dense, [[0, 0], [0, length - tf.shape(dense)[1]]], constant_values=PAD_ID)

    def reduce_func(key, window):  # one cell's pairs: (key, source, target_in, target_out)
        s, t = size_s[key], size_t[key]
        return window.batch(batch_size[key], drop_remainder=training).map(
            lambda keys, source, target_in, target_out: ((pad(source, s), pad(target_in, t)), pad(target_out, t))
        )

    repeat = training if repeat is None else repeat
    if training:
        pairs = pairs.shuffle(cfg.shuffle_buffer, seed=cfg.seed, reshuffle_each_iteration=True)
    if repeat:
        pairs = pairs.repeat()
    batches = (
        pairs.batch(_TOKENIZE_CHUNK)
        .map(encode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
        .unbatch()
        .group_by_window(lambda key, *_: key, reduce_func, window_size_func=lambda key: batch_size[key])
        .prefetch(tf.data.AUTOTUNE)
    )
    options = tf.data.Options()
    options.deterministic = deterministic
    return batches.with_options(options)


@dataclasses.dataclass(frozen=True)
class LengthCounts:
    """Pairs kept and dropped by the ``max_length`` filter."""

    kept: int
    filtered: int


def count_length_filter(pairs: tf.data.Dataset, tokenizer, cfg: DataConfig) -> LengthCounts:
    """One pass over ``pairs`` counting what :func:`make_batches`'s length filter keeps."""

    def count(sources, targets):  # [N] strings -> (N, kept)
        source, _, target_out = _encode(tokenizer, sources, targets)
        fits = _fits(source, target_out, cfg.max_length)  # [N]
        return tf.size(fits, tf.int64), tf.reduce_sum(tf.cast(fits, tf.int64))

    counts = pairs.batch(_TOKENIZE_CHUNK).map(count, num_parallel_calls=tf.data.AUTOTUNE)
    total, kept = counts.reduce((tf.constant(0, tf.int64), tf.constant(0, tf.int64)),
                                lambda acc, c: (acc[0] + c[0], acc[1] + c[1]))
    return LengthCounts(kept=int(kept), filtered=int(total - kept))


def count_source_pieces(pairs: tf.data.Dataset, tokenizer, vocab_size: int) -> np.ndarray:
    """[V] int64: how often each piece occurs in the tokenized sources of ``pairs``, EOS included (the counts of
    ``ModelConfig.source_token_dropout_alpha``)."""

    def count(sources, targets):  # [N] strings -> [V]
        source = append_eos(tokenizer.source.tokenize(sources))  # [N, (S)]
        return tf.math.bincount(source.flat_values, minlength=vocab_size, maxlength=vocab_size, dtype=tf.int64)

    counts = pairs.batch(_TOKENIZE_CHUNK).map(count, num_parallel_calls=tf.data.AUTOTUNE)
    return counts.reduce(tf.zeros([vocab_size], tf.int64), lambda total, c: total + c).numpy()


@dataclasses.dataclass(frozen=True)
class BatchStats:
    """What one pass of batches holds; ``padding_efficiency_*`` = real tokens / padded tokens."""

    num_batches: int
    pairs: int
    shapes: Tuple[Tuple[int, int, int], ...]  # distinct (B, S, T), sorted
    max_batch_tokens: int  # largest per-replica padded side, max(B × S, B × T) / num_replicas
    source_tokens: Tuple[int, int, int]  # real source tokens per batch: (min, median, max)
    target_tokens: Tuple[int, int, int]  # real target_out tokens per batch: (min, median, max)
    padding_efficiency_source: float
    padding_efficiency_target: float


def measure_batches(batches: tf.data.Dataset, num_replicas: int = 1) -> BatchStats:
    """Iterates a finite batch dataset once (see :func:`make_batches`) and measures it."""
    shapes, source_real, target_real = set(), [], []
    padded_s = padded_t = max_tokens = pairs = 0
    for (source, _), target_out in batches.as_numpy_iterator():
        b, s = source.shape
        t = target_out.shape[1]
        shapes.add((b, s, t))
        pairs += b
        padded_s, padded_t = padded_s + b * s, padded_t + b * t
        max_tokens = max(max_tokens, b * max(s, t) // num_replicas)
        source_real.append(int(np.count_nonzero(source != PAD_ID)))
        target_real.append(int(np.count_nonzero(target_out != PAD_ID)))
    if not shapes:
        raise ValueError("no batches: every pair was filtered out or left in a partial batch")

    def spread(x):
        return int(np.min(x)), int(np.median(x)), int(np.max(x))

    return BatchStats(
        num_batches=len(source_real),
        pairs=pairs,
        shapes=tuple(sorted(shapes)),
        max_batch_tokens=max_tokens,
        source_tokens=spread(source_real),
        target_tokens=spread(target_real),
        padding_efficiency_source=sum(source_real) / padded_s,
        padding_efficiency_target=sum(target_real) / padded_t,
    )
