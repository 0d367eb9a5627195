"""Shared test set-up: quiet TensorFlow, devices initialised once, fixed seeds, generated corpora; session fixtures
of a tiny trained work directory and its export (used by tests/inference and tests/robustness).

Every test reads the corpora ``tests/testdata/corpora.py`` generates for the session (Multi30k, newstest and the
treebank sample in their layouts, the same files on every machine), through ``$KT_DATA_DIR``, which the programs
the tests start inherit. The real corpora are for the tests marked ``corpus`` alone, through ``real_data_dir``
(``$KT_DATA_DIR`` as it was set, else ``../shared/data``, Multi30k and the treebank sample fetched into it as the
tools fetch them); offline and without them, those tests skip with one line.

``trained_workdir`` is laid out as ``training.train`` leaves it, written by the
trainer's own pieces (``WorkDir.write_recipe``, ``compile_model``, the
``CheckpointState`` its callback saves with) but without fitting, which takes
too long for a unit test: checkpoints 4, 8 and 12 of a 1+1-layer model whose
weights move by a random step between saves. The tokenizer is a 400-piece
SentencePiece model trained on 1,000 generated sentence pairs. The model
translates nothing well; the tests check exactness, not quality. ``exported``
is its ``kt-export``. Tests that damage them work on copies.

``small_tokenizer``, ``small_config`` and ``small_model`` (used by tests/plotting and test_bleu_callback.py) are a
word-level SentencePiece model on made-up text and tiny models over it. Word pieces (every piece starts a word) make
an untrained model's output several words long, so a corpus BLEU of its output against itself is 100, not 0.
"""

import atexit
import collections
import dataclasses
import fcntl
import gc
import gzip
import io
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

# One intra-op thread in each test process and, through the environment, in each program a test starts: the xdist
# workers and the programs they run share the cores, and TensorFlow's default (a thread per core in every process)
# oversubscribes them. A file's tests that set TF_NUM_INTRAOP_THREADS themselves are unaffected. Measured on a
# 2-core CPU (docs/notes.md, "Test-suite timings"): five slow files in 0.83x the time, the whole suite unchanged.
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _use_generated_corpora() -> Path:
    """Points $KT_DATA_DIR at corpora generated for this run, once (the xdist workers inherit the controller's);
    returns the real data directory: $KT_DATA_DIR as it was set, else ../shared/data."""
    if "KT_REAL_DATA_DIR" not in os.environ:
        from tests.testdata import corpora as generated

        os.environ["KT_REAL_DATA_DIR"] = os.environ.get("KT_DATA_DIR") or os.path.join(
            os.path.dirname(REPO_ROOT), "shared", "data")
        path = tempfile.mkdtemp(prefix="kt-testdata-")
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        os.environ["KT_DATA_DIR"] = str(generated.write_data_dir(path))
    return Path(os.environ["KT_REAL_DATA_DIR"])


REAL_DATA_DIR = _use_generated_corpora()

import keras_transformer  # noqa: F401  (selects the TF backend, silences start-up logs)
from keras_transformer import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from keras_transformer.config import ModelConfig
from keras_transformer.tf_setup import init_devices
from tests.synthetic import fit_without_autotune

init_devices()
fit_without_autotune()

# The tests trace many graphs in this process (every in-process kt-* run traces its own), and tracing allocates
# millions of short-lived objects: the imports above are frozen out of the collector's generations and the young
# generation is collected every 50,000 allocations instead of 700. Four kt-train runs in one process (1+1-layer
# model, 100 steps then three resumes of 30) took 7-12% less CPU time, measured on a 2-core Zen 4 EPYC, 2026-12-03.
gc.collect()
gc.freeze()
gc.set_threshold(50_000, 50, 100)


# Seconds the longest files' tests not marked slow took in a default run (2 xdist workers on a 2-core Intel Xeon,
# 2026-12-06, `pytest -q --durations=0`, summed by file). Only their order matters: it decides which files start
# first.
FILE_SECONDS = {
    "tests/decoding/test_static_beam_search.py": 53,
    "tests/inference/test_export.py": 51,
    "tests/decoding/test_hybrid_beam_search.py": 45,
    "tests/inference/test_constraint_signature.py": 35,
    "tests/robustness/test_text_lines.py": 32,
    "tests/inference/test_multilingual_translation.py": 29,
    "tests/inference/test_ensemble_cli.py": 29,
    "tests/data/test_batching.py": 27,
    "tests/inference/test_prefix_signature.py": 26,
    "tests/decoding/test_parallel.py": 22,
    "tests/inference/test_alignment.py": 22,
    "tests/test_model.py": 21,
    "tests/parsing/test_word_alignment.py": 19,
    "tests/robustness/test_workdir_faults.py": 18,
    "tests/training/test_fine_tuning.py": 18,
    "tests/training/test_training.py": 17,
    "tests/training/test_distributed.py": 16,
    "tests/decoding/test_constraints.py": 15,
    "tests/data/test_validation.py": 15,
    "tests/robustness/test_io_faults.py": 15,
}


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true",
                     help="also run the tests marked slow (whole tools end to end: pipelines, signals, clusters, "
                          "XLA compilation, the benchmarks' smoke runs); CI runs them")


