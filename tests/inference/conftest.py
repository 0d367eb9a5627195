"""Session fixtures for inference tests: a tiny trained work directory and its exported SavedModel.

The work directory is laid out as ``training.train`` leaves it, written by the
trainer's own pieces (``write_recipe``, ``compile_model``, the
``CheckpointState`` its callback saves with) but without fitting, which takes
too long for a unit test: checkpoints 4, 8 and 12 of a 1+1-layer model whose
weights move by a random step between saves. The tokenizer is a 400-piece
SentencePiece model trained on 1,000 Multi30k sentence pairs. The model
translates nothing well; the tests check exactness, not quality.
"""

import os
from pathlib import Path

import numpy as np
import pytest

from keras_transformer.data import corpora
from keras_transformer.data.tokenizer import Tokenizer
from tests.inference.support import VOCAB, inference_recipe, run_cli

@pytest.fixture(scope="session")
def multi30k_text():
    """(English, German) first 1,000 lines of Multi30k train; skips without the corpus."""
    path = corpora.resolve_data_dir() / corpora.MULTI30K_DIR
    if not (path / "train.en.gz").is_file():
        pytest.skip(f"Multi30k not found under {path} (set KT_DATA_DIR)")
    return (corpora.read_lines(path / "train.en.gz")[:1000], corpora.read_lines(path / "train.de.gz")[:1000])


@pytest.fixture(scope="session")
def trained_workdir(tmp_path_factory, multi30k_text):
    """A training work directory: recipe.json, checkpoints/ckpt-{4,8,12}, tokenizer/tiny_inference.model."""
    from keras_transformer import training
    from keras_transformer.callbacks import CheckpointState

    workdir = tmp_path_factory.mktemp("inference") / "run"
    english, german = multi30k_text
    Tokenizer.train(english + german, VOCAB, workdir / "tokenizer" / "tiny_inference", sample_lines=2000)
    recipe = inference_recipe()
    training.write_recipe(recipe, str(workdir))
    model = training.compile_model(recipe)
    state = CheckpointState(model, str(workdir / "checkpoints"), recipe.train.keep_checkpoints)
    rng = np.random.default_rng(0)
    for step in (4, 8, 12):
        for weight in model.weights:
            weight.assign(weight.numpy() + rng.normal(0.0, 0.05, weight.shape).astype(np.float32))
        model.optimizer.iterations.assign(step)
        state.save(step)
    return workdir


@pytest.fixture(scope="session")
def exported(trained_workdir, tmp_path_factory) -> Path:
    """``kt-export`` of the work directory's latest checkpoint (all four signatures)."""
    export_dir = tmp_path_factory.mktemp("export") / "translator"
    result = run_cli("export", f"--model={trained_workdir}", f"--export_dir={export_dir}")
    assert "exported" in result.stdout and os.path.isfile(export_dir / "saved_model.pb")
    return export_dir
