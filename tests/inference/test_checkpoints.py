"""Checkpoint averaging (§6.1) and loading a work directory for inference."""

import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import checkpoints
from keras_transformer.model import build_model
from keras_transformer import artifacts
from tests.inference.support import inference_recipe, run_cli


_MODEL = []


def _weights(path):
    """Model weights of a checkpoint, as numpy arrays in model.weights order (one model, built once)."""
    if not _MODEL:
        _MODEL.append(build_model(inference_recipe().model))
    checkpoints.restore_weights(_MODEL[0], str(path))
    return [w.numpy() for w in _MODEL[0].weights]


def _copy_workdir(workdir, dest, steps_from=None):
    """A work directory with the recipe and tokenizer; checkpoints renamed {new_step: old_step} if given."""
    shutil.copytree(workdir / "tokenizer", dest / "tokenizer")
    shutil.copy(workdir / "recipe.json", dest / "recipe.json")
    (dest / "checkpoints").mkdir()
    for new, old in (steps_from or {}).items():
        for f in (workdir / "checkpoints").glob(f"ckpt-{old}.*"):
            shutil.copy(f, dest / "checkpoints" / f.name.replace(f"ckpt-{old}.", f"ckpt-{new}."))
    return dest


def test_checkpoints_are_listed_by_step_not_by_name(tmp_path):
    for step in (100, 5, 10):
        (tmp_path / f"ckpt-{step}.index").write_bytes(b"")
    (tmp_path / "ckpt-7.data-00000-of-00001").write_bytes(b"")  # no index: not a checkpoint
    assert [c.step for c in checkpoints.list_checkpoints(tmp_path)] == [5, 10, 100]
    assert checkpoints.list_checkpoints(tmp_path)[0].path == str(tmp_path / "ckpt-5")
    assert checkpoints.list_checkpoints(tmp_path / "missing") == []


def test_averaging_copies_of_one_checkpoint_returns_it_exactly(trained_workdir, tmp_path):
    workdir = _copy_workdir(trained_workdir, tmp_path / "run", {1: 8, 2: 8, 3: 8})
    path = checkpoints.average_checkpoints(workdir, num=3)
    assert path == str(workdir / "averaged" / "ckpt-3")
    for averaged, original in zip(_weights(path), _weights(trained_workdir / "checkpoints" / "ckpt-8")):
        np.testing.assert_array_equal(averaged, original)


def test_averaging_two_checkpoints_gives_their_mean(trained_workdir, tmp_path):
    path = checkpoints.average_checkpoints(trained_workdir, num=2, output_dir=tmp_path)
    assert path == str(tmp_path / "ckpt-12")
    manifest = json.loads((tmp_path / "ckpt-12.json").read_text())
    assert manifest["steps"] == [8, 12]
    assert manifest["averaged"] == [str(trained_workdir / "checkpoints" / f"ckpt-{s}") for s in (8, 12)]
    w8, w12 = (_weights(trained_workdir / "checkpoints" / f"ckpt-{s}") for s in (8, 12))
    for averaged, a, b in zip(_weights(path), w8, w12):
        np.testing.assert_array_equal(averaged, ((a.astype(np.float64) + b) / 2).astype(np.float32))
        assert not np.array_equal(averaged, b)  # the checkpoints differ, so the mean is new


def test_asking_for_more_than_exist_averages_all(trained_workdir, tmp_path):
    path = checkpoints.average_checkpoints(trained_workdir, num=5, output_dir=tmp_path)
    assert json.loads((tmp_path / "ckpt-12.json").read_text())["steps"] == [4, 8, 12]
    ws = [_weights(trained_workdir / "checkpoints" / f"ckpt-{s}") for s in (4, 8, 12)]
    for i, averaged in enumerate(_weights(path)):
        expected = (ws[0][i].astype(np.float64) + ws[1][i] + ws[2][i]) / 3
        np.testing.assert_allclose(averaged, expected, rtol=1e-6, atol=1e-7)


