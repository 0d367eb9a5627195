"""Text in, text out as a translator's user expects: blank lines, over-long lines, interactive input.

A blank line (empty or whitespace only) is never decoded: the tools write an empty line for it and the exported
signatures answer "" (score 0); a line longer than the model reads is named on stderr and counted, or refused with
--max_input_length; stdin on a pipe or a terminal is answered as its lines arrive.
"""

import select
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.artifacts import Loaded
from keras_transformer.decoding.lines import is_blank, length_batches
from keras_transformer.serving import checks
from keras_transformer.tasks.translation import lines as translation_lines
from tests import support
from tests.inference.support import MAX_SOURCE
from tests.robustness.support import assert_one_error_line, run_cli

BLANKS = ["", " ", "\t  ", "\u3000", "\u00a0\u2009", "\x0b\x1c"]
SENTENCES = ["A dog runs.", "Two men play football in the park.", "A woman walks."]
LONG = " ".join(["a dog runs through the green grass"] * 6)  # 42 words: far more subwords than the model's 23


def test_blank_in_the_graph_is_pythons_isspace_for_every_code_point():
    chars = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    in_graph = checks.blank(tf.constant([c.encode("utf-8") for c in chars])).numpy()
    in_python = np.array([is_blank(c) for c in chars])
    assert in_python.sum() == 29 and (in_graph == in_python).all()
    assert checks.blank(tf.constant(["", " a ", "a", " \t\u2028 "])).numpy().tolist() == [True, False, False, True]


def _recording_model(calls):
    """A Loaded whose search records what it is given and answers each input with its own upper-cased text."""
    def fn(inputs, beam_size, alpha, extra_length):
        texts = [t.decode() for t in inputs.numpy()]
        calls.append(texts)
        upper = [t.upper().encode() for t in texts]
        return {"translations": tf.constant(upper, tf.string, shape=[len(texts)]),
                "scores": tf.fill([len(texts)], -1.5),
                "nbest_translations": tf.constant([[u, b"x"] for u in upper], tf.string, shape=[len(texts), 2]),
                "nbest_scores": tf.constant([[-1.5, -2.5]] * len(texts), tf.float32, shape=[len(texts), 2])}

    return Loaded(fn, (2, 0.6, 50), None, "recording", None)


def test_blank_lines_never_reach_the_model_and_come_back_empty_scored_zero():
    calls = []
    lines = ["a b", BLANKS[1], "c", BLANKS[0], BLANKS[3]]
    assert sorted(i for batch in length_batches(lines, 2) for i in batch) == [0, 2]
    translations, scores = translation_lines.translate_lines(_recording_model(calls), lines, batch_size=2)
    assert translations == ["A B", "", "C", "", ""] and scores.tolist() == [-1.5, 0.0, -1.5, 0.0, 0.0]
    assert sorted(text for call in calls for text in call) == ["a b", "c"]
    nbest = translation_lines.translate_nbest(_recording_model([]), lines, 2, batch_size=2)
    assert nbest.translations == [["A B", "x"], [""], ["C", "x"], [""], [""]]
    assert nbest.scores[1] == [0.0] and nbest.scores[0] == [-1.5, -2.5]
    assert translation_lines.format_nbest(nbest, first=10)[2] == "11 |||  ||| 0.000000"


def test_a_parser_gives_a_blank_line_an_empty_line_and_no_tree():
    from keras_transformer.tasks.parsing.lines import parse_lines

    calls = []

    def fn(inputs, beam_size, alpha, extra_length):
        words = [t.decode().split() for t in inputs.numpy()]
        calls.append(words)
        trees = ["(S " + " ".join(f"(XX {w})" for w in ws) + ")" for ws in words]
        return {"trees": tf.constant(trees), "linearized": tf.constant(["(S " + "XX " * len(ws) + ")" for ws in words]),
                "scores": tf.fill([len(words)], -0.5)}

    parses = parse_lines(Loaded(fn, (2, 0.3, 300), None, "recording", None), ["a b", "", " \t", "c"])
    assert parses.trees == ["(S (XX a) (XX b))", "", "", "(S (XX c))"] and parses.repaired == 0
    assert parses.scores.tolist() == [-0.5, 0.0, 0.0, -0.5] and sorted(map(len, sum(calls, []))) == [1, 2]


@pytest.fixture(scope="module")
def signatures(exported):
    import tensorflow_text  # noqa: F401  (the text signatures' ops)

    return tf.saved_model.load(str(exported)).signatures


def _with_options(signature, inputs):
    return signature(inputs=tf.constant(inputs, tf.string), beam_size=tf.constant(2), alpha=tf.constant(0.6),
                     extra_length=tf.constant(5))


