"""Translating many lines: batches by length, original order restored, the same results from either kind of model."""

import threading

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import PAD_ID, inference
from keras_transformer.data.tokenizer import append_eos
from keras_transformer.serving import checks, loading
from keras_transformer.decoding import translate_ids
from keras_transformer.tasks.translation import lines as translation_lines
from keras_transformer.decoding.lines import length_batches, run_batches
from keras_transformer import artifacts
from tests.inference.support import run_cli

LINES = ["A dog runs across the green field near the river.", "", "Two men.", "A girl is playing.",
         "A man in a blue shirt is standing on a ladder cleaning windows.", "Kids."]


def test_batches_by_length_and_restores_order():
    assert length_batches(["a b c", "a", "a b", "", "a b c d"], 2) == [[1, 2], [0, 4]]  # a blank line in none
    calls = []

    def fake(inputs, beam_size, alpha, extra_length):  # "translates" by reversing; score = -characters
        texts = [t.decode() for t in inputs.numpy()]
        calls.append((texts, int(beam_size), float(alpha), int(extra_length)))
        return {"translations": tf.constant([t[::-1] for t in texts]),
                "scores": tf.constant([-float(len(t)) for t in texts])}

    translator = artifacts.Loaded(fake, (4, 0.6, 50), None, "fake", None)
    translations, scores = translation_lines.translate_lines(translator, LINES, batch_size=4, alpha=0.0)
    assert translations == [line[::-1] for line in LINES]  # the blank line's "" without being decoded
    np.testing.assert_array_equal(scores, [-len(line) for line in LINES])
    assert [c[0] for c in calls] == [["Kids.", "Two men.", "A girl is playing.", LINES[0]], [LINES[4]]]
    assert {c[1:] for c in calls} == {(4, 0.0, 50)}  # unset options take the recipe's values


def test_batches_in_flight_are_decoded_at_once_and_come_back_in_order():
    two_at_once = threading.Barrier(2, timeout=30)  # passes only when two batches are being decoded together

    def fake(inputs, beam_size, alpha, extra_length):
        texts = [t.decode() for t in inputs.numpy()]
        if texts[0] in ("Kids.", LINES[0]):  # the batches of three lines (the blank one is in none)
            two_at_once.wait()
        return {"texts": texts}

    got = [(batch, out["texts"]) for batch, out in run_batches(fake, LINES, 3, (4, 0.6, 50), in_flight=2)]
    assert got == [(batch, [LINES[i] for i in batch]) for batch in length_batches(LINES, 3)]


@pytest.mark.slow
def test_work_directory_and_saved_model_agree_and_kt_translate_keeps_order(trained_workdir, exported):
    from_checkpoint = translation_lines.translate_lines(inference.load(trained_workdir), LINES, batch_size=2)
    from_export = translation_lines.translate_lines(inference.load(exported), LINES, batch_size=2)
    assert from_checkpoint[0] == from_export[0]
    np.testing.assert_allclose(from_checkpoint[1], from_export[1], rtol=1e-6)

    result = run_cli("translate", f"--model={exported}", "--batch_size=2", stdin="".join(f"{x}\n" for x in LINES))
    assert result.stdout.split("\n") == from_export[0] + [""]  # line i translates line i
    assert f"translated {len(LINES)} lines" in result.stderr


@pytest.mark.slow
def test_the_best_alone_is_the_best_of_the_nbest_search(trained_workdir, exported):
    """``translate_lines`` decodes through ``Loaded.best`` (a SavedModel's serving_default at its own options, a
    work directory's best_with_options at any), whose search stops once the best is final: the same translations
    and scores (to float rounding) as the n-best search of translate_with_options."""
    export = inference.load(exported)
    for loaded in (export, inference.load(trained_workdir)):
        for alpha in (None, 1.2):
            best = translation_lines.translate_lines(loaded, LINES, batch_size=4, alpha=alpha)
            full = translation_lines.translate_lines(loaded._replace(best=None), LINES, batch_size=4, alpha=alpha)
            assert best[0] == full[0]
            np.testing.assert_allclose(best[1], full[1], rtol=1e-6, atol=1e-5)  # a batch's rows round by its size
    beam_size, alpha, extra_length = (tf.constant(v) for v in export.defaults)
    inputs = tf.constant(LINES)
    assert set(export.best(inputs, beam_size, alpha, extra_length)) == {"translations", "scores", "truncated"}
    assert "nbest_translations" in export.best(inputs, beam_size, tf.constant(1.2), extra_length)


@pytest.mark.slow
def test_an_export_records_its_stop_rule_and_searches_by_it(trained_workdir, tmp_path):
    export_dir = tmp_path / "heuristic"
    run_cli("export", f"--model={trained_workdir}", f"--export_dir={export_dir}", "--stop_rule=heuristic",
            "--ids_only")
    assert loading.read_info(export_dir)["recipe"]["decode"]["stop_rule"] == "heuristic"
    model, recipe, tok = artifacts.load_model(trained_workdir)
    source_ids = append_eos(tok.tokenize(tf.constant(LINES))).to_tensor(PAD_ID)  # [B, S]
    source_ids = checks.truncate_source(source_ids, checks.max_source_length(recipe))  # as the export reads them
    got = tf.saved_model.load(str(export_dir)).signatures["translate_ids"](source_ids=source_ids)
    d = recipe.decode
    want_sequences, want_scores = translate_ids(model, source_ids, d.beam_size, d.alpha, d.extra_length,
                                                stop_rule="heuristic")
    np.testing.assert_array_equal(got["sequences"], want_sequences)
    np.testing.assert_allclose(got["scores"], want_scores, rtol=1e-6)
