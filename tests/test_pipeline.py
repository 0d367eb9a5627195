"""The README's main command, on the tiny recipe: train, average, evaluate, export, translate."""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT


@pytest.mark.slow
def test_kt_pipeline_end_to_end(tmp_path):
    export_dir = tmp_path / "export"
    command = [sys.executable, "-m", "keras_transformer.cli.pipeline", "--recipe=tiny", "--train_steps=40",
               "--checkpoint_every=20", f"--workdir={tmp_path / 'run'}", f"--export_dir={export_dir}",
               "--eval_sentences=16"]
    out = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    for stage in ("[1/5]", "[2/5]", "[3/5]", "[4/5]", "[5/5]"):
        assert stage in out.stdout
    metadata = json.loads((export_dir / "metadata.json").read_text())
    assert metadata["step"] == 40 and metadata["averaged_steps"] == [20, 40]
    assert metadata["test_sentences"] == 16 and 0.0 <= metadata["bleu"] <= 100.0
    assert metadata["signature"].startswith("nrefs:1|case:mixed") and "tok:13a" in metadata["signature"]
    assert (export_dir / "saved_model.pb").is_file()
    assert len(metadata["samples"]) == 3