def test_the_exported_signatures_answer_a_blank_input_with_nothing_and_the_rest_as_alone(signatures):
    mixed = [BLANKS[0], SENTENCES[0], BLANKS[2], SENTENCES[1], BLANKS[4], SENTENCES[2]]
    calls = {"serving_default": lambda inputs: signatures["serving_default"](inputs=tf.constant(inputs)),
             "translate_with_options": lambda inputs: _with_options(signatures["translate_with_options"], inputs)}
    for name, call in calls.items():
        together, alone = call(mixed), call(SENTENCES)
        for key, value in together.items():
            value, expected = value.numpy(), alone[key].numpy()
            assert (value[1::2] == expected).all(), (name, key)
            if key == "nbest_scores":
                assert value[0::2].tolist() == [[0.0, -1e9]] * 3
            elif value.dtype == object:
                assert (value[0::2] == b"").all(), (name, key)
            else:
                assert (value[0::2] == 0).all(), (name, key)
    only_blank = signatures["serving_default"](inputs=tf.constant(BLANKS))
    assert only_blank["translations"].numpy().tolist() == [b""] * len(BLANKS)
    assert only_blank["scores"].numpy().tolist() == [0.0] * len(BLANKS)


def test_the_exported_signatures_flag_an_input_longer_than_the_model_reads(signatures):
    out = signatures["serving_default"](inputs=tf.constant([SENTENCES[0], LONG, ""]))
    assert out["truncated"].numpy().tolist() == [False, True, False]
    assert _with_options(signatures["translate_with_options"], [LONG])["truncated"].numpy().tolist() == [True]


def test_kt_translate_writes_an_empty_line_for_a_blank_one_and_the_others_as_without_it(exported, tmp_path):
    plain, mixed = tmp_path / "plain.en", tmp_path / "mixed.en"
    plain.write_text("\n".join(SENTENCES) + "\n")
    mixed.write_text("\n".join([SENTENCES[0], "", SENTENCES[1], "   ", SENTENCES[2]]) + "\n")
    alone = run_cli("translate", f"--model={exported}", f"--input={plain}", "--with_scores")
    together = run_cli("translate", f"--model={exported}", f"--input={mixed}", "--with_scores")
    assert alone.returncode == 0 and together.returncode == 0, together.stderr[-2000:]
    expected = alone.stdout.splitlines()
    assert together.stdout.splitlines() == [expected[0], "0.000000\t", expected[1], "0.000000\t", expected[2]]


def test_a_long_line_is_named_counted_and_refused_with_max_input_length(exported, tmp_path):
    source = tmp_path / "long.en"
    source.write_text(f"{SENTENCES[0]}\n{LONG}\n{SENTENCES[1]}\n")
    result = run_cli("translate", f"--model={exported}", f"--input={source}")
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 3, result.stderr[-2000:]
    named = [line for line in result.stderr.splitlines() if line.startswith("line ")]
    most = MAX_SOURCE - 1
    assert len(named) == 1 and named[0].startswith("line 2: 42 words (") and named[0].endswith(
        f"pieces) is longer than the model's {most}; translated its first {most} pieces"), result.stderr
    assert f"; 1 line longer than the model's {most} pieces, cut" in result.stderr.splitlines()[-1]
    refused = run_cli("translate", f"--model={exported}", f"--input={source}", "--max_input_length=10")
    assert_one_error_line(refused, "--max_input_length: line 2: 42 words", "is longer than 10")
    assert refused.stdout == ""
    too_large = run_cli("translate", f"--model={exported}", f"--input={source}", f"--max_input_length={most + 1}")
    assert_one_error_line(too_large, f"--max_input_length: at most the {most} subwords the model reads")


def test_kt_evaluate_and_kt_score_name_a_long_line_too(exported, tmp_path):
    source, target = tmp_path / "src.en", tmp_path / "tgt.de"
    source.write_text(f"{LONG}\n\n")
    target.write_text("ein Hund\n\n")
    evaluated = run_cli("evaluate", f"--model={exported}", f"--source={source}", f"--reference={target}")
    assert evaluated.returncode == 0 and "line 1: 42 words" in evaluated.stderr, evaluated.stderr[-2000:]
    scored = run_cli("score", f"--model={exported}", f"--source={source}", f"--target={target}")
    assert scored.returncode == 0, scored.stderr[-2000:]
    assert "line 1: 42 words" in scored.stderr and "scored the target after its first" in scored.stderr
    assert scored.stdout.splitlines()[1] == "0.000000\t0\t0.000000"  # a blank pair: what kt-translate scores it


def test_stdin_on_a_pipe_is_answered_line_by_line_before_it_closes(exported):
    process = subprocess.Popen(support.python_command("keras_transformer.cli.translate", f"--model={exported}"),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=support.environment(), cwd=support.REPO_ROOT)
    try:
        answers = []
        for sentence in (SENTENCES[0], "", SENTENCES[1]):
            process.stdin.write(f"{sentence}\n".encode())
            process.stdin.flush()
            deadline = time.monotonic() + 120
            while not select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
                if time.monotonic() > deadline:
                    pytest.fail(f"no answer to {sentence!r} within 120 s while stdin stayed open")
            answers.append(process.stdout.readline().decode())
        process.stdin.close()
        assert process.wait(timeout=60) == 0 and process.stdout.read() == b""
    finally:
        process.kill()
        process.wait()
    assert answers[1] == "\n" and all(a.endswith("\n") and a.strip() for a in (answers[0], answers[2]))
