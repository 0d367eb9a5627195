"""Helpers shared by the benchmarks: threads, fixed batches, FLOPs, matmul peak, timing, output.

Benchmarks print figures, they are not timed tests (DESIGN.md). On a small,
shared machine the figures are noisy, so every benchmark measures its
candidates against a reference *in the same run*, alternates them round by
round and reports medians.
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

import keras_transformer  # noqa: F401  before TensorFlow: the package's TF environment (oneDNN on every x86 CPU)

# Batch shapes [B, S] -> [B, T] per recipe, like the length-bucketed batches of data/batching.py.
# multi30k: a real bucket of ~4096 tokens per side. base: scaled down from the paper's ~25000 tokens
# per side (§5.1) to ~600, so that one step on a small CPU takes seconds rather than minutes.
BATCH_SHAPES = {
    "tiny": (16, 12, 14),
    "multi30k": (160, 24, 26),
    "base": (24, 24, 26),
}


# Training variants of our model: name -> (recipe.train.jit_compile, recipe.train.mixed_precision).
VARIANTS = {"graph": (False, False), "xla": (True, False), "bf16": (False, True), "xla_bf16": (True, True)}


def variant_recipe(recipe, variant: str):
    """``recipe`` with the training variant's jit_compile and mixed_precision (mixed_bfloat16)."""
    import dataclasses

    jit, mixed = VARIANTS[variant]
    return dataclasses.replace(recipe, train=dataclasses.replace(recipe.train, jit_compile=jit, mixed_precision=mixed))


def batch_shape(recipe_name: str, override: Optional[str] = None) -> tuple:
    """(B, S, T) from "BxSxT" or the table above (default for an unknown recipe: the multi30k shape)."""
    if override:
        b, s, t = (int(x) for x in override.lower().split("x"))
        return b, s, t
    return BATCH_SHAPES.get(recipe_name, BATCH_SHAPES["multi30k"])


def fixed_batch(vocab_size: int, b: int, s: int, t: int, seed: int = 0):
    """A fixed batch of token ids, as numpy int32: source [B, S], target_in [B, T], target_out [B, T].

    Lengths vary within the bucket as in a real one (source ~ S-3..S, target ~ T-3..T, EOS included),
    padded with PAD; target_in = BOS + target_out[:-1]. Identical for every framework.
    """
    from keras_transformer import BOS_ID, EOS_ID, PAD_ID  # (imports TensorFlow: not at module level)

    rng = np.random.default_rng(seed)

    def side(length):
        ids = np.full((b, length), PAD_ID, np.int32)
        for row, n in zip(ids, rng.integers(max(2, length - 3), length + 1, b)):
            row[: n - 1] = rng.integers(EOS_ID + 1, vocab_size, n - 1)
            row[n - 1] = EOS_ID
        return ids

    source, target_out = side(s), side(t)
    target_in = np.concatenate([np.full((b, 1), BOS_ID, np.int32), target_out[:, :-1]], axis=1)
    target_in[target_in == EOS_ID] = PAD_ID  # the token after EOS is padding, not an input
    return source, target_in, target_out


