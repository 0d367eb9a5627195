"""A work directory's life: resume continues the data stream, best checkpoints, early stopping, refusals."""

import json
import types

import numpy as np
import pytest

from keras_transformer import checkpoints, training
from keras_transformer.training.callbacks import KeepBest
from tests.synthetic import as_dataset, copy_batches, small_recipe


def _recipe(tiny_recipe, **train):
    return small_recipe(tiny_recipe, **dict(dict(train_steps=4, checkpoint_every=2, eval_batches=2), **train))


def _datasets():
    batches = copy_batches(num_batches=5)  # 5 distinct batches cycling: a replay or a skip changes the weights
    return as_dataset(batches), as_dataset(batches[:2], repeat=False)


@pytest.mark.slow
@pytest.mark.parametrize("accumulation", [1, 2])
def test_an_interrupted_run_sees_the_batches_of_an_uninterrupted_one(tiny_recipe, tmp_path, accumulation):
    whole = training.train(_recipe(tiny_recipe, gradient_accumulation_steps=accumulation), str(tmp_path / "whole"),
                           strategy="one_device", datasets=_datasets(), verbose=0)
    first = training.train(_recipe(tiny_recipe, train_steps=2, gradient_accumulation_steps=accumulation),
                           str(tmp_path / "split"), strategy="one_device", datasets=_datasets(), verbose=0)
    second = training.train(_recipe(tiny_recipe, gradient_accumulation_steps=accumulation), str(tmp_path / "split"),
                            strategy="one_device", datasets=_datasets(), verbose=0)
    assert (first.steps, second.resumed_from, second.steps) == (2, 2, 4)
    assert second.weights_sha256 == whole.weights_sha256  # bit-identical: same batches in the same order


def test_training_batches_are_the_same_on_every_start(tiny_recipe, tmp_path):
    """The corpus pipeline is deterministic under the seed, so skipping N batches lands where a run stopped."""
    from keras_transformer.data import build_datasets

    def digests(workdir, skip, n=6):
        ds = build_datasets(tiny_recipe, workdir, deterministic=True)[0].skip(skip).take(n)
        return [hash(tuple(np.concatenate([x.ravel() for x in (s, ti, to)]).tolist()))
                for (s, ti), to in ds.as_numpy_iterator()]

    uninterrupted = digests(tmp_path / "a", 0, 10)
    assert digests(tmp_path / "b", 4) == uninterrupted[4:]
    assert len(set(uninterrupted)) == 10


class _State:
    is_chief = True

    def __init__(self):
        self.written = []

    def write(self, prefix):
        self.written.append(prefix)
        open(prefix + ".index", "w").close()


def _keep_best(tmp_path, monitor, scores, keep=2, patience=0, steps=None, min_gap=0):
    state = _State()
    callback = KeepBest(state, str(tmp_path), monitor, keep, patience, min_gap)
    step = types.SimpleNamespace(value=0)
    callback.set_model(types.SimpleNamespace(optimizer=types.SimpleNamespace(
        iterations=types.SimpleNamespace(numpy=lambda: step.value)), stop_training=False))
    stopped_at = None
    for i, score in enumerate(scores):
        step.value = 100 * (i + 1) if steps is None else steps[i]
        callback.on_epoch_end(i, {monitor: score})
        if callback.model.stop_training and stopped_at is None:
            stopped_at = step.value
    return callback, state, stopped_at


def test_keep_best_keeps_the_lowest_val_loss_and_deletes_the_rest(tmp_path):
    callback, state, _ = _keep_best(tmp_path, "val_loss", [3.0, 2.0, 2.5, 1.5, 2.2])
    manifest = json.loads((tmp_path / "best.json").read_text())
    assert manifest["kept"] == [[400, 1.5], [200, 2.0]]
    assert sorted(p.name for p in tmp_path.glob("*.index")) == ["ckpt-200.index", "ckpt-400.index"]
    assert [p.rsplit("-", 1)[1] for p in state.written] == ["100", "200", "300", "400"]  # 500 never entered


def test_keep_best_by_bleu_is_higher_is_better_and_survives_a_restart(tmp_path):
    _keep_best(tmp_path, "val_bleu", [10.0, 12.0, 11.0])
    again = KeepBest(_State(), str(tmp_path), "val_bleu", 2)
    assert again.kept == [(200, 12.0), (300, 11.0)]
    with pytest.raises(ValueError, match="keep_best_by: .* ranks checkpoints by val_bleu"):
        KeepBest(_State(), str(tmp_path), "val_loss", 2)


def test_a_checkpoint_just_after_another_takes_its_place_if_it_scores_better(tmp_path):
    """A time budget ending a step after a regular checkpoint: the two are one model, not two to average; the
    better scoring of the two keeps the place."""
    callback, state, _ = _keep_best(tmp_path, "val_f1", [70.0, 72.0, 71.0, 71.5], keep=3, steps=[100, 200, 300, 301],
                                    min_gap=50)
    assert callback.kept == [(200, 72.0), (301, 71.5), (100, 70.0)]  # 301 replaces 300
    assert sorted(p.name for p in tmp_path.glob("*.index")) == ["ckpt-100.index", "ckpt-200.index", "ckpt-301.index"]
    assert len(callback.history) == 4
    (tmp_path / "worse").mkdir()
    callback, state, _ = _keep_best(tmp_path / "worse", "val_f1", [70.0, 72.0, 71.5, 71.0], keep=3,
                                    steps=[100, 200, 300, 301], min_gap=50)
    assert callback.kept == [(200, 72.0), (300, 71.5), (100, 70.0)]  # 300 stays; 301 is not a second to average
    assert [p.rsplit("-", 1)[1] for p in state.written] == ["100", "200", "300"]
    assert len(callback.history) == 4
    (tmp_path / "b").mkdir()
    callback, _, _ = _keep_best(tmp_path / "b", "val_f1", [70.0, 72.0, 71.0, 71.5], keep=3, steps=[100, 200, 300, 360],
                                min_gap=50)
    assert callback.kept == [(200, 72.0), (360, 71.5), (300, 71.0)]


def test_early_stopping_after_patience_validations_without_a_new_best(tmp_path):
    callback, _, stopped_at = _keep_best(tmp_path, "val_loss", [3.0, 2.0, 2.1, 2.05, 2.2, 1.0], patience=3)
    assert stopped_at == 500 and callback.stopped_early  # best at 200; 300, 400, 500 no better


def test_keep_best_in_training_and_averaging_the_best(tiny_recipe, tmp_path):
    recipe = _recipe(tiny_recipe, train_steps=6, checkpoint_every=1, keep_best_by="val_loss", keep_best=2)
    summary = training.train(recipe, str(tmp_path), strategy="one_device", datasets=_datasets(), verbose=0)
    assert summary.steps == 6 and not summary.stopped_early
    val_losses = summary.history["val_loss"]
    best = checkpoints.best_checkpoints(tmp_path)
    expected = sorted(range(1, 7), key=lambda s: val_losses[s - 1])[:2]
    assert [c.step for c in best] == expected
    assert checkpoints.resolve_checkpoint(tmp_path, "best") == best[0].path
    prefix = checkpoints.average_checkpoints(tmp_path, num=2, best=True)
    assert json.loads(open(prefix + ".json").read())["steps"] == sorted(expected)