def test_kt_average_then_load_the_average(trained_workdir, tmp_path):
    workdir = _copy_workdir(trained_workdir, tmp_path / "run", {4: 4, 8: 8, 12: 12})
    with pytest.raises(FileNotFoundError, match="kt-average"):
        artifacts.load_model(workdir, "averaged")
    result = run_cli("average", f"--model={workdir}", "--num=2")
    assert result.stdout.strip() == f"averaged 2 checkpoints (steps 8, 12) into {workdir}/averaged/ckpt-12"
    model, recipe, tok = artifacts.load_model(workdir, "averaged")
    assert recipe == inference_recipe() and tok.vocab_size == recipe.model.vocab_size
    w8, w12 = (_weights(workdir / "checkpoints" / f"ckpt-{s}") for s in (8, 12))
    for weight, a, b in zip(model.weights, w8, w12):
        np.testing.assert_array_equal(weight.numpy(), ((a.astype(np.float64) + b) / 2).astype(np.float32))


def test_the_average_kt_pipeline_evaluated_decodes_with_the_alpha_it_chose(trained_workdir, tmp_path):
    """As the pipeline's export does: its pipeline.json's α for that average, under the same recipe only."""
    workdir = _copy_workdir(trained_workdir, tmp_path / "run", {8: 8, 12: 12})
    run_cli("average", f"--model={workdir}", "--num=2")
    recipe_dict = json.loads((workdir / "recipe.json").read_text())

    def state(averaged, recipe):
        (workdir / "pipeline.json").write_text(json.dumps({"key": {"recipe": recipe, "eval_sentences": None}, "done": {
            "evaluated": {"averaged": averaged, "decode": {"alpha": 1.5}}}}))
        return [artifacts.load_model(workdir, checkpoint)[1].decode.alpha for checkpoint in ("averaged", "latest")]

    recipe_alpha = inference_recipe().decode.alpha
    assert recipe_alpha != 1.5
    assert state("elsewhere/averaged/ckpt-12", recipe_dict) == [1.5, recipe_alpha]  # the path as the pipeline ran
    assert state("elsewhere/averaged/ckpt-8", recipe_dict) == [recipe_alpha, recipe_alpha]  # another average
    assert state("elsewhere/averaged/ckpt-12", {**recipe_dict, "name": "other"}) == [recipe_alpha, recipe_alpha]
    (workdir / "pipeline.json").write_text("{")
    assert artifacts.load_model(workdir, "averaged")[1].decode.alpha == recipe_alpha


def test_load_latest_and_errors(trained_workdir, tmp_path):
    model, _, _ = artifacts.load_model(trained_workdir)  # latest = ckpt-12
    for weight, saved in zip(model.weights, _weights(trained_workdir / "checkpoints" / "ckpt-12")):
        np.testing.assert_array_equal(weight.numpy(), saved)
    workdir = _copy_workdir(trained_workdir, tmp_path / "run", {12: 12})
    shutil.rmtree(workdir / "tokenizer")
    with pytest.raises(FileNotFoundError, match=str(workdir / "tokenizer")):
        artifacts.load_model(workdir)
    with pytest.raises(FileNotFoundError, match="no such checkpoint"):
        artifacts.load_model(trained_workdir, str(tmp_path / "ckpt-99"))
    # Weights are found by their model paths: a checkpoint of the model alone loads whole; one holding only the
    # shared embedding is refused, not half-loaded.
    model_only = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt-1"))
    for weight, again in zip(model.weights, artifacts.load_model(trained_workdir, model_only)[0].weights):
        np.testing.assert_array_equal(weight.numpy(), again.numpy())
    embedding_only = tf.train.Checkpoint(model=tf.train.Checkpoint(embedding=model.embedding)).write(
        str(tmp_path / "ckpt-2"))
    with pytest.raises(ValueError, match=f"{embedding_only}: does not hold this model's 43 weights"):
        artifacts.load_model(trained_workdir, embedding_only)
