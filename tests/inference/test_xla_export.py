"""The XLA exports (kt-export --jit_compile, the whole search compiled; --step_compile, the step): a plain-TensorFlow
process that replays their warm-up requests, as TF Serving does at load time, gets the default export's
translations; with XLA compilation disabled, as in tensorflow_model_server without --xla_cpu_compilation_enabled,
their search fails with "XLA compilation disabled" and nothing else; a request they do not cover (another beam
size) runs the default search."""

import json
import subprocess
import sys
import textwrap

import pytest

from keras_transformer.config import XlaBuckets
from keras_transformer.serving import warmup
from tests.inference.support import MAX_SOURCE, run_cli

pytest.importorskip("tensorflow_serving")
pytestmark = pytest.mark.slow

SENTENCES = ["A man in an orange hat starring at something.", "", "Two dogs.",
             " ".join(["a man rides a red bicycle"] * 20), "People are fixing the roof of a house."]

# A fresh interpreter with TensorFlow, tensorflow-text and the TF Serving protos only; argv: the XLA export,
# the default export, the request, and "off" to disable XLA compilation as TF Serving does without its flag
# (tensorflow::DisableXlaCompilation, exported by libtensorflow_cc).
FRESH = textwrap.dedent("""
    import ctypes, json, os, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401
    from tensorflow_serving.apis import prediction_log_pb2
    xla_dir, default_dir, request, xla = sys.argv[1:5]
    if xla == "off":
        ctypes.CDLL(os.path.join(os.path.dirname(tf.__file__), "libtensorflow_cc.so.2")
                    )._ZN10tensorflow21DisableXlaCompilationEv()
    strings = tf.constant(json.loads(request))
    texts = lambda out: [t.decode() for t in out["translations"].numpy()]
    xla_export, default = tf.saved_model.load(xla_dir), tf.saved_model.load(default_dir)
    out = {"project_imported": sorted(m for m in sys.modules if m.startswith("keras_transformer"))}
    try:
        records = tf.data.TFRecordDataset(os.path.join(xla_dir, "assets.extra", "tf_serving_warmup_requests"))
        shapes = []
        for record in records:  # what TF Serving does at load time
            request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
            inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
            shapes.append(list(inputs["source_ids"].shape))
            xla_export.signatures[request.model_spec.signature_name](**{k: tf.constant(v) for k, v in inputs.items()})
        out["warmup_shapes"] = shapes
        out["xla"] = texts(xla_export.signatures["serving_default"](inputs=strings))
    except Exception as e:
        out["error"] = type(e).__name__ + ": " + str(e)
    out["default"] = texts(default.signatures["serving_default"](inputs=strings))
    options = dict(inputs=strings, beam_size=tf.constant(2), alpha=tf.constant(0.6), extra_length=tf.constant(50))
    out["beam2_xla"] = texts(xla_export.signatures["translate_with_options"](**options))
    out["beam2_default"] = texts(default.signatures["translate_with_options"](**options))
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def xla_export(trained_workdir, tmp_path_factory):
    export_dir = tmp_path_factory.mktemp("xla") / "translator"
    result = run_cli("export", f"--model={trained_workdir}", f"--export_dir={export_dir}", "--jit_compile",
                     "--xla_batch_sizes=4", "--xla_source_lengths=8")
    assert "XLA-compiled search; serve with --xla_cpu_compilation_enabled=true" in result.stdout
    return export_dir


@pytest.fixture(scope="module")
def step_export(trained_workdir, tmp_path_factory):
    export_dir = tmp_path_factory.mktemp("step") / "translator"
    result = run_cli("export", f"--model={trained_workdir}", f"--export_dir={export_dir}", "--step_compile",
                     "--xla_batch_sizes=1,4")
    assert "XLA-compiled step; serve with --xla_cpu_compilation_enabled=true" in result.stdout
    return export_dir


def _fresh(xla_export, exported, xla):
    result = subprocess.run([sys.executable, "-c", FRESH, str(xla_export), str(exported), json.dumps(SENTENCES),
                             xla], cwd="/", capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["project_imported"] == []
    return out


def test_export_describes_its_buckets_and_warm_up_requests(xla_export):
    info = json.loads((xla_export / "assets" / "export.json").read_text())
    assert info["xla"]["batch_sizes"] == [4] and info["xla"]["source_lengths"] == [8, MAX_SOURCE]
    assert (info["xla"]["beam_size"], info["xla"]["max_extra_length"]) == (4, 50)
    assert "--xla_cpu_compilation_enabled=true" in info["xla"]["serving"]
    requests = warmup.read(xla_export)  # one per bucket; each of the 2 parallel searches gets the bucket's rows
    assert [(name, inputs["source_ids"].shape) for name, inputs in requests] == [
        ("translate_ids", (2 * 4, columns)) for columns in (8, MAX_SOURCE)]


def test_with_xla_the_translations_are_the_default_exports(xla_export, exported):
    out = _fresh(xla_export, exported, "on")
    assert "error" not in out, out.get("error")
    assert out["warmup_shapes"] == [[2 * 4, columns] for columns in (8, MAX_SOURCE)]
    assert out["xla"] == out["default"] and len(out["xla"]) == len(SENTENCES)
    assert out["beam2_xla"] == out["beam2_default"]


def test_step_compile_export_describes_itself_and_translates_as_the_default(step_export, exported):
    info = json.loads((step_export / "assets" / "export.json").read_text())
    assert info["step_compile"]["beam_size"] == 4 and info["step_compile"]["source_positions"] == MAX_SOURCE
    assert info["step_compile"]["batch_sizes"] == [1, 4] and "xla" not in info
    out = _fresh(step_export, exported, "on")
    assert "error" not in out, out.get("error")
    assert out["warmup_shapes"] == [[2 * rows, MAX_SOURCE] for rows in (1, 4)]  # 2 parallel searches
    assert out["xla"] == out["default"] and len(out["xla"]) == len(SENTENCES)
    assert out["beam2_xla"] == out["beam2_default"]


@pytest.mark.parametrize("export", ["xla_export", "step_export"])
def test_without_xla_the_search_fails_with_a_clear_message(export, exported, request):
    out = _fresh(request.getfixturevalue(export), exported, "off")
    assert out["error"].startswith("InternalError: ") and "XLA compilation disabled" in out["error"]
    assert "xla" not in out  # no answer, right or wrong
    assert out["beam2_xla"] == out["beam2_default"]  # another beam size: the default search, no XLA


def test_bad_options_exit_2_with_one_line(trained_workdir, tmp_path):
    out = str(tmp_path / "out")
    cases = {
        ("--jit_compile", "--format=ctranslate2"): "error: --jit_compile: applies to --format=saved_model only",
        ("--stop_rule=heuristic", "--format=ctranslate2"): "error: --stop_rule: applies to --format=saved_model only",
        ("--jit_compile", "--xla_batch_sizes=4,2"): "error: --xla_batch_sizes: must be strictly increasing, got 4, 2",
        ("--jit_compile", "--xla_source_lengths=8,x"): "error: --xla_source_lengths: expected integers, got 8,x",
        ("--xla_batch_sizes=1,2",): "error: --xla_batch_sizes: applies with --jit_compile or --step_compile only",
        ("--step_compile", "--xla_source_lengths=8"): "error: --xla_source_lengths: applies with --jit_compile only",
        ("--step_compile", "--jit_compile"): "error: --step_compile: not with --jit_compile (the whole search "
                                             "compiled); choose one",
        ("--step_compile", "--format=ctranslate2"): "error: --step_compile: applies to --format=saved_model only",
    }
    for args in cases:
        result = run_cli("export", f"--model={trained_workdir}", f"--export_dir={out}", *args, check=False)
        assert (result.returncode, result.stderr.strip().splitlines()) == (2, [cases[args]]), args


def test_buckets_are_checked_and_end_at_the_longest_source():
    assert XlaBuckets(source_lengths=(8, 16, 96)).for_source(80) == (8, 16, 80)
    with pytest.raises(ValueError, match="^batch_sizes: expected positive integers"):
        XlaBuckets(batch_sizes=(0, 2))
