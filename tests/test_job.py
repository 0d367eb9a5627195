"""The README's main command, on the tiny recipe: train, average, evaluate, export, translate."""

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.support import run_cli


@pytest.mark.slow
def test_kt_pipeline_end_to_end(tmp_path):
    export_dir = tmp_path / "export"
    command = ("pipeline", "--recipe=tiny", "--train_steps=40", "--checkpoint_every=20",
               f"--workdir={tmp_path / 'run'}", f"--export_dir={export_dir}", "--eval_sentences=16")
    out = run_cli(*command, timeout=900)
    for stage in ("[1/5]", "[2/5]", "[3/5]", "[4/5]", "[5/5]"):
        assert stage in out.stdout
    metadata = json.loads((export_dir / "metadata.json").read_text())
    assert metadata["step"] == 40 and metadata["averaged_steps"] == [20, 40] and metadata["policy"] == "float32"
    assert "to step 40 in" in out.stdout and "(float32)" in out.stdout  # no time budget stopped it
    assert metadata["test_sentences"] == 16 and 0.0 <= metadata["bleu"] <= 100.0
    assert metadata["signature"].startswith("nrefs:1|case:mixed") and "tok:13a" in metadata["signature"]
    assert (export_dir / "saved_model.pb").is_file()
    assert len(metadata["samples"]) == 3
    assert metadata["command"].startswith("kt-pipeline --recipe=tiny --train_steps=40")
    # The tiny run scores test_2016_flickr, so the shipped Multi30k model is printed beside it with its command.
    shipped = json.loads(Path(REPO_ROOT, "saved_models", "multi30k_en_de", "metadata.json").read_text())
    assert ("shipped " in out.stdout and f"BLEU {shipped['bleu']:.2f}" in out.stdout
            and "reproduce: kt-pipeline --recipe=multi30k --workdir=runs/multi30k" in out.stdout), out.stdout

    # The same command again, after success: every stage is recognised as done, the export and metadata stay.
    again = run_cli(*command, timeout=600)
    for line in ("[1/5] already trained tiny to step 40", "[2/5] already averaged steps [20, 40]",
                 "[3/5] already evaluated on test_2016_flickr", "[4/5] already exported to"):
        assert line in again.stdout, again.stdout
    assert json.loads((export_dir / "metadata.json").read_text()) == metadata
    # Interrupted before its export was written: the same command exports, and redoes nothing else.
    shutil.rmtree(export_dir)
    third = run_cli(*command, timeout=600)
    assert "[3/5] already evaluated" in third.stdout and "[4/5] exported the SavedModel" in third.stdout
    assert json.loads((export_dir / "metadata.json").read_text()) == metadata
    # Another export in the way is still refused, before any work.
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    refused = run_cli(*command[:-2], f"--export_dir={other}", "--eval_sentences=16", check=False, timeout=300)
    assert refused.returncode == 2 and "error: --export_dir:" in refused.stderr
    assert "exists and is not an empty directory" in refused.stderr


def _write_metadata(directory, **fields):
    directory.mkdir(parents=True)
    (directory / "metadata.json").write_text(json.dumps(fields))


def test_shipped_results_are_the_exports_on_the_same_test_set_with_a_command(tmp_path):
    from keras_transformer import recipes
    from keras_transformer.pipeline import shipped_results

    data = {"corpus": "multi30k", "source_lang": "en", "target_lang": "de"}
    _write_metadata(tmp_path / "a", test_split="test_2016_flickr", command="kt-pipeline --recipe=multi30k",
                    recipe_config={"data": data})
    _write_metadata(tmp_path / "b", test_split="test_2016_flickr", recipe_config={"data": data})  # no command
    _write_metadata(tmp_path / "c", test_split="test_2017_flickr", command="x", recipe_config={"data": data})
    _write_metadata(tmp_path / "d", test_split="test_2016_flickr", command="x",
                    recipe_config={"data": dict(data, source_lang="de", target_lang="en")})
    _write_metadata(tmp_path / "e", test_split="test_2016_flickr", command="x")  # no recipe_config
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "metadata.json").write_text("{not json")
    _write_metadata(tmp_path / "self", test_split="test_2016_flickr", command="x", recipe_config={"data": data})
    found = shipped_results(recipes.get("multi30k"), str(tmp_path / "self"), shipped_dir=tmp_path)
    assert [m["export_dir"] for m in found] == [str(tmp_path / "a")]


