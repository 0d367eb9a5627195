"""bench/bench_engines.py at its smallest settings: every system it can run here gives a row with figures, a
missing peer package is a skipped row with its reason, and the JSON line holds every figure.

The shipped model serves four times, exported afresh (on TensorFlow's own kernels, as kt-translate runs it, and
on oneDNN's: saved_model_onednn, the same export) and twice as it is (--baseline_saved_model, a list): same
weights, so the same translations. Without torch/transformers or ctranslate2 (CI) those rows are skipped,
not failed.
"""

import importlib.util
import json
import os

import pytest

from tests.conftest import REPO_ROOT
from tests.support import run_cli

pytestmark = pytest.mark.slow  # every test reads the module fixture's runs of the scripts
SHIPPED = os.path.join(REPO_ROOT, "saved_models", "multi30k_en_de")
SYSTEMS = ("saved_model", "saved_model_onednn", "ctranslate2_float32", "kt_ctranslate2_float32", "hf")
HAS_CTRANSLATE2 = all(importlib.util.find_spec(p)
                      for p in ("ctranslate2", "keras_transformer.engines.ctranslate2_convert"))
HAS = {"hf": all(importlib.util.find_spec(p) for p in ("torch", "transformers")),
       "ctranslate2_float32": HAS_CTRANSLATE2, "kt_ctranslate2_float32": HAS_CTRANSLATE2}


@pytest.fixture(scope="module")
def result():
    proc = run_cli("bench/bench_engines.py", "--num_sentences=3", "--batch_sizes=2", "--rounds=1", "--pause=0",
                   f"--systems={','.join(SYSTEMS)}", f"--baseline_saved_model={SHIPPED},{SHIPPED}", timeout=600)
    lines = proc.stdout.strip().splitlines()
    assert any(line.startswith("| ") for line in lines), proc.stdout
    return json.loads(lines[-1]), proc.stdout


def test_every_runnable_system_has_a_row_and_the_others_a_reason(result):
    payload, stdout = result
    assert payload["bench"] == "engines" and payload["num_sentences"] == 3 and payload["rounds"] == 1
    with open(os.path.join(SHIPPED, "metadata.json"), encoding="utf-8") as f:
        alpha = json.load(f)["decode"]["alpha"]  # the settings of the export benchmarked, chosen on val
    assert (payload["beam_size"], payload["alpha"], payload["extra_length"]) == (4, alpha, 50)
    assert {"date", "cpu_count", "threads", "inter_threads", "versions", "skipped", "results"} <= set(payload)
    rows = {r["system"]: r for r in payload["results"]}
    for system in ("saved_model", "saved_model_onednn", "baseline", "baseline2"):
        assert system in rows
    assert "oneDNN" in rows["saved_model_onednn"]["label"] and "oneDNN" not in rows["saved_model"]["label"]
    assert SHIPPED in rows["baseline2"]["label"] and "| ours × |" in stdout
    for system, installed in HAS.items():
        if installed:
            assert system in rows, payload["skipped"].get(system)
        else:
            assert f"skipped {system}:" in stdout and system in payload["skipped"]
    for row in rows.values():
        assert row["batch_size"] == 2 and row["sentences"] == 3 and row["sentences_per_s"] > 0
        assert len(row["round_seconds"]) == 1 and 0 <= row["bleu"] <= 100 and row["same_output_every_round"]
        assert 0 <= row["identical_vs_saved_model"] <= 3
        assert ("ratio_vs_hf" in row) == ("hf" in rows)
        assert ("ratio_vs_ctranslate2_float32" in row) == ("ctranslate2_float32" in rows)
        assert ("saved_model_speedup" in row) == row["system"].startswith("baseline")


def test_same_weights_same_translations(result):
    rows = {r["system"]: r for r in result[0]["results"]}
    for ours in ("saved_model", "saved_model_onednn"):  # one export, TensorFlow's kernels and oneDNN's
        assert rows[ours]["identical_vs_saved_model"] == 3
    for baseline in ("baseline", "baseline2"):  # the shipped export, loaded as it is
        assert rows[baseline]["identical_vs_saved_model"] == 3 and rows[baseline]["saved_model_speedup"] > 0
    for reference in ("hf", "ctranslate2_float32"):
        if reference in rows:
            assert rows[reference][f"ratio_vs_{reference}"] == 1.0
