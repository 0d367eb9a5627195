"""The exported translator: a fresh process reproduces eager beam search exactly; serving inputs never crash."""

import collections
import json
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2, trackable_object_graph_pb2

from keras_transformer import BOS_ID, EOS_ID, PAD_ID
from keras_transformer.config import PARALLEL_SEARCHES
from keras_transformer.serving import writer as export
from keras_transformer.decoding import translate_ids
from keras_transformer.decoding.lines import is_blank
from keras_transformer.model import build_model
from keras_transformer.tasks.translation.module import Translator
from keras_transformer.serving import loading
from keras_transformer.checkpoints.names import variable_names
from keras_transformer import tasks
from keras_transformer import artifacts
from tests.conftest import REPO_ROOT
from tests.inference.support import MAX_SOURCE

BIN = f"{sys.prefix}/bin"
LONG = " ".join(["a man rides a red bicycle"] * 334)[:11000]  # 2,000 words
SENTENCES = ["A man in an orange hat starring at something.", "", "   ", LONG,
             "Двое мужчин стоят у воды.", "一个男人在骑自行车。", "People are fixing the roof of a house."]

# Runs in a fresh interpreter that imports only TensorFlow (and, after the first checks, tensorflow-text).
FRESH = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    full, ids_only, request = sys.argv[1:4]
    request = json.loads(request)
    try:
        tf.saved_model.load(full)
        without_text = "loaded"
    except Exception as e:  # the text signatures need the tensorflow-text ops
        without_text = type(e).__name__ + ": " + str(e).splitlines()[0]
    ids = tf.saved_model.load(ids_only).signatures["translate_ids"](source_ids=tf.constant(request["ids"]))
    import tensorflow_text  # noqa: F401
    loaded = tf.saved_model.load(full)
    text = loaded.signatures["serving_default"](inputs=tf.constant(request["strings"]))
    options = loaded.signatures["translate_with_options"](inputs=tf.constant(request["strings"]),
                                                          beam_size=tf.constant(4), alpha=tf.constant(0.6),
                                                          extra_length=tf.constant(50))
    print(json.dumps({
        "without_text": without_text,
        "ids_only_sequences": ids["sequences"].numpy().tolist(),
        "translations": [t.decode("utf-8") for t in text["translations"].numpy()],
        "scores": text["scores"].numpy().tolist(),
        "outputs": sorted(text),
        "options_translations": [t.decode("utf-8") for t in options["translations"].numpy()],
        "nbest_scores": options["nbest_scores"].numpy().tolist(),
        "project_imported": sorted(m for m in sys.modules if m.startswith("keras_transformer")),
    }))
""")


def _source_ids(tokenizer, strings):
    """The translator's source rule, written out independently: subwords[:MAX_SOURCE - 1] + EOS, PAD after."""
    rows = [list(r)[: MAX_SOURCE - 1] + [EOS_ID] for r in tokenizer.tokenize(strings).to_list()]
    ids = np.full([len(rows), max(map(len, rows))], PAD_ID, np.int32)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
    return ids


@pytest.fixture(scope="module")
def eager(trained_workdir):
    return artifacts.load_model(trained_workdir)


@pytest.fixture(scope="module")
def ids_only(eager, tmp_path_factory):
    model, recipe, tokenizer = eager
    return tasks.export(model, tokenizer, recipe, tmp_path_factory.mktemp("ids") / "translator", with_text=False)