def _slow_tests_run(config) -> bool:
    return config.getoption("--slow") or "slow" in config.getoption("markexpr")


def pytest_configure(config):
    """Without the slow tests, XLA compiles at backend optimization level 0 here and in the programs the tests
    start (unless $XLA_FLAGS is set): the compiled searches' equivalence tests check what the searches compute, which
    LLVM's optimisations do not change, and compile in 0.75-0.85x the time. The slow tests (the XLA exports as
    they are served, the benchmarks) compile as a user's program does."""
    if not _slow_tests_run(config):
        os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")


def pytest_collection_modifyitems(config, items):
    """Leaves out the tests marked slow unless ``--slow`` or a ``-m`` expression naming them asks for them; then files run
    longest first: those with slow tests (most first), then by FILE_SECONDS; each file's tests stay in their collected
    order.

    pytest-xdist (pyproject.toml: ``--dist=loadfile --no-loadscope-reorder``) hands each worker a whole file at a
    time, in this order: the long files started first leave the short ones to fill the end, so the workers finish
    together instead of one working through a long file alone at the end.
    """
    for item in items:  # a test of the real corpora is a corpus test, however it reaches them
        if "real_data_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.corpus)
    if not _slow_tests_run(config):
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("slow")])
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
    slow = collections.Counter(item.path for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: (-slow[item.path], -FILE_SECONDS.get(os.path.relpath(item.path, REPO_ROOT), 0)))


@pytest.fixture(scope="session", autouse=True)
def _session_seed():
    import keras

    keras.utils.set_random_seed(1234)  # TensorFlow's global seed too, once


@pytest.fixture(autouse=True)
def _seed(_session_seed):
    """Python's, NumPy's and Keras' seeds before each test: what ``keras.utils.set_random_seed`` does, without its
    ``tf.random.set_seed``. TensorFlow reads its global seed when it traces, so setting it would trace again every
    ``tf.function`` traced before (a module fixture's search: 10 s for a small model's). A test that draws from
    ``tf.random`` passes its own seed."""
    import random

    from keras.src.backend.common import global_state
    from keras.src.random import seed_generator

    random.seed(1234)  # Keras' default seeds (initializers, dropout layers) come from Python's random
    np.random.seed(1234)
    global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, None)  # unseeded keras.random draws
    yield


@pytest.fixture
def tiny_recipe():
    from keras_transformer import recipes

    return recipes.get("tiny")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The generated corpora's directory ($KT_DATA_DIR in the tests)."""
    return Path(os.environ["KT_DATA_DIR"])


@pytest.fixture(scope="session")
def multi30k_dir(data_dir) -> Path:
    """The generated Multi30k's directory: train (2,000 pairs), val (500), test_2016_flickr (200)."""
    return data_dir / "multi30k-task1-en-de"


@pytest.fixture(scope="session")
def real_data_dir() -> Path:
    """The real corpora's directory, for tests marked ``corpus`` (``real_multi30k_dir`` and the parsing tests'
    ``sample_data_dir`` fetch what they read into it). Pass it to the tools (``--data_dir``): the tests'
    $KT_DATA_DIR is the generated one."""
    path = REAL_DATA_DIR if REAL_DATA_DIR.is_dir() else Path.home() / ".cache" / "keras_transformer" / "data"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def real_multi30k_dir(real_data_dir) -> Path:
    """The real Multi30k's directory, its train, val and test_2016_flickr fetched as the tools fetch them."""
    from keras_transformer.config import DataConfig
    from keras_transformer.data import corpora
    from tests.support import fetched

    for split in ("train", "val", "test_2016_flickr"):
        fetched("Multi30k", lambda: corpora.split_files(DataConfig(), split, real_data_dir))
    return real_data_dir / corpora.MULTI30K_DIR


@pytest.fixture(scope="session")
def multi30k_text(multi30k_dir):
    """(English, German) first 1,000 lines of the generated Multi30k train."""
    from keras_transformer.data import corpora

    return (corpora.read_lines(multi30k_dir / "train.en.gz")[:1000],
            corpora.read_lines(multi30k_dir / "train.de.gz")[:1000])


