"""TensorFlow process set-up: oneDNN or Eigen kernels, quiet start-up, device initialisation.

TensorFlow 2.21 writes INFO lines (oneDNN, CUDA probing) through C++ logging
before ``absl::InitializeLog`` runs, ignoring ``TF_CPP_MIN_LOG_LEVEL``. We
import TensorFlow and initialise its devices once with the process's stderr
file descriptor pointed at /dev/null, then restore it. Python exceptions are
unaffected (they are raised after stderr is restored). Set
``KT_VERBOSE_TF=1`` to see everything.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys


# The programs that only decode (``cli.common.run(main, decoding=True)``): console script -> module.
DECODING_PROGRAMS = {"kt-translate": "keras_transformer.cli.translate",
                     "kt-evaluate": "keras_transformer.cli.evaluate",
                     "kt-parse": "keras_transformer.cli.parse",
                     "kt-evaluate-parser": "keras_transformer.cli.evaluate_parser"}


def onednn_default(orig_argv) -> str:
    """``TF_ENABLE_ONEDNN_OPTS`` for a process started as ``orig_argv`` (``sys.orig_argv``): "0" for the decoding
    programs, run as console scripts or with ``python -m``, else "1".

    TensorFlow reads the variable once, when it loads, and turns its oneDNN kernels on by default only on CPUs
    with AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX. Training wants them everywhere: on an AVX2-only CPU a float32
    training step of the multi30k model takes ~1.5x as long with Eigen's (docs/benchmarks.md). Decoding wants
    Eigen's: a beam-search step is a few hundred ops on small tensors, oneDNN's kernels cost more per call, and
    the same searches ran 1.2-1.5x faster without them, with the same translations (docs/serving.md#kernels).
    """
    program = next((arg for arg in orig_argv[1:] if not arg.startswith("-")), "")  # the script, or -m's module
    decoding = os.path.basename(program) in DECODING_PROGRAMS or program in DECODING_PROGRAMS.values()
    return "0" if decoding else "1"


@contextlib.contextmanager
def _stderr_to_devnull():
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def silence_native_stderr() -> None:
    """For command-line programs: drop what C++ libraries write to stderr for the rest of the process.

    File descriptor 2 is pointed at /dev/null while Python's ``sys.stderr`` (tracebacks,
    warnings, absl and logging output, our error lines) moves to a duplicate of the
    original stderr, so only native chatter (oneDNN, SentencePiece, CUDA probing) is lost.
    Skipped when ``KT_VERBOSE_TF`` is set.
    """
    if os.environ.get("KT_VERBOSE_TF"):
        return
    sys.stderr.flush()
    python_stderr = open(os.dup(2), "w", buffering=1, encoding=sys.stderr.encoding, errors="backslashreplace")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    sys.stderr = python_stderr
    from absl import logging as absl_logging

    absl_logging.get_absl_handler().python_handler.stream = python_stderr
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and getattr(handler, "stream", None) is sys.__stderr__:
            handler.stream = python_stderr


def quietly():
    """A context that silences C++ stderr output (unless ``KT_VERBOSE_TF`` is set)."""
    return contextlib.nullcontext() if os.environ.get("KT_VERBOSE_TF") else _stderr_to_devnull()


def import_tensorflow_quietly() -> None:
    if os.environ.get("KT_VERBOSE_TF") or "tensorflow" in sys.modules:
        return
    with _stderr_to_devnull():
        import tensorflow as tf

        del tf
    logging.getLogger("tensorflow").setLevel(logging.ERROR)


def init_devices(cpu_devices: int = 0, decoding: bool = False) -> None:
    """Initialise TensorFlow's devices (quietly), optionally splitting the CPU.

    ``cpu_devices`` > 1 creates that many logical CPU devices, so a
    ``MirroredStrategy`` can run several replicas on one CPU (tests, and
    data-parallel equivalence checks). ``decoding``: a process that only
    decodes runs each op on one thread (intra-op parallelism 1) and its
    parallel searches on the inter-op threads (``decoding.parallel``), unless
    ``TF_NUM_INTRAOP_THREADS`` sets it. Must run before any op executes.
    Skipped under ``TF_CONFIG``: a ``MultiWorkerMirroredStrategy`` has to be
    created before the devices are initialised (see ``training.make_strategy``).
    """
    import tensorflow as tf

    if decoding and not os.environ.get("TF_NUM_INTRAOP_THREADS"):
        tf.config.threading.set_intra_op_parallelism_threads(1)
    if os.environ.get("TF_CONFIG") and cpu_devices <= 1:
        return
    with quietly():
        if cpu_devices > 1:
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * cpu_devices)
        tf.config.list_logical_devices()