def test_stage_one_names_the_time_budget_that_stopped_training(tmp_path, monkeypatch):
    from keras_transformer import recipes
    from keras_transformer import training
    from keras_transformer import pipeline as job
    from keras_transformer.checkpoints import averaging

    (tmp_path / "averaged.json").write_text(json.dumps({"steps": [400, 420, 440]}))
    monkeypatch.setattr(training, "train", lambda *args, **kwargs: training.TrainSummary(
        steps=470, resumed_from=0, weights_sha256="", stopped_by_time=True, policy="float32"))
    monkeypatch.setattr(averaging, "average_checkpoints", lambda *args, **kwargs: str(tmp_path / "averaged"))
    lines = []
    _, trained = job.train_and_average(recipes.get("multi30k_demo"), str(tmp_path), "data", "one_device", lines.append)
    assert lines[0].startswith("[1/5] trained multi30k_demo to step 470 in ")
    assert lines[0].endswith(" s (float32; its 15-minute budget (--max_train_minutes) stopped it)")
    assert trained["policy"] == "float32" and trained["stopped_by_time"] and trained["step"] == 470
    floor = recipes.get("multi30k_demo").train.min_train_steps
    monkeypatch.setattr(training, "train", lambda *args, **kwargs: training.TrainSummary(
        steps=floor, resumed_from=0, weights_sha256="", stopped_by_time=True, past_budget=True, policy="float32"))
    job.train_and_average(recipes.get("multi30k_demo"), str(tmp_path), "data", "one_device", lines.append)
    assert lines[2].endswith(f" s (float32; past its 15-minute budget (--max_train_minutes) it trained on to the "
                             f"{floor:,} steps of --min_train_steps)")


def test_alpha_is_chosen_on_the_eval_split_by_cased_bleu(monkeypatch):
    import dataclasses

    from keras_transformer import recipes
    from keras_transformer import pipeline as job
    from keras_transformer.tasks.base import Decoded
    from keras_transformer.tasks.translation import TranslationTask

    references = ["Ein Hund läuft am Strand entlang .", "Zwei Männer spielen Fußball im Park ."]
    # α 1.0 gives the references back, α 0.6 and 1.2 a worse (equal) translation: 1.0 wins, ties keep the first.
    outputs = {0.6: ["Ein Hund läuft ."] * 2, 1.0: references, 1.2: ["Ein Hund läuft ."] * 2}
    splits = []
    monkeypatch.setattr(TranslationTask, "read_split", lambda self, recipe, split, data_dir: splits.append(split) or (
        ["a", "b"], references))
    monkeypatch.setattr(TranslationTask, "decode", lambda self, loaded, lines, alpha: Decoded(outputs[alpha], []))
    recipe = recipes.get("multi30k")
    grid = dataclasses.replace(recipe, decode=dataclasses.replace(recipe.decode, alpha_grid=(0.6, 1.0, 1.2)))
    lines = []
    decode, bleu = job.choose_alpha(grid, None, "data", lines.append)
    assert splits == ["val"] and decode == dataclasses.replace(grid.decode, alpha=1.0)
    assert bleu["1"] == 100.0 and bleu["0.6"] == bleu["1.2"] < 100.0
    assert lines[0].endswith("; decoding with α 1")

    outputs[1.0] = outputs[0.6]  # all equal: the first
    assert job.choose_alpha(grid, None, "data", lines.append)[0].alpha == 0.6
    no_grid = dataclasses.replace(recipe, decode=dataclasses.replace(recipe.decode, alpha_grid=()))
    assert job.choose_alpha(no_grid, None, "data") == (no_grid.decode, {})


def test_a_multi_target_test_split_is_scored_per_direction():
    """read_split gives each direction's lines in turn; each slice is scored alone, beside the union's score."""
    import dataclasses

    from keras_transformer import pipeline, recipes, tasks

    recipe = recipes.get("multi30k_multi")
    task = tasks.get(recipe)
    references = ["ein Hund", "zwei Männer", "un chien", "deux hommes", "pes", "dva muži"]
    outputs = ["ein Hund", "zwei Männer", "un chat", "deux hommes", "kočka", "dva muži"]
    found = pipeline._by_direction(task, recipe, outputs, references)
    assert list(found) == ["en-de", "en-fr", "en-cs"]
    for pair, (ours, theirs) in {"en-de": (outputs[:2], references[:2]), "en-fr": (outputs[2:4], references[2:4]),
                                 "en-cs": (outputs[4:], references[4:])}.items():
        line, results = found[pair]
        assert results == task.results(task.score(ours, theirs)) and line == task.format_scores(task.score(ours,
                                                                                                         theirs))
    assert found["en-de"][1]["chrf"] == 100.0 and found["en-fr"][1]["chrf"] < 100.0  # two-word lines: no 4-gram
    one = dataclasses.replace(recipe, data=dataclasses.replace(recipe.data, target_langs=()))
    assert pipeline._by_direction(task, one, outputs, references) == {}
