"""precision: bfloat16 is granted where the hardware multiplies in it, from the CPU's flags or the device."""

import pytest
import tensorflow as tf

from keras_transformer import precision

AVX2_EPYC = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse sse2 avx fma avx2\n"
SAPPHIRE_RAPIDS = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"


@pytest.fixture
def cpuinfo(tmp_path):
    def write(text):
        path = tmp_path / "cpuinfo"
        path.write_text(text)
        return str(path)
    return write


def test_cpu_flags_read_from_the_flags_line(cpuinfo):
    assert precision.cpu_flags(cpuinfo(AVX2_EPYC)) == frozenset({"fpu", "sse", "sse2", "avx", "fma", "avx2"})
    assert precision.cpu_flags(cpuinfo("processor\t: 0\n")) is None
    assert precision.cpu_flags("/nonexistent/cpuinfo") is None


@pytest.mark.skipif(bool(tf.config.list_physical_devices("GPU")), reason="a GPU decides, not the CPU's flags")
def test_cpu_bfloat16_needs_amx_or_avx512_bf16(cpuinfo):
    strategy = tf.distribute.get_strategy()
    assert precision.bfloat16_hardware(strategy, cpuinfo(SAPPHIRE_RAPIDS)) == "CPU (amx_bf16, avx512_bf16)"
    assert precision.bfloat16_hardware(strategy, cpuinfo(AVX2_EPYC)) is None
    assert precision.bfloat16_hardware(strategy, "/nonexistent/cpuinfo") is None  # unknown: no claim


@pytest.mark.skipif(bool(tf.config.list_physical_devices("GPU")), reason="a GPU decides, not the CPU's flags")
def test_training_policy_grants_bfloat16_only_where_native(cpuinfo):
    strategy, warnings = tf.distribute.get_strategy(), []
    assert precision.training_policy(True, strategy, warnings.append, cpuinfo(SAPPHIRE_RAPIDS)) == "mixed_bfloat16"
    assert precision.training_policy(False, strategy, warnings.append, cpuinfo(SAPPHIRE_RAPIDS)) == "float32"
    assert warnings == []
    assert precision.training_policy(False, strategy, warnings.append, cpuinfo(AVX2_EPYC)) == "float32"
    assert warnings == []  # float32 was asked for: nothing to say
    assert precision.training_policy(True, strategy, warnings.append, cpuinfo(AVX2_EPYC)) == "float32"
    assert len(warnings) == 1 and "amx_bf16 or avx512_bf16" in warnings[0] and "training in float32" in warnings[0]
