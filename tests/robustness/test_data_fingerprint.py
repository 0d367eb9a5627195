"""A work directory records its training corpus; a resumed run on changed files is refused naming the file, or with
--allow_data_change restarts the data stream at the new corpus's beginning
(keras_transformer/training/data_fingerprint.py)."""

import dataclasses
import json
import shutil

import pytest

from keras_transformer import recipes
from keras_transformer.training import data_fingerprint
from keras_transformer.checkpoints import list_checkpoints
from tests.robustness.support import assert_one_error_line, snapshot
from tests.robustness.training_runs import summary, train_flags
from tests.support import run_cli


def _rewrite(corpus):
    """Other training text: the pairs in reverse order, the last 20 left out (other sizes, other edges)."""
    for lang in ("en", "de"):
        path = corpus / f"train.{lang}"
        lines = path.read_text(encoding="utf-8").splitlines()
        path.write_text("\n".join(reversed(lines[:280])) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def trained(local_corpus, tmp_path_factory):
    """A copy of the corpus and a work directory trained 100 steps on it."""
    root = tmp_path_factory.mktemp("fingerprint")
    corpus = shutil.copytree(local_corpus, root / "corpus")
    workdir = root / "run"
    run_cli("train", *train_flags(corpus, workdir, 100), timeout=600)
    return corpus, workdir


@pytest.mark.slow
def test_a_changed_corpus_is_refused_then_allowed_with_the_stream_restarted(trained, tmp_path):
    corpus, workdir = trained
    recorded = json.loads((workdir / "corpus_fingerprint.json").read_text())
    files = recorded["train"]["files"]
    assert sorted(files) == [str((corpus / "train.de").resolve()), str((corpus / "train.en").resolve())]
    assert recorded["stream_start_step"] == 0

    _rewrite(corpus)
    before = snapshot(workdir)
    refused = run_cli("train", *train_flags(corpus, workdir, 160), check=False, timeout=600)
    line = assert_one_error_line(refused, f"{(corpus / 'train.de').resolve()}: size", "--allow_data_change")
    assert "the training corpus changed" in line
    assert snapshot(workdir) == before  # refused before anything in it was written

    split = shutil.copytree(workdir, tmp_path / "split")  # the same state, continued in two runs below
    allowed = run_cli("train", *train_flags(corpus, workdir, 160), "--allow_data_change", timeout=600)
    warnings = [line for line in allowed.stderr.splitlines() if "--allow_data_change" in line]
    assert len(warnings) == 1 and "the data position restarts" in warnings[0], allowed.stderr[-2000:]
    assert "trained tiny to step 160" in allowed.stdout
    assert summary(workdir)["resumed_from"] == 100
    recorded = json.loads((workdir / "corpus_fingerprint.json").read_text())
    assert recorded["stream_start_step"] == 100  # the new corpus's stream began at step 100
    new_size = (corpus / "train.en").stat().st_size
    assert recorded["train"]["files"][str((corpus / "train.en").resolve())]["size"] == new_size
    assert len(list((workdir / "tokenizer").glob("*.model"))) == 2  # the old model, copied under the new data's name

    # Stopped at 130 and resumed (no flag: the corpus now matches): the batches of the run above, so its weights.
    run_cli("train", *train_flags(corpus, split, 130), "--allow_data_change", timeout=600)
    run_cli("train", *train_flags(corpus, split, 160), timeout=600)
    assert summary(split)["resumed_from"] == 130
    assert summary(split)["weights_sha256"] == summary(workdir)["weights_sha256"]


def test_the_stream_restarts_only_after_an_allowed_change(tmp_path):
    recipe = recipes.get("tiny")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for lang in ("en", "de"):
        (corpus / f"train.{lang}").write_text("a b c\n" * 3000)  # larger than two edges
    recipe = dataclasses.replace(recipe, data=dataclasses.replace(recipe.data, corpus="text",
                                                                  train_prefix=str(corpus / "train")))
    workdir = tmp_path / "run"
    position = data_fingerprint.check(recipe, workdir)
    assert position.skip_steps(0) == 0  # a fresh run records the corpus
    (workdir / "checkpoints").mkdir()
    (workdir / "checkpoints" / "ckpt-40.index").write_text("")  # what check looks for: a checkpoint exists
    assert list_checkpoints(workdir / "checkpoints")
    assert data_fingerprint.check(recipe, workdir).skip_steps(40) == 40  # same corpus: continue the stream

    text = (corpus / "train.en").read_text()
    (corpus / "train.en").write_text(text[:9000] + "x" + text[9001:])  # the middle differs: seen by the mtime only
    (corpus / "train.de").write_text(text[:-2] + "d\n")  # same size, the last bytes differ
    with pytest.raises(ValueError, match=r"train\.de: its first or last 4096 bytes differ: the training corpus "
                                         r"changed since"):
        data_fingerprint.check(recipe, workdir)
    position = data_fingerprint.check(recipe, workdir, allow_change=True)
    assert position.skip_steps(40) == 0  # from the beginning of the new data
    assert data_fingerprint.check(recipe, workdir).skip_steps(55) == 15  # resumed later: 15 updates into it