def train_step_flops(config, b: int, s: int, t: int) -> int:
    """Model FLOPs of one training step (forward + backward) on a [B, S] -> [B, T] batch, padding included.

    A matmul [M, K] x [K, N] costs 2 M K N FLOPs forward and twice that backward (gradients with respect to
    both operands), so a training step costs 3 x the forward matmul FLOPs. With D = d_model, F = d_ff,
    H heads of sizes d_k, d_v, V the vocabulary, L_e / L_d the layer counts and N_s = B S, N_t = B T tokens:

        P_attn  = 2 D H d_k + 2 D H d_v              (W^Q, W^K, W^V, W^O weights; biases ignored)
        P_ffn   = 2 D F                               (W_1, W_2)
        encoder: L_e [ 2 N_s (P_attn + P_ffn)  +  2 B H S^2 (d_k + d_v) ]         (projections + QK^T, AV)
        decoder: L_d [ 2 N_t (P_attn + P_ffn)                                       (self-attention, FFN)
                      + 2 N_t (D H d_k + H d_v D) + 2 N_s (D H d_k + D H d_v)       (cross: W^Q, W^O | W^K, W^V)
                      + 2 B H T^2 (d_k + d_v) + 2 B H T S (d_k + d_v) ]              (self and cross scores)
        softmax: 2 N_t D V                                                           (tied output projection)
        step   = 3 (encoder + decoder + softmax)

    Embedding look-ups, LayerNorm, softmax and the optimizer update are not counted (not matmuls). Causal
    attention is counted over the full T x T matrix, as both frameworks compute it.
    """
    d, f, h, dk, dv, v = (config.d_model, config.d_ff, config.num_heads, config.key_dim, config.value_dim,
                          config.vocab_size)
    ns, nt = b * s, b * t
    p_attn, p_ffn = 2 * d * h * dk + 2 * d * h * dv, 2 * d * f
    encoder = config.num_encoder_layers * (2 * ns * (p_attn + p_ffn) + 2 * b * h * s * s * (dk + dv))
    decoder = config.num_decoder_layers * (
        2 * nt * (p_attn + p_ffn)
        + 2 * nt * (d * h * dk + h * dv * d) + 2 * ns * (d * h * dk + d * h * dv)
        + 2 * b * h * t * t * (dk + dv) + 2 * b * h * t * s * (dk + dv))
    softmax = 2 * nt * d * v
    return 3 * (encoder + decoder + softmax)


def matmul_peak(n: int = 1024, seconds: float = 0.5, bfloat16: bool = True) -> Dict[str, float]:
    """Dense matmul rate (FLOP/s), best of repeated [n, n] x [n, n] products for ``seconds`` each:
    {"tensorflow": float32, "numpy": float32, "tensorflow_bf16": bfloat16 inputs (if ``bfloat16``)}.

    oneDNN aborts the process on a bfloat16 matmul when capped below AVX-512 (ONEDNN_MAX_CPU_ISA=AVX2),
    so a float32-only benchmark passes ``bfloat16=False``."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
    ta, tb = tf.constant(a), tf.constant(b)
    ta16, tb16 = tf.cast(ta, tf.bfloat16), tf.cast(tb, tf.bfloat16)
    # Only one element leaves the graph, so the copy out does not count against the matmul.
    tf_matmul = tf.function(lambda x, y: tf.cast(tf.matmul(x, y)[0, 0], tf.float32))
    flops = 2.0 * n ** 3
    result = {}
    probes = [("tensorflow", lambda: tf_matmul(ta, tb).numpy()), ("numpy", lambda: a @ b)]
    if bfloat16:
        probes.append(("tensorflow_bf16", lambda: tf_matmul(ta16, tb16).numpy()))
    for name, fn in probes:
        fn()  # warm-up (and trace)
        best, deadline = float("inf"), time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - start)
        result[name] = flops / best
    return result


def set_threads(threads: int) -> None:
    """TensorFlow intra- and inter-op pools of ``threads`` each; call before TensorFlow's devices exist."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)


def interleaved(candidates: Dict[str, Callable[[], None]], rounds: int, pause: float = 0.2,
                between: Optional[Callable[[], None]] = None) -> Dict[str, List[float]]:
    """Time each candidate once per round, candidates alternating (order rotated every round).

    Returns {name: [seconds per round]}. ``pause`` lets the previous candidate's spinning worker
    threads go idle before the next one starts; ``between`` runs once per round, untimed.
    """
    names = list(candidates)
    times = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            time.sleep(pause)
            start = time.perf_counter()
            candidates[name]()
            times[name].append(time.perf_counter() - start)
        if between is not None:
            between()
    return times


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def now() -> str:
    return datetime.datetime.now().strftime("%Y-%m-%d %H:%M")


def header(title: str) -> str:
    """One line with the title, the date and the machine's core count."""
    return f"{title} — {now()}, os.cpu_count() = {os.cpu_count()}"


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence], right_from: int = 2) -> str:
    """A markdown table; columns from index ``right_from`` are right-aligned (figures)."""
    align = ["---" if i < right_from else "---:" for i in range(len(columns))]
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join("—" if cell is None else str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def json_line(payload: dict) -> str:
    return json.dumps(payload, sort_keys=False)


def fmt(value: Optional[float], digits: int = 2) -> Optional[str]:
    return None if value is None else f"{value:,.{digits}f}"
