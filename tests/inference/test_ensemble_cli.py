"""kt-translate and kt-export --model=a,b: an ensemble of translation models of one tokenizer (decoding/ensemble.py),
--ensemble_weights."""

import json
import shutil

import pytest
from sentencepiece import sentencepiece_model_pb2

from keras_transformer.serving import loading
from tests.inference.support import run_cli

LINES = ["A man rides a red bike on the street .", "", "two dogs play in the snow .", "A girl ."]
STDIN = "".join(f"{line}\n" for line in LINES)


def test_an_ensemble_of_a_model_with_itself_translates_as_the_model(trained_workdir, exported):
    flags = ["--nbest=3", "--extra_length=20"]
    alone = run_cli("translate", f"--model={trained_workdir}", *flags, stdin=STDIN).stdout
    assert len(alone.splitlines()) >= 7
    for models in (f"{trained_workdir},{trained_workdir}", f"{exported},{trained_workdir}"):  # the same weights
        both = run_cli("translate", f"--model={models}", *flags, stdin=STDIN)
        assert both.stdout == alone and "ensemble of" in both.stderr


def test_an_ensemble_refuses_another_tokenizer_sampling_and_a_prefix(trained_workdir, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(trained_workdir, other)
    for model_file in (other / "tokenizer").glob("*.model"):  # as many pieces, one of them another
        proto = sentencepiece_model_pb2.ModelProto()
        proto.ParseFromString(model_file.read_bytes())
        proto.pieces[-1].piece = "\u2581zzqx"
        model_file.write_bytes(proto.SerializeToString())
    models = f"--model={trained_workdir},{trained_workdir}"
    for args, message in (([f"--model={trained_workdir},{other}"], "has another vocabulary than"),
                          ([models, "--sampling"], "--sampling: "),
                          ([models, "--target_prefix=tab"], "--target_prefix: ")):
        result = run_cli("translate", *args, stdin=STDIN, check=False)
        assert result.returncode == 2 and message in result.stderr, result.stderr


def test_kt_export_writes_an_ensemble_as_one_savedmodel_that_translates_as_the_ensemble(trained_workdir, tmp_path):
    flags = ["--nbest=3", "--extra_length=20"]
    models = f"{trained_workdir},{trained_workdir}"
    export_dir = tmp_path / "ensemble"
    exported = run_cli("export", f"--model={models}", f"--export_dir={export_dir}", "--ensemble_weights=1,3",
                       "--alpha=1.2")
    assert "an ensemble of 2 models (weights 0.25, 0.75)" in exported.stdout
    info = json.loads((export_dir / "assets" / "export.json").read_text())
    assert info["ensemble"] == {"members": 2, "weights": [0.25, 0.75]} and len(info["ensemble_of"]) == 2
    assert info["decode"]["alpha"] == 1.2  # --alpha: the export's default
    ensemble = run_cli("translate", f"--model={models}", "--ensemble_weights=1,3", "--alpha=1.2", *flags,
                       stdin=STDIN).stdout
    assert run_cli("translate", f"--model={export_dir}", *flags, stdin=STDIN).stdout == ensemble
    assert ensemble == run_cli("translate", f"--model={trained_workdir}", "--alpha=1.2", *flags,
                               stdin=STDIN).stdout  # one model
    with pytest.raises(ValueError, match="is an ensemble of 2 models"):
        loading.load_exported(export_dir)  # no one model to re-export or convert


def test_ensemble_weights_are_refused_without_an_ensemble_or_of_the_wrong_count(trained_workdir, tmp_path):
    models = f"--model={trained_workdir},{trained_workdir}"
    for tool, args, message in (
            ("translate", [f"--model={trained_workdir}", "--ensemble_weights=1,2"], "is one model; weights apply"),
            ("translate", [models, "--ensemble_weights=1"], "--ensemble_weights: one weight >= 0 per model (2)"),
            ("translate", [models, "--ensemble_weights=1,x"], "--ensemble_weights: expected numbers"),
            ("export", [models, f"--export_dir={tmp_path / 'e'}", "--jit_compile"], "--jit_compile: an ensemble"),
            ("export", [models, f"--export_dir={tmp_path / 'e'}", "--ensemble_weights=-1,1"],
             "--ensemble_weights: one weight >= 0"),
            ("export", [models, f"--export_dir={tmp_path / 'e'}", "--alpha=-1"], "--alpha: "),
            ("export", [f"--model={trained_workdir}", f"--export_dir={tmp_path / 'c'}", "--format=ctranslate2",
                        "--alpha=1"], "--alpha: applies to --format=saved_model only")):
        result = run_cli(tool, *args, stdin=STDIN, check=False)
        assert result.returncode == 2 and message in result.stderr, (tool, result.stderr)