@pytest.fixture(scope="session")
def trained_workdir(tmp_path_factory, multi30k_text):
    """A training work directory: recipe.json, checkpoints/ckpt-{4,8,12}, tokenizer/tiny_inference.model.

    Seeded: the same weights in every run, whichever test (and so whichever earlier random draws) builds it first.
    """
    import keras

    from keras_transformer import training
    from keras_transformer.checkpoints import CheckpointState
    from keras_transformer.workdir import WorkDir
    from keras_transformer.data.tokenizer import Tokenizer
    from tests.inference.support import VOCAB, inference_recipe

    def build(workdir):
        english, german = multi30k_text
        Tokenizer.train(english + german, VOCAB, workdir / "tokenizer" / "tiny_inference", sample_lines=2000)
        recipe = inference_recipe()
        WorkDir(workdir).write_recipe(recipe)
        keras.utils.set_random_seed(0)
        model = training.compile_model(recipe)
        state = CheckpointState(model, str(workdir / "checkpoints"), recipe.train.keep_checkpoints)
        rng = np.random.default_rng(0)
        for step in (4, 8, 12):
            for weight in model.weights:
                weight.assign(weight.numpy() + rng.normal(0.0, 0.05, weight.shape).astype(np.float32))
            model.optimizer.iterations.assign(step)
            state.save(step)

    return _built_once(tmp_path_factory, Path("inference", "run"), build)


@pytest.fixture(scope="session")
def exported(trained_workdir, tmp_path_factory):
    """``kt-export`` of the work directory's latest checkpoint (all four signatures): its directory (a Path)."""
    from tests.support import run_cli

    def build(export_dir):
        result = run_cli("export", f"--model={trained_workdir}", f"--export_dir={export_dir}")
        assert "exported" in result.stdout and os.path.isfile(export_dir / "saved_model.pb")

    return _built_once(tmp_path_factory, Path("export", "translator"), build)


def _built_once(tmp_path_factory, name: Path, build) -> Path:
    """``build(path)`` once in a test run, shared by its xdist workers: the first worker to need it builds it under a
    lock, the others wait for it (a build takes 5-20 s; each worker built its own before)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, above each worker's own
    path, done = root / "shared" / name, root / "shared" / f"{name}.done"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(path, ignore_errors=True)  # what a failed build left
            build(path)
            done.touch()
    return path


_WORDS = ("a dog runs over the green field . two men play football in the park near river "
          "ein hund läuft über die grüne wiese zwei männer spielen fußball im park am fluss").split()

# 2 encoder layers, 1 decoder layer: PNG counts tell the kinds apart, and beam search traces fast.
# vocab_size is replaced by the tokenizer's (small_config).
SMALL_CONFIG = ModelConfig(vocab_size=100, d_model=32, d_ff=64, num_heads=4, num_encoder_layers=2,
                           num_decoder_layers=1, max_length=64)


def _sentences(n=200, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(_WORDS, rng.integers(3, 9))) for _ in range(n)]


@pytest.fixture(scope="session")
def small_tokenizer(tmp_path_factory):
    """One piece per word of _WORDS (plus the four reserved ids): 34 pieces."""
    import sentencepiece as spm

    from keras_transformer.data.tokenizer import Tokenizer

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(_sentences()), model_writer=model, model_type="word",
                                   vocab_size=64, hard_vocab_limit=False, pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID,
                                   eos_id=EOS_ID, normalization_rule_name="identity", minloglevel=2)
    path = tmp_path_factory.mktemp("tokenizer") / "words.model"
    path.write_bytes(model.getvalue())
    return Tokenizer(path)


@pytest.fixture(scope="session")
def small_config(small_tokenizer):
    return dataclasses.replace(SMALL_CONFIG, vocab_size=small_tokenizer.vocab_size)


@pytest.fixture(scope="session")
def small_model(small_config):
    """Untrained, seeded; shared by the tests that only read it (do not compile or fit it)."""
    import keras

    from keras_transformer.model import build_model

    keras.utils.set_random_seed(0)
    return build_model(small_config)


@pytest.fixture(scope="module")
def local_corpus(tmp_path_factory, multi30k_dir):
    """A directory of one's own parallel text as plain local files: train.{en,de} (300 pairs) and dev.{en,de}
    (100 pairs), taken from Multi30k val."""
    root = tmp_path_factory.mktemp("corpus")
    for lang in ("en", "de"):
        with gzip.open(multi30k_dir / f"val.{lang}.gz", "rt", encoding="utf-8") as f:
            lines = f.read().splitlines()[:400]
        (root / f"train.{lang}").write_text("\n".join(lines[:300]) + "\n", encoding="utf-8")
        (root / f"dev.{lang}").write_text("\n".join(lines[300:]) + "\n", encoding="utf-8")
    return root