def test_fresh_process_reproduces_eager_beam_search(eager, exported, ids_only):
    model, recipe, tokenizer = eager
    ids = _source_ids(tokenizer, SENTENCES)
    assert ids.shape == (len(SENTENCES), MAX_SOURCE)  # the 2,000-word line is cut to 23 subwords + EOS
    sequences, scores = translate_ids(model, ids, beam_size=4, alpha=0.6, extra_length=50)  # §6.1, eager
    expected = [t.decode("utf-8") for t in tokenizer.detokenize(sequences[:, 0]).numpy()]

    request = json.dumps({"strings": SENTENCES, "ids": ids.tolist()})
    result = subprocess.run([sys.executable, "-c", FRESH, str(exported), ids_only, request], cwd="/",
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["project_imported"] == []
    assert "SentencepieceOp" in out["without_text"]  # why --ids_only exists
    np.testing.assert_array_equal(out["ids_only_sequences"], sequences.numpy())  # the ids API decodes [EOS] too
    blank = np.array([is_blank(s) for s in SENTENCES])  # the text signatures answer a blank input "", score 0
    expected = ["" if b else e for b, e in zip(blank, expected)]
    assert out["translations"] == out["options_translations"] == expected and len(expected) == len(SENTENCES)
    assert out["outputs"] == ["scores", "translations", "truncated"]  # serving_default: the best alone
    np.testing.assert_allclose(out["scores"], np.where(blank, 0.0, scores.numpy()[:, 0]), rtol=1e-6)
    nbest = np.where(blank[:, None], [0.0] + [-1e9] * (scores.shape[1] - 1), scores.numpy())
    np.testing.assert_allclose(out["nbest_scores"], nbest, rtol=1e-6)
    assert (np.diff(scores.numpy(), axis=1) <= 0).all()  # n-best, best first


def test_export_directory_describes_itself(exported, trained_workdir, eager):
    _, recipe, tokenizer = eager
    info = json.loads((exported / "assets" / "export.json").read_text())
    assert info["max_source_length"] == MAX_SOURCE and info["decode"] == {"alpha": 0.6, "beam_size": 4,
                                                                          "extra_length": 50,
                                                                          "parallel_searches": 2}
    assert info["signatures"] == ["serving_default", "translate_with_options", "sample_with_options",
                                  "translate_with_prefix", "sample_with_prefix", "translate_with_alignment", "align",
                                  "translate_with_constraints", "translate_ids",
                                  "translate_ids_with_options"]
    assert info["precision"] == "float32"
    assert info["checkpoint"] == str(trained_workdir / "checkpoints" / "ckpt-12")
    assert (exported / "assets" / "tiny_inference.model").read_bytes() == tokenizer.model_proto


def _model_weights_in_checkpoint(prefix):
    """{path: value} of every variable under the checkpoint's ``model`` object, read from its own object graph.

    A path is the shortest chain of child names from the root through ``model`` (``model/encoder/...``), not
    through the optimizer the compiled model tracks. A training checkpoint stores each weight once, under a key
    of its own choosing (often the optimizer's list), which the graph's node gives.
    """
    reader = tf.train.load_checkpoint(str(prefix))
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    (model,) = [c.node_id for c in graph.nodes[0].children if c.local_name == "model"]
    paths, queue = {model: "model"}, collections.deque([model])
    while queue:
        node = queue.popleft()
        for child in graph.nodes[node].children:
            if child.node_id not in paths and child.local_name != "optimizer":
                paths[child.node_id] = f"{paths[node]}/{child.local_name}"
                queue.append(child.node_id)
    return {path: reader.get_tensor(graph.nodes[node].attributes[0].checkpoint_key) for node, path in paths.items()
            if [a.name for a in graph.nodes[node].attributes] == ["VARIABLE_VALUE"]}


def test_exported_variables_are_named_by_their_checkpoint_paths(exported, trained_workdir, eager):
    loaded = tf.saved_model.load(str(exported))
    names = [v.name for v in loaded.model_variables]
    assert all(name.endswith(":0") for name in names)
    values = {name[:-2]: v.numpy() for name, v in zip(names, loaded.model_variables)}
    assert len(values) == len(names) == len(eager[0].variables)  # unique, one per model variable
    # The export is of ckpt-12: each weight under the path that checkpoint holds it at, with the value stored there.
    stored = _model_weights_in_checkpoint(trained_workdir / "checkpoints" / "ckpt-12")
    assert "model/encoder/layer_0/self_attention/query_dense/_kernel" in stored and len(stored) == 43
    for path, value in stored.items():
        np.testing.assert_array_equal(values[path], value, err_msg=path)
    # What no checkpoint holds: the dropout layers' random-seed states (1 + 2 + 3 residual sublayers), by their layer.
    assert sorted(set(values) - set(stored)) == [
        "model/decoder/layer_0/cross_attention_residual/dropout/seed_generator/state",
        "model/decoder/layer_0/ffn_residual/dropout/seed_generator/state",
        "model/decoder/layer_0/self_attention_residual/dropout/seed_generator/state",
        "model/embedding_dropout/seed_generator/state",
        "model/encoder/layer_0/ffn_residual/dropout/seed_generator/state",
        "model/encoder/layer_0/self_attention_residual/dropout/seed_generator/state"]
    assert variable_names(eager[0]) == [name[:-2] for name in names]  # model.variables order
    # The model read back from the export takes each variable by its name.
    model, _, _ = loading.load_exported(str(exported))
    for variable, name in zip(model.variables, variable_names(model)):
        np.testing.assert_array_equal(variable.numpy(), values[name], err_msg=name)


def test_an_export_from_before_the_names_is_read_in_order(eager, exported, tmp_path):
    """Exports written before the names (e.g. the shipped ones) hold the variables as created, in model order."""
    model, recipe, _ = eager
    old = tmp_path / "old_export"
    tf.saved_model.save(Translator(model, None, recipe, with_text=False), str(old))  # names as created
    shutil.copytree(exported / "assets", old / "assets", dirs_exist_ok=True)
    names = [v.name for v in tf.saved_model.load(str(old)).model_variables]
    assert names.count("transformer/encoder/kernel:0") == 6  # W^Q, W^K, W^V, W^O, W_1, W_2 of the one layer
    again, _, _ = loading.load_exported(str(old))
    for variable, expected in zip(again.variables, model.variables):
        np.testing.assert_array_equal(variable.numpy(), expected.numpy(), err_msg=variable.path)


def _op_types(saved_model_dir, signature):
    """Op types reachable from a signature, through every function it calls."""
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((saved_model_dir / "saved_model.pb").read_bytes())
    graph = proto.meta_graphs[0].graph_def
    library = {f.signature.name: f for f in graph.library.function}
    nodes = {n.name: n for n in graph.node}
    outputs = proto.meta_graphs[0].signature_def[signature].outputs
    todo, seen, ops = [nodes[t.name.split(":")[0]] for t in outputs.values()], set(), set()
    while todo:
        node = todo.pop()
        ops.add(node.op)
        for attr in node.attr.values():
            names = [attr.func.name] + [f.name for f in attr.list.func]
            for name in (n for n in names if n in library and n not in seen):
                seen.add(name)
                todo.extend(library[name].node_def)
    return ops


def test_a_bfloat16_export_computes_in_bfloat16(eager, tmp_path):
    model, recipe, tokenizer = eager
    half = export.with_precision(model, "bfloat16")
    assert export.with_precision(model, "float32") is model and export.with_precision(half, "bfloat16") is half
    assert variable_names(half) == variable_names(model)  # the names an export gives them
    for rounded, weight in zip(half.variables, model.variables):  # the same weights, rounded (counters as they are)
        assert rounded.dtype == ("bfloat16" if weight.dtype == "float32" else weight.dtype)
        np.testing.assert_array_equal(rounded.numpy(), tf.cast(weight, rounded.dtype).numpy())
    with pytest.raises(ValueError, match="precision: 'float16'; expected one of float32, bfloat16"):
        export.with_precision(model, "float16")

    directory = tasks.export(half, tokenizer, recipe, tmp_path / "bf16", with_text=False)  # the ids signatures
    assert json.loads((tmp_path / "bf16" / "assets" / "export.json").read_text())["precision"] == "bfloat16"
    loaded = tf.saved_model.load(directory)
    assert [v.dtype for v in loaded.model_variables] == [v.dtype for v in half.variables]
    ids = _source_ids(tokenizer, SENTENCES)
    out = loaded.signatures["translate_ids"](source_ids=tf.constant(ids))
    # The same search, run here: dealt to the export's parallel searches, so every matmul has the export's shapes
    # (with other shapes a kernel sums in another order, and a float32 sum can round to the other bfloat16
    # neighbour). The export's graph is optimised with its options folded in, so the scores agree to bfloat16's
    # precision (2^-8, relative), not to float32's.
    sequences, scores = translate_ids(half, ids, beam_size=4, alpha=0.6, extra_length=50,
                                      parallel_searches=PARALLEL_SEARCHES)
    np.testing.assert_array_equal(out["sequences"], sequences)
    np.testing.assert_allclose(out["scores"], scores, rtol=2 ** -8)
    # Close to float32: the teacher-forced log-probabilities of float32's translations.
    best, _ = translate_ids(model, ids, beam_size=4, alpha=0.6, extra_length=50)
    target_in = np.concatenate([np.full((len(ids), 1), BOS_ID), best[:, 0, :-1]], axis=1)
    log_probs = [tf.nn.log_softmax(tf.cast(m((ids, target_in)), tf.float32)).numpy() for m in (model, half)]
    np.testing.assert_allclose(log_probs[1], log_probs[0], atol=0.15)
    # Read back (kt-export --model=DIR, a conversion; load_exported's step): float32 variables holding the rounded
    # weights.
    back = build_model(recipe)
    loading.assign_exported(back, loaded, directory)
    assert back.variables[0].dtype == "float32"
    for variable, rounded in zip(back.variables, half.variables):
        np.testing.assert_array_equal(variable.numpy(), tf.cast(rounded, variable.dtype).numpy())


def test_translate_ids_graph_has_no_sentencepiece_op(exported):
    assert "SentencepieceOp" in _op_types(exported, "serving_default")  # the walk does find them
    for name in ("translate_ids", "translate_ids_with_options"):
        ops = _op_types(exported, name)
        assert "While" in ops or "StatelessWhile" in ops  # the beam search is in there
        assert not [op for op in ops if "entencepiece" in op], name


def test_serving_inputs_one_output_each(exported, eager):
    loaded = tf.saved_model.load(str(exported))
    serve = loaded.signatures["serving_default"]
    for text in SENTENCES[1:6]:
        out = serve(inputs=tf.constant([text]))
        assert out["translations"].shape == out["scores"].shape == [1]
        assert set(out) == {"translations", "scores", "truncated"}
        assert np.isfinite(out["scores"].numpy()).all()
    out = serve(inputs=tf.constant(SENTENCES))  # a batch mixing all of them
    assert out["translations"].shape == [len(SENTENCES)]
    for t in out["translations"].numpy():
        t.decode("utf-8")  # valid UTF-8 even from byte pieces
    assert serve(inputs=tf.constant([], tf.string))["translations"].shape == [0]
    # Options as tensors: beam 1 with α = 0 is greedy (one hypothesis per input).
    greedy = loaded.signatures["translate_with_options"](inputs=tf.constant(SENTENCES[:2]), beam_size=tf.constant(1),
                                                         alpha=tf.constant(0.0), extra_length=tf.constant(5))
    assert greedy["nbest_translations"].shape == [2, 1]
    # A long id input is cut to max_source_length - 1 ids + EOS: the same output as the cut input.
    _, _, tokenizer = eager
    long_ids = tokenizer.tokenize([LONG]).to_list()[0] + [EOS_ID]
    ids = loaded.signatures["translate_ids"]
    np.testing.assert_array_equal(ids(source_ids=tf.constant([long_ids]))["sequences"],
                                  ids(source_ids=tf.constant([long_ids[: MAX_SOURCE - 1] + [EOS_ID]]))["sequences"])


def test_saved_model_cli_show_and_run(exported):
    show = subprocess.run([f"{BIN}/saved_model_cli", "show", "--all", "--dir", str(exported)], capture_output=True,
                          text=True, timeout=120)
    assert show.returncode == 0, show.stderr[-2000:]
    for name in ("serving_default", "translate_with_options", "sample_with_options", "translate_ids",
                 "translate_ids_with_options"):
        assert f"signature_def['{name}']" in show.stdout
    # The stock binary has no tensorflow-text ops; the text signature runs with them loaded (the README's command).
    run_text = subprocess.run([sys.executable, "-c", "import sys, tensorflow_text; from tensorflow.python.tools "
                               "import saved_model_cli; sys.exit(saved_model_cli.main())", "run", "--dir",
                               str(exported), "--tag_set", "serve", "--signature_def", "serving_default",
                               "--input_exprs", 'inputs=["A man is riding a bike.", ""]'],
                              capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert run_text.returncode == 0, run_text.stderr[-2000:]
    assert "Result for output key translations" in run_text.stdout and "Result for output key scores" in run_text.stdout
