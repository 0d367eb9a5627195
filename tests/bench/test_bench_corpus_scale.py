"""bench_corpus_scale.py at tiny sizes: four stages per size, a table, and a JSON line of the expected shape.

The figures are not checked (benchmarks print figures); the counts are: every pair is read, and the
batches stage, started on the report's work directory, does not read the training corpus again.
"""

import json
import os

import pytest

from tests.support import run_cli


@pytest.mark.slow
def test_bench_corpus_scale_smoke(tmp_path, data_dir):  # corpora generated from the generated Multi30k
    proc = run_cli("bench/bench_corpus_scale.py", "--sizes=2000,3000", "--shards=2", "--batches=3", "--vocab_size=600",
                   "--sample_lines=1000", f"--data_dir={data_dir}", f"--tmp_dir={tmp_path}", timeout=300)
    lines = proc.stdout.strip().splitlines()
    assert any(line.startswith("| 2,000 | validate |") for line in lines), proc.stdout
    result = json.loads(lines[-1])
    assert result["bench"] == "corpus_scale" and result["cpu_count"] == os.cpu_count()
    stages = ("validate", "first_run", "report", "batches")
    assert set(result["rss_ratio"]) == set(stages)
    rows = {(r["size"], r["stage"]): r for r in result["results"]}
    assert set(rows) == {(n, s) for n in (2000, 3000) for s in stages}
    for (size, stage), r in rows.items():
        assert r["peak_rss_mb"] > 0 and r["pairs_per_second"] > 0
        if stage != "batches":
            assert r["pairs"] == size
    assert [rows[n, "validate"]["train_corpus_passes"] for n in (2000, 3000)] == [1, 1]
    assert [rows[n, "first_run"]["train_corpus_passes"] for n in (2000, 3000)] == [1, 1]  # a fresh work directory
    assert [rows[n, "batches"]["train_corpus_passes"] for n in (2000, 3000)] == [0, 0]  # cached by the report
    samples = list((tmp_path / "work_2000" / "validate" / "corpus").glob("*.sample500-seed1.txt"))
    assert len(samples) == 1 and len(samples[0].read_text().splitlines()) == 1000  # 500 pairs, 2 sentences each
