"""Training precision: mixed bfloat16 where the hardware multiplies in bfloat16, mixed float16 on older CUDA GPUs,
float32 elsewhere.

The paper gives no precision (§5.2); Keras's ``mixed_bfloat16`` policy (bfloat16 compute, float32
variables) is a speed choice, and it pays only where matrices multiply in bfloat16 natively: a TPU, a
GPU of compute capability 8.0 or more, a CPU with AMX or AVX512_BF16. Elsewhere every operand is
converted and the product still runs in float32, so the whole step is slower than float32
(``bench/bench_train.py``, multi30k, target tokens/s of mixed_bfloat16 against float32: 5,634 against
3,472 on a 2-core AVX-512 + AMX VM, 4,610 against 3,065 on a 2-core AMD EPYC with AVX512_BF16 and no AMX,
1,401 against 1,705 on a 2-core AVX2-only AMD EPYC). A recipe's
``mixed_precision`` asks for reduced precision; :func:`training_policy` grants bfloat16 where it helps, and on a
CUDA GPU of compute capability 7.x (V100, T4: float16 tensor cores, no bfloat16) Keras's ``mixed_float16``:
float16 compute, float32 master weights, and dynamic loss scaling (``keras.optimizers.LossScaleOptimizer``: the
loss is multiplied by a scale S before the gradients are taken, the gradients divided by S; a step whose
gradients overflow is skipped and S halved, S doubled after 2,000 clean steps), which the peers' float16
training uses too (fairseq ``--fp16``, OpenNMT-tf ``--mixed_precision``). Elsewhere it says why it trains in
float32.

    training_policy(asked, strategy, warn) -> "float32" | "mixed_bfloat16" | "mixed_float16"
    policy_reason(policy, strategy) -> the line a run opens with
"""

from __future__ import annotations

from typing import Callable, FrozenSet, Optional

import tensorflow as tf

CPU_BFLOAT16_FLAGS = ("amx_bf16", "avx512_bf16")  # /proc/cpuinfo names of the x86 bfloat16 instructions
FLOAT16_CAPABILITY = (7, 0)  # CUDA GPUs with float16 tensor cores (Volta); bfloat16 from 8.0 (Ampere)
POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


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


def _gpu_capability():
    """(major, minor) compute capability of the first GPU, (0, 0) for a GPU that does not say, None without one."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    return tuple(tf.config.experimental.get_device_details(gpus[0]).get("compute_capability") or (0, 0))


def float16_hardware(strategy: tf.distribute.Strategy) -> Optional[str]:
    """The CUDA GPU that multiplies float16 natively but not bfloat16 (e.g. "GPU (compute capability 7.5)"), or None."""
    capability = None if isinstance(strategy, tf.distribute.TPUStrategy) else _gpu_capability()
    if capability and FLOAT16_CAPABILITY <= capability < (8, 0):
        return f"GPU (compute capability {capability[0]}.{capability[1]})"
    return None


def bfloat16_hardware(strategy: tf.distribute.Strategy, cpuinfo: str = "/proc/cpuinfo") -> Optional[str]:
    """What multiplies bfloat16 natively for ``strategy``'s devices (e.g. "CPU (amx_bf16, avx512_bf16)"), or None."""
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return "TPU"
    capability = _gpu_capability()
    if capability is not None:
        return f"GPU (compute capability {capability[0]}.{capability[1]})" if capability >= (8, 0) else None
    native = sorted(set(CPU_BFLOAT16_FLAGS) & (cpu_flags(cpuinfo) or frozenset()))
    return f"CPU ({', '.join(native)})" if native else None


def training_policy(mixed_precision: bool, strategy: tf.distribute.Strategy, warn: Callable[[str], None],
                    cpuinfo: str = "/proc/cpuinfo") -> str:
    """The Keras dtype policy a run trains under, when ``mixed_precision`` asks for reduced precision:
    ``mixed_bfloat16`` where bfloat16 is native, ``mixed_float16`` on a CUDA GPU of compute capability 7.x, else
    ``float32`` with one line to ``warn`` saying why.
    """
    if not mixed_precision:
        return "float32"
    if bfloat16_hardware(strategy, cpuinfo):
        return "mixed_bfloat16"
    if float16_hardware(strategy):
        return "mixed_float16"
    warn("mixed_precision: this machine has no bfloat16 arithmetic (a TPU, a GPU of compute capability 8.0+, "
         f"or a CPU with {' or '.join(CPU_BFLOAT16_FLAGS)}) and no float16 GPU (compute capability 7.x), where "
         "mixed precision is slower than float32; training in float32")
    return "float32"


def policy_reason(policy: str, strategy: tf.distribute.Strategy, cpuinfo: str = "/proc/cpuinfo") -> str:
    """The line a training run opens with: its policy and the hardware that chose it."""
    if policy == "mixed_bfloat16":
        return (f"precision: mixed_bfloat16 (bfloat16 compute, float32 weights) on "
                f"{bfloat16_hardware(strategy, cpuinfo)}")
    if policy == "mixed_float16":
        return (f"precision: mixed_float16 (float16 compute, float32 weights, dynamic loss scaling) on "
                f"{float16_hardware(strategy) or 'this machine'}, which has no bfloat16")
    return "precision: float32"
