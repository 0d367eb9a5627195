"""Inference (§6.1): ``DecodeConfig``, the decoding options' rules, and what an export computes with.

Each of DecodeConfig's field docstrings is its flag's help.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Optional, Tuple

from keras_transformer.config.common import _require


@dataclasses.dataclass(frozen=True)
class DecodeConfig:
    """Inference (§6.1): beam 4, α = 0.6, max length = input + 50."""

    beam_size: int = 4
    """Beam size K (§6.1: 4)."""
    alpha: float = 0.6
    """Length penalty α of lp(Y) = ((5 + |Y|) / 6)^α (Wu et al., 2016; §6.1: 0.6)."""
    extra_length: int = 50
    """Max output length = source length + this (§6.1: 50)."""
    average_checkpoints: int = 5
    """Checkpoints averaged after training (§6.1: the last 5)."""
    alpha_grid: Tuple[float, ...] = ()
    """§6.1 chose beam size and α "after experimentation on the development set": kt-pipeline decodes the eval
    split with each α here after training and keeps the best by the task's metric (ties: the first) for the test
    set and the export; empty: alpha as given."""
    stop_rule: str = "exact"
    """When an input's search stops: exact (no unfinished hypothesis could beat the best even at its maximum
    length: what the search would find without stopping) or heuristic (as if the unfinished ones ended now:
    Hugging Face generate's default; sooner, and it may change a translation)."""

    def __post_init__(self):
        _require(self.stop_rule in STOP_RULES, "stop_rule", f"must be one of {', '.join(STOP_RULES)}")
        for name in DECODE_OPTIONS:
            problem = decode_option_error(name, getattr(self, name))
            _require(problem is None, name, problem or "")
        for alpha in self.alpha_grid:
            problem = decode_option_error("alpha", alpha)
            _require(problem is None, "alpha_grid", problem or "")
        _require(self.average_checkpoints >= 1, "average_checkpoints", "must be >= 1")


STOP_RULES = ("exact", "heuristic")  # DecodeConfig.stop_rule

# The decoding options' valid values, defined once: DecodeConfig, the inference flags (--beam_size, --alpha,
# --extra_length) and the exported signatures' in-graph asserts (serving/checks.py) all check these rules.
DECODE_OPTIONS = {  # name: (least valid value, the rule as an error states it); NaN and ±inf are never valid
    "beam_size": (1, "must be >= 1"),
    "alpha": (0.0, "must be a finite number >= 0"),
    "extra_length": (0, "must be >= 0"),
}

# Sampling's options (decoding/sampling.py; kt-translate --sampling_*, the sample_with_options signature): name:
# (the test of a valid value, the rule as an error states it). NaN and ±inf are never valid.
SAMPLING_OPTIONS = {
    "num_samples": (lambda v: v >= 1, "must be >= 1"),
    "top_k": (lambda v: v >= 0, "must be >= 0 (0: no cut)"),
    "top_p": (lambda v: (v > 0.0) & (v <= 1.0), "must be in (0, 1]"),  # & (not a chain): tensors too
    "temperature": (lambda v: v > 0.0, "must be > 0"),
}


def sampling_option_error(name: str, value) -> Optional[str]:
    """Why ``value`` is not a valid sampling option ``name`` ("must be ..., got v"), or None when it is."""
    test, rule = SAMPLING_OPTIONS[name]
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and test(value):
        return None
    return f"{rule}, got {value}"


# What an export may compute in (kt-export --precision, export.with_precision): float32, or bfloat16 weights and
# activations (the softmaxes in float32), whose matmuls run on bfloat16 units where the CPU has them (AMX).
PRECISIONS = ("float32", "bfloat16")
# The beam searches an export deals a batch to, run at once by inter-op threads (decoding.parallel; kt-export
# --parallel_searches): the benchmark machine's 2 cores (docs/benchmarks.md, "One thread per op, two searches at once").
PARALLEL_SEARCHES = 2
# Batches kt-translate, kt-evaluate and the pipeline keep decoding at once with a TensorFlow translator
# (decoding.lines.run_batches): 1.12x the sentences a second of one at a time on the 2-core benchmark machine
# (docs/benchmarks.md).
IN_FLIGHT_BATCHES = 2


def _check_sizes(config, name: str) -> None:
    """A field of positive, strictly increasing integers, stored as a tuple; a ValueError naming it if not."""
    values = tuple(getattr(config, name))
    _require(len(values) > 0 and all(isinstance(v, int) and v >= 1 for v in values), name,
             f"expected positive integers, got {values}")
    _require(all(a < b for a, b in zip(values, values[1:])), name,
             f"must be strictly increasing, got {', '.join(map(str, values))}")
    object.__setattr__(config, name, values)


@dataclasses.dataclass(frozen=True)
class XlaBuckets:
    """The static shapes an XLA export (kt-export --jit_compile) compiles its search for.

    A search part of B items with S source tokens runs padded to the smallest batch size >= B and the smallest
    source length >= S (the last one is the export's max_source_length); each pair is one XLA compilation,
    done at load time by the export's warm-up requests.
    """

    batch_sizes: Tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    source_lengths: Tuple[int, ...] = (16, 32)  # then max_source_length (80 for Multi30k): 18 compilations

    def __post_init__(self):
        for name in ("batch_sizes", "source_lengths"):
            _check_sizes(self, name)

    def for_source(self, max_source_length: int) -> Tuple[int, ...]:
        """The source lengths below ``max_source_length``, then it: every source (truncated to it) fits one."""
        return tuple(s for s in self.source_lengths if s < max_source_length) + (max_source_length,)


@dataclasses.dataclass(frozen=True)
class StepCompile:
    """An export whose search compiles its step with XLA (kt-export --step_compile, ``decoding.hybrid_beam_search``).

    The step compiles once per (rows, cache positions): rows a power of two up to the largest of ``batch_sizes``
    (a search part's items; a larger part compiles its own), the cache 16, 32, 64, ... positions. The export's
    warm-up requests are one per batch size, each row a source of the export's max_source_length.
    """

    batch_sizes: Tuple[int, ...] = (1, 2, 4, 8, 16, 32)

    def __post_init__(self):
        _check_sizes(self, "batch_sizes")


def decode_option_error(name: str, value) -> Optional[str]:
    """Why ``value`` is not a valid decoding option ``name`` ("must be ..., got v"), or None when it is."""
    least, rule = DECODE_OPTIONS[name]
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and value >= least:
        return None
    return f"{rule}, got {value}"
