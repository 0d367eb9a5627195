"""Train -> parse -> F1 in seconds: a tiny parser through kt-pipeline, kt-evaluate-parser, kt-parse and the export."""

import dataclasses
import glob
import json

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import recipes
from keras_transformer import PAD_ID
from keras_transformer.tasks.parsing import metric as parse_scoring
from keras_transformer.tasks.parsing import lines as parsing
from keras_transformer.config import PARALLEL_SEARCHES, DecodeConfig
from keras_transformer.tasks.parsing import trees
from keras_transformer.data.tokenizer import append_eos
from keras_transformer.tasks.parsing import constraint as tree_constraint
from keras_transformer.serving import loading
from keras_transformer import inference
from keras_transformer import artifacts
from tests.support import run_cli

pytestmark = pytest.mark.slow


def tiny_parser_recipe():
    """ptb_sample at the size of recipes/tiny.py (1+1 layers, d_model 64; 600 pieces: the generated sample holds
    fewer than 1,000), beam 4."""
    base = recipes.get("ptb_sample")
    return dataclasses.replace(
        base, name="ptb_tiny",
        model=dataclasses.replace(base.model, vocab_size=600, d_model=64, d_ff=128, num_heads=2,
                                  num_encoder_layers=1, num_decoder_layers=1, dropout=0.1, attention_dropout=0.0),
        train=dataclasses.replace(base.train, train_steps=40, checkpoint_every=20, warmup_steps=20,
                                  max_train_minutes=0, mixed_precision=False, bleu_samples=8, keep_best_by="val_f1"),
        decode=DecodeConfig(beam_size=4, alpha=0.3, extra_length=300, average_checkpoints=2))


def run(module, *args, stdin=None):
    return run_cli(module, *args, stdin=stdin, timeout=600)


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("parser")
    recipe_file = root / "ptb_tiny.json"
    recipe_file.write_text(tiny_parser_recipe().to_json())
    out = run("pipeline", f"--recipe={recipe_file}", f"--workdir={root / 'run'}", f"--export_dir={root / 'export'}",
              "--eval_sentences=16")  # the generated sample ($KT_DATA_DIR)
    return root, out.stdout


def test_pipeline_trains_averages_scores_exports_and_parses(pipeline_run):
    root, stdout = pipeline_run
    for stage in ("[1/5]", "[2/5]", "[3/5]", "[4/5]", "[5/5]"):
        assert stage in stdout
    metadata = json.loads((root / "export" / "metadata.json").read_text())
    assert metadata["step"] == 40 and metadata["averaged_steps"] == [20, 40] and metadata["test_sentences"] == 16
    assert 0 <= metadata["f1"] <= 100 and metadata["repaired"] == 0
    assert metadata["scoring"].startswith("EVALB COLLINS.prm")
    for sentence, tree in metadata["samples"].items():
        (parsed,) = trees.read_trees(tree)  # a well-formed tree over the sentence's words
        assert trees.words(parsed) == sentence.split()


def test_dev_f1_is_logged_and_ranks_the_kept_checkpoints(pipeline_run):
    """bleu_samples dev trees are parsed at each checkpoint (DevF1): val_f1 ranks the best checkpoints, which the
    pipeline averages, and TensorBoard has the curve."""
    root, _ = pipeline_run
    best = json.loads((root / "run" / "checkpoints" / "best" / "best.json").read_text())
    assert best["monitor"] == "val_f1"
    assert sorted(step for step, _ in best["kept"]) == [20, 40]
    assert all(0.0 <= score <= 100.0 for _, score in best["kept"])
    assert glob.glob(str(root / "run" / "tensorboard" / "validation" / "events.*"))


def test_saved_model_parses_as_the_work_directory(pipeline_run, generated_splits):
    root, _ = pipeline_run
    gold = generated_splits["test"].trees[:16]
    sentences = [" ".join(trees.words(t)) for t in gold]
    from_workdir = parsing.parse_lines(inference.load(root / "run", "averaged"), sentences)
    from_export = parsing.parse_lines(inference.load(root / "export"), sentences)
    assert from_export.trees == from_workdir.trees and from_export.linearized == from_workdir.linearized
    np.testing.assert_allclose(from_export.scores, from_workdir.scores, atol=1e-4)
    assert from_export.repaired == 0
    metadata = json.loads((root / "export" / "metadata.json").read_text())
    test = [trees.read_trees(t)[0] for t in from_export.trees]
    assert round(parse_scoring.score(gold, test)["f1"], 2) == metadata["f1"]


