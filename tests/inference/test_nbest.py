"""kt-translate --nbest / --with_scores: the n best hypotheses of each line, in input order, best first."""

import re

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import inference
from keras_transformer.tasks.translation import lines as translation_lines
from keras_transformer import artifacts
from tests.inference.support import run_cli

LINES = ["A dog runs across the green field near the river.", "", "Two men.", "A girl is playing.", "Kids."]


def _fake(inputs, beam_size, alpha, extra_length):
    """K = beam_size hypotheses 'text#k' scored -len(text) - k; "Two men." has only 2 (the rest empty slots);
    "Kids." comes back with two line breaks (of the kind a byte piece can make) in it."""
    texts = [t.decode() for t in inputs.numpy()]
    k = int(beam_size)
    nbest = [[f"{t}#{j}".replace("Kids.", "Kids.\u2028\n") if t != "Two men." or j < 2 else "" for j in range(k)]
             for t in texts]
    scores = [[-len(t) - j if t != "Two men." or j < 2 else -1e9 for j in range(k)] for t in texts]
    return {"translations": tf.constant([row[0] for row in nbest]), "scores": tf.constant([s[0] for s in scores]),
            "nbest_translations": tf.constant(nbest), "nbest_scores": tf.constant(scores, tf.float32)}


def test_nbest_in_input_order_best_first_without_empty_slots():
    translator = artifacts.Loaded(_fake, (4, 0.6, 50), None, "fake", None)
    result = translation_lines.translate_nbest(translator, LINES, 3, batch_size=2)
    assert result.translations[0] == [f"{LINES[0]}#{j}" for j in range(3)]
    assert result.translations[2] == ["Two men.#0", "Two men.#1"]  # the empty third slot is left out
    assert result.translations[1] == [""] and result.scores[1] == [0.0]  # a blank line: "" alone, not decoded
    assert result.scores[2] == [-8.0, -9.0]
    assert translation_lines.format_nbest(result)[:4] == [f"0 ||| {LINES[0]}#0 ||| -49.000000",
                                                  f"0 ||| {LINES[0]}#1 ||| -50.000000",
                                                  f"0 ||| {LINES[0]}#2 ||| -51.000000", "1 |||  ||| 0.000000"]
    assert len(translation_lines.format_nbest(result)) == 3 * len(LINES) - 3
    assert len("\n".join(translation_lines.format_nbest(result)).splitlines()) == 3 * len(LINES) - 3
    assert translation_lines.format_scored(["Hallo", ""], np.float32([-0.5, -1.25])) == [
        "-0.500000\tHallo", "-1.250000\t"]

    assert result.translations[4] == ["Kids.  #0", "Kids.  #1", "Kids.  #2"]  # one line each, whatever reads it
    assert translation_lines.translate_nbest(translator, LINES, 6, beam_size=6).translations[4][5] == "Kids.  #5"
    for nbest, beam in ((5, None), (3, 2), (0, None)):
        with pytest.raises(ValueError, match=r"nbest: must be between 1 and the beam size K = \d, got \d"):
            translation_lines.translate_nbest(translator, LINES, nbest, beam_size=beam)


_ENTRY = re.compile(r"^(\d+) \|\|\| (.*) \|\|\| (-?\d+\.\d{6})$")


@pytest.mark.slow
def test_kt_translate_nbest_and_with_scores(trained_workdir, exported):
    stdin = "".join(f"{x}\n" for x in LINES)
    result = run_cli("translate", f"--model={exported}", "--nbest=3", "--batch_size=2", stdin=stdin)
    entries = [_ENTRY.match(line).groups() for line in result.stdout.splitlines()]
    assert [int(i) for i, _, _ in entries] == [i for i in range(len(LINES)) for _ in range(1 if i == 1 else 3)]
    for i in range(len(LINES)):
        scores = [float(s) for j, _, s in entries if int(j) == i]
        assert scores == sorted(scores, reverse=True)

    translator = inference.load(trained_workdir)
    expected = translation_lines.translate_nbest(translator, LINES, 3, batch_size=2)
    assert [text for _, text, _ in entries] == sum(expected.translations, [])
    np.testing.assert_allclose([float(s) for _, _, s in entries], sum(expected.scores, []), rtol=1e-6, atol=2e-6)

    best, best_scores = translation_lines.translate_lines(translator, LINES, batch_size=2)
    firsts = [next(text for j, text, _ in entries if int(j) == i) for i in range(len(LINES))]
    assert firsts == best  # the first of each n-best list is the translation
    result = run_cli("translate", f"--model={exported}", "--with_scores", "--batch_size=2", stdin=stdin)
    rows = [line.split("\t") for line in result.stdout.split("\n")[:-1]]
    assert [text for _, text in rows] == best
    np.testing.assert_allclose([float(score) for score, _ in rows], best_scores, rtol=1e-6, atol=2e-6)


def test_kt_translate_refuses_more_hypotheses_than_the_beam(exported):
    result = run_cli("translate", f"--model={exported}", "--nbest=5", stdin="A dog.\n", check=False)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: --nbest: must be <= the beam size K = 4 (the model's default), got 5")
    result = run_cli("translate", f"--model={exported}", "--nbest=3", "--beam_size=2", stdin="A dog.\n", check=False)
    assert (result.returncode, result.stderr.strip().splitlines()[-1]) == (
        2, "error: --nbest: must be <= the beam size K = 2 (--beam_size), got 3")
