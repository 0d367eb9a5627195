"""kt-train, kt-data-report and kt-pipeline on one's own parallel text, from the command line."""

import json

import pytest

from keras_transformer import recipes
from keras_transformer.config import Recipe
from tests.support import run_cli


@pytest.mark.slow
def test_kt_train_on_local_text_writes_the_resolved_recipe(corpus, tmp_path):
    workdir = tmp_path / "run"
    out = run_cli("train", "--recipe=tiny", "--num_layers=1", f"--train_prefix={corpus}/train",
                  f"--eval_prefix={corpus}/dev", "--source_lang=en", "--target_lang=de", "--vocab_size=600",
                  "--max_length=48", "--tokens_per_batch=1024", "--bucket_boundaries=8,16,24,32,48",
                  "--tokenizer_sample_lines=500", "--shuffle_buffer=64", "--train_steps=2", "--checkpoint_every=2",
                  "--keep_best_by=val_loss", "--keep_best=1", "--seed=3", f"--workdir={workdir}", timeout=300)
    assert f"trained tiny to step 2 in {workdir}" in out.stdout
    recipe = Recipe.from_dict(json.loads((workdir / "recipe.json").read_text()))
    tiny = recipes.get("tiny")
    assert (recipe.data.corpus, recipe.data.train_prefix, recipe.data.eval_prefix) == (
        "text", f"{corpus}/train", f"{corpus}/dev")
    assert (recipe.data.max_length, recipe.data.tokens_per_batch, recipe.data.bucket_boundaries) == (
        48, 1024, (8, 16, 24, 32, 48))
    assert (recipe.data.tokenizer_sample_lines, recipe.data.shuffle_buffer) == (500, 64)
    assert recipe.model.vocab_size == 600 and recipe.model.d_model == tiny.model.d_model
    assert (recipe.train.train_steps, recipe.train.keep_best_by, recipe.train.keep_best, recipe.train.seed) == (
        2, "val_loss", 1, 3)
    # The written recipe is itself a --recipe: the same run again resumes at its last step.
    again = run_cli("train", f"--recipe={workdir}/recipe.json", f"--workdir={workdir}", timeout=300)
    assert f"trained tiny to step 2 in {workdir}" in again.stdout


def test_kt_data_report_on_local_text(corpus, tmp_path):
    out = run_cli("data_report", "--recipe=multi30k", f"--train_prefix={corpus}/train", "--source_lang=en",
                  "--target_lang=de", "--vocab_size=600", "--max_length=48", "--tokens_per_batch=256",
                  "--bucket_boundaries=16,32,48", f"--workdir={tmp_path}", "--json", timeout=300)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert (report["corpus"], report["vocab_size"], report["max_length"], report["tokens_per_batch"]) == (
        "text", 600, 48, 256)
    assert report["num_buckets"] == 3 * 3  # (source, target) cells of --bucket_boundaries=16,32,48
    assert report["pairs_read"] == 300 and report["source"] == f"{corpus}/train.en"


@pytest.mark.parametrize("name, args, starts", [
    ("pipeline", ["--train_prefix=x", "--corpus=multi30k"], "error: --train_prefix: local files need --corpus=text"),
    ("pipeline", ["--train_prefix=x", "--eval_prefix=y"], "error: --test_prefix: required with corpus text"),
    ("pipeline", ["--keep_best_by=val_bleu"], "error: --keep_best_by: val_bleu needs bleu_samples > 0"),
    ("pipeline", ["--max_tokens_per_device=abc"], "error: flag --max_tokens_per_device=abc: invalid literal"),
    ("data_report", ["--recipe=nope"], "error: --recipe: 'nope' is neither a known recipe"),
    ("data_report", ["--vocab_size=2"], "error: --vocab_size: must be > 4"),
    ("train", ["--early_stopping_patience=2", "--workdir=/tmp/unused"], "error: --early_stopping_patience:"),
])
def test_bad_flags_exit_2_with_one_line(name, args, starts):
    out = run_cli(name, *args, check=False, timeout=300)
    lines = [line for line in out.stderr.strip().splitlines() if line.strip()]
    assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith(starts), out.stderr[-2000:]
