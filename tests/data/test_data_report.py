"""kt-data-report: the acceptance figures on Multi30k train, and the command itself."""

import dataclasses
import json

import pytest

from keras_transformer import recipes
from keras_transformer.data import report as data_report
from tests.support import run_cli

REQUIRED = {"pairs_kept", "pairs_filtered", "vocab_size", "distinct_shapes", "num_buckets", "max_batch_tokens",
            "padding_efficiency_source", "padding_efficiency_target"}


def test_multi30k_train_meets_the_acceptance_figures(multi30k_tokenizer, workdir, data_dir):
    recipe = recipes.get("multi30k")
    budget = recipe.data.tokens_per_batch
    r = data_report.report(recipe, workdir, data_dir)
    assert (r["pairs_read"], r["empty_skipped"], r["pairs_kept"], r["pairs_filtered"]) == (29000, 0, 29000, 0)
    assert r["vocab_size"] == 8000 and r["num_buckets"] == 64
    assert r["max_batch_tokens"] <= r["tokens_per_batch"] == budget  # no batch exceeds the budget
    assert r["padding_efficiency_source"] >= 0.90 and r["padding_efficiency_target"] >= 0.90
    assert 0 < r["distinct_shapes"] <= r["num_buckets"]
    assert r["pairs_in_batches"] + r["pairs_carried_over"] == 29000 and r["pairs_in_batches"] > 20000
    lo, median, hi = r["target_tokens_per_batch"]
    assert 0 < lo <= median <= hi <= budget
    text = data_report.format_report(r)
    assert "padding efficiency source 0.9" in text and "of 64 buckets" in text


def test_command_prints_a_summary_then_one_json_line(multi30k_tokenizer, workdir, data_dir):
    proc = run_cli("data_report", "--recipe=multi30k", f"--workdir={workdir}", f"--data_dir={data_dir}",
                   "--split=val", "--json", timeout=300)
    lines = proc.stdout.strip().splitlines()
    r = json.loads(lines[-1])
    assert REQUIRED <= set(r)
    assert (r["split"], r["pairs_kept"] + r["pairs_filtered"], r["vocab_size"]) == ("val", 1014, 8000)
    assert r["pairs_in_batches"] == r["pairs_kept"]  # evaluation batching keeps partial batches
    assert any(line.startswith("  padding efficiency") for line in lines[:-1])


def test_report_names_a_missing_split_file(multi30k_tokenizer, workdir, data_dir):
    with pytest.raises(FileNotFoundError, match=r"split 'newstest2099': missing files .*newstest2099\.en.*--data_dir"):
        data_report.report(recipes.get("multi30k"), workdir, data_dir, split="newstest2099")


def test_report_refuses_a_budget_below_the_longest_bucket(multi30k_tokenizer, workdir, data_dir):
    recipe = recipes.get("multi30k")
    small = dataclasses.replace(recipe, data=dataclasses.replace(recipe.data, tokens_per_batch=40))
    with pytest.raises(ValueError, match="tokens_per_batch: 40 is too small"):
        data_report.report(small, workdir, data_dir, split="val")
