"""Training precision: mixed bfloat16 where the hardware multiplies in bfloat16, float32 elsewhere.

The paper gives no precision (§5.2); Keras's ``mixed_bfloat16`` policy (bfloat16 compute, float32
variables) is a speed choice, and it pays only where matrices multiply in bfloat16 natively: a TPU, a
GPU of compute capability 8.0 or more, a CPU with AMX or AVX512_BF16. Elsewhere every operand is
converted and the product still runs in float32, so the whole step is slower than float32
(``bench/bench_train.py``, multi30k, target tokens/s of mixed_bfloat16 against float32: 5,634 against
3,472 on a 2-core AVX-512 + AMX VM, 4,610 against 3,065 on a 2-core AMD EPYC with AVX512_BF16 and no AMX,
1,401 against 1,705 on a 2-core AVX2-only AMD EPYC). A recipe's
``mixed_precision`` asks for bfloat16; :func:`training_policy` grants it where it helps and says so
where it does not.
"""

from __future__ import annotations

from typing import Callable, FrozenSet, Optional

import tensorflow as tf

CPU_BFLOAT16_FLAGS = ("amx_bf16", "avx512_bf16")  # /proc/cpuinfo names of the x86 bfloat16 instructions


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> Optional[FrozenSet[str]]:
    """The CPU's feature flags as Linux lists them, or None where they cannot be read (another OS)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return None


def bfloat16_hardware(strategy: tf.distribute.Strategy, cpuinfo: str = "/proc/cpuinfo") -> Optional[str]:
    """What multiplies bfloat16 natively for ``strategy``'s devices (e.g. "CPU (amx_bf16, avx512_bf16)"), or None."""
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return "TPU"
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        capability = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability")
        if capability and capability >= (8, 0):
            return f"GPU (compute capability {capability[0]}.{capability[1]})"
        return None
    native = sorted(set(CPU_BFLOAT16_FLAGS) & (cpu_flags(cpuinfo) or frozenset()))
    return f"CPU ({', '.join(native)})" if native else None


def training_policy(mixed_precision: bool, strategy: tf.distribute.Strategy, warn: Callable[[str], None],
                    cpuinfo: str = "/proc/cpuinfo") -> str:
    """The Keras dtype policy a run trains under: ``mixed_bfloat16`` if asked for and native, else ``float32``.

    Asked for on hardware without bfloat16 arithmetic, the run trains in float32 and ``warn`` gets one line.
    """
    if not mixed_precision:
        return "float32"
    if bfloat16_hardware(strategy, cpuinfo):
        return "mixed_bfloat16"
    warn("mixed_precision: this machine has no bfloat16 arithmetic (a TPU, a GPU of compute capability 8.0+, "
         f"or a CPU with {' or '.join(CPU_BFLOAT16_FLAGS)}), where mixed_bfloat16 is slower than float32; "
         "training in float32")
    return "float32"
