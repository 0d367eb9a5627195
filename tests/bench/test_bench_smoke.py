"""Each benchmark script runs at its smallest settings and ends with a JSON line of the expected shape.

The figures themselves are not checked (benchmarks print figures; they are not timed tests). The
scripts run concurrently to keep the whole smoke run short. Without torch installed (CI), bench_train.py
must still run our side and report the PyTorch row as missing.
"""

import importlib.util
import json
import os

import pytest

from tests.support import finish_cli, start_cli

SMOKE = {
    "train": ["bench/bench_train.py", "--recipes=tiny", "--variants=graph,bf16", "--steps=1", "--rounds=1",
              "--peak_seconds=0.05"],
    "memory": ["bench/bench_memory.py", "--recipes=tiny", "--train_steps=1", "--decode_batch=2", "--extra_length=2",
               "--nostartup", "--phases=train,decode,loss", "--loss_paths=current"],  # legacy needs git history
    "decode": ["bench/bench_decode.py", "--recipe=tiny", "--num_sentences=2", "--batch_sizes=2", "--extra_length=2"],
    "parser_nbest": ["bench/parser_nbest.py", "--num_sentences=3", "--beam_size=2", "--bonus=1", "--tau=1",
                     "--gamma=0.5"],  # the shipped parser on 3 dev trees
    "profile_decode": ["bench/profile_decode.py", "--num_sentences=4", "--batch_size=2", "--rounds=1", "--top=3"],
}
pytestmark = pytest.mark.slow  # every test reads the module fixture's runs of the scripts
TORCH_INSTALLED = importlib.util.find_spec("torch") is not None


@pytest.fixture(scope="module")
def runs():
    """{name: (return code, stdout, stderr)} of every smoke command, run side by side."""
    procs = {name: start_cli(*args) for name, args in SMOKE.items()}
    out = {}
    for name, proc in procs.items():
        done = finish_cli(proc, check=False, timeout=300)
        out[name] = (done.returncode, done.stdout, done.stderr)
    return out


def _last_json(runs, name):
    code, stdout, stderr = runs[name]
    assert code == 0, f"{name}: exit code {code}\n{stderr[-3000:]}"
    lines = stdout.strip().splitlines()
    assert any(line.startswith("| ") for line in lines), f"{name}: no markdown table\n{stdout}"
    return json.loads(lines[-1])


def test_bench_train_reports_ours_and_torch_or_missing(runs):
    result = _last_json(runs, "train")
    assert result["bench"] == "train" and result["cpu_count"] == os.cpu_count()
    assert {"date", "threads", "versions", "peak_flops", "results"} <= set(result)
    rows = {(r["framework"], r["variant"]): r for r in result["results"]}
    # bf16 adds PyTorch under autocast, so every ratio compares the same precision.
    assert set(rows) == {("keras", "graph"), ("keras", "bf16"), ("pytorch", "eager"), ("pytorch", "eager_bf16")}
    ours = rows["keras", "graph"]
    assert ours["status"] == "ok" and ours["recipe"] == "tiny" and ours["batch"] == [16, 12, 14]
    assert ours["target_tokens_per_s"] > 0 and ours["step_seconds"] > 0 and 0 < ours["mfu"]
    torch_row = rows["pytorch", "eager"]
    if TORCH_INSTALLED:
        assert torch_row["status"] == "ok" and torch_row["ratio_vs_torch_eager"] == 1.0
        assert ours["ratio_vs_torch_eager"] > 0 and ours["torch_reference"] == "eager"
        assert rows["keras", "bf16"]["torch_reference"] == "eager_bf16"
        assert rows["pytorch", "eager_bf16"]["status"] == "ok"
        # Identical dimensions: nn.Transformer only adds the final LayerNorm of each stack (2 x 2D, D = 64).
        assert torch_row["parameters"] - ours["parameters"] == 4 * 64
    else:
        assert torch_row["status"].startswith("missing") and "step_seconds" not in torch_row
        assert "ratio_vs_torch_eager" not in ours and result["versions"]["torch"] is None


def test_bench_memory_reports_peaks_of_training_decoding_and_the_loss_path(runs):
    result = _last_json(runs, "memory")
    assert result["bench"] == "memory" and result["cpu_count"] == os.cpu_count()
    phases = {r["phase"]: r for r in result["results"]}
    assert set(phases) == {"train", "decode", "loss"}
    for row in phases.values():
        assert row["recipe"] == "tiny" and row["code"] == "current" and row["vocab_size"] == 1000
    for row in (phases["train"], phases["decode"]):
        assert row["peak_rss_mb"] >= row["rss_after_startup_mb"] > 0
    loss = phases["loss"]
    assert loss["peak_rss_mb"] >= loss["rss_before_step_mb"] > 0 and loss["loss_path_mb"] >= 0
    assert phases["train"]["parameters"] > 0 and result["loss_path_ratios"] == []  # no legacy row to compare
    assert [e["recipe"] for e in result["estimates"]] == ["tiny"]


def test_bench_decode_reports_both_decoders(runs):
    result = _last_json(runs, "decode")
    assert result["bench"] == "decode" and result["beam_size"] == 4
    assert {r["decoder"] for r in result["results"]} == {"cached", "no-cache"}
    assert all(r["tokens_per_s"] > 0 for r in result["results"])


def test_parser_nbest_reports_every_rule(runs):
    result = _last_json(runs, "parser_nbest")
    assert result["bench"] == "parser_nbest" and (result["trees"], result["beam_size"]) == (3, 2)
    rows = result["results"]
    assert [(r["rule"], r["beta_or_gamma"], r["tau"]) for r in rows] == [
        ("best", 0.0, 1.0), ("bonus", 1.0, 1.0), ("expected F1", 0.0, 1.0), ("posterior", 0.5, 1.0)]
    assert rows[0]["changed"] == 0 and all(0 <= r["f1"] <= 100 for r in rows)
    assert len({r["gold_constituents"] for r in rows}) == 1


def test_profile_decode_splits_the_thread_time_of_the_shipped_model(runs):
    result = _last_json(runs, "profile_decode")
    assert result["bench"] == "profile_decode" and (result["sentences"], result["batch_size"]) == (4, 2)
    assert result["kernels"] == "eigen"  # TensorFlow's own, as kt-translate runs an export
    rows = result["results"]
    assert rows[3]["part"].startswith("other kernels") and [r["part"] for r in rows[4:]] == ["executor", "idle"]
    assert all(r["share"] > 0 for r in rows[:3]) and sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert result["wall_seconds"] > 0 and result["profiled_wall_seconds"] > 0