@pytest.mark.parametrize("parts", [2, 3])
def test_parallel_searches_parse_as_one_search(pipeline_run, generated_splits, parts):
    root, _ = pipeline_run
    model, _, tok = artifacts.load_model(root / "run", "averaged")
    sentences = [" ".join(trees.words(t)) for t in generated_splits["test"].trees[:7]]
    source_ids = append_eos(tok.tokenize(tf.constant(sentences))).to_tensor(PAD_ID)  # [7, S]
    tokens = tree_constraint.token_kinds(tok)
    sequences, scores = tree_constraint.parse_ids(model, source_ids, tokens, 4, 0.3, 300)
    parallel_sequences, parallel_scores = tree_constraint.parse_ids(model, source_ids, tokens, 4, 0.3, 300,
                                                                    parallel_searches=parts)
    np.testing.assert_array_equal(parallel_sequences, sequences)
    np.testing.assert_allclose(parallel_scores, scores, rtol=1e-6, atol=1e-5)  # matmuls round by a batch's row count
    info = json.loads((root / "export" / "assets" / loading.EXPORT_INFO).read_text())
    assert info["decode"]["parallel_searches"] == PARALLEL_SEARCHES  # the export deals its batches to 2 searches


def test_unconstrained_decoding_is_repaired_and_counted(pipeline_run, generated_splits):
    root, _ = pipeline_run
    gold = generated_splits["test"].trees[:16]
    scores, parses = parsing.evaluate(inference.load(root / "run", "averaged"), gold, constrained=False)
    assert scores["constrained"] is False and 0 <= scores["repaired"] <= 16
    assert scores["repaired"] == sum(trees.repair(s, len(trees.words(g))).repaired
                                     for s, g in zip(parses.linearized, gold))
    for tree, g in zip(parses.trees, gold):
        assert trees.words(trees.read_trees(tree)[0]) == trees.words(g)
    with pytest.raises(ValueError, match="needs a work directory"):
        parsing.parse_lines(inference.load(root / "export"), ["a b"], constrained=False)


def test_evaluate_parser_and_parse_clis(pipeline_run):
    root, _ = pipeline_run
    metadata = json.loads((root / "export" / "metadata.json").read_text())
    out = run("evaluate_parser", f"--model={root / 'export'}", "--max_sentences=16", "--json")
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("LP ") and " F1 " in lines[0] and lines[1].startswith("repaired 0 of 16 outputs")
    scores = json.loads(lines[-1])
    assert round(scores["f1"], 2) == metadata["f1"] and scores["sentences"] == 16 and scores["repaired"] == 0
    assert {"precision", "recall", "f1", "exact_match", "repaired"} <= set(scores)
    parsed = run("parse", f"--model={root / 'export'}", stdin="Ms. Haag plays Elianti .\n\n")
    tree, empty = parsed.stdout.split("\n")[:2]
    assert trees.words(trees.read_trees(tree)[0]) == ["Ms.", "Haag", "plays", "Elianti", "."] and empty == ""
    assert "0 outputs repaired" in parsed.stderr
    linearized = run("parse", f"--model={root / 'run'}", "--checkpoint=averaged", "--linearized",
                     stdin="Ms. Haag plays Elianti .\n").stdout.strip()
    assert trees.repair(linearized, 5).problems == ()


def test_parser_tools_refuse_what_they_cannot_serve(tmp_path, pipeline_run):
    root, _ = pipeline_run
    out = run_cli("evaluate_parser", f"--model={root}", check=False, timeout=300)
    assert out.returncode == 2 and "error: --model:" in out.stderr
    out = run_cli("export", f"--model={root / 'run'}", f"--export_dir={tmp_path / 'ids'}", "--ids_only", check=False,
                  timeout=300)
    assert out.returncode == 2 and "error: --ids_only: a parser's export is text in, trees out" in out.stderr
    out = run_cli("evaluate", f"--model={root / 'export'}", "--split=val", check=False, timeout=300)
    assert out.returncode == 2 and "is a parsing model, not translation; kt-parse and kt-evaluate-parser" in out.stderr
    out = run_cli("translate", f"--model={root / 'export'}", "--nbest=2", stdin="a b\n", check=False, timeout=300)
    assert out.returncode == 2 and "is a parsing model; its outputs have no n-best lists" in out.stderr
    out = run_cli("parse", f"--model={root / 'export'},{root / 'export'}", stdin="a b\n", check=False, timeout=300)
    assert out.returncode == 2 and "error: --model: parsers ensemble as chart parsers" in out.stderr
