"""Forced decoding (keras_transformer.scoring, kt-score): hand-computed log-probabilities, and the equivalence
that makes the scores trustworthy: scoring the beam search's own hypotheses gives back the beam's scores."""

import gzip
import json
import math
import os
import types

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import recipes
from keras_transformer import EOS_ID, PAD_ID, decoding, scoring
from keras_transformer.serving import checks
from keras_transformer import artifacts
from tests.conftest import REPO_ROOT
from tests.inference.support import MAX_SOURCE, run_cli

SHIPPED = os.path.join(REPO_ROOT, "saved_models", "multi30k_en_de")
LONG = ("A man in a blue shirt is standing on a ladder cleaning the windows of an old house while a woman in a "
        "red dress watches the children playing in the garden.")  # > MAX_SOURCE subwords: truncated
SOURCES = ["A dog runs across the green field near the river.", "", "Two men.", LONG, "Kids."]


# -- a hand-computed case -------------------------------------------------------------------------------------


class _FakeModel:
    """V = 8; at position t the logits are log 3 at token (y_{t-1} + 1) mod 8 (y_0 = BOS = 2), 0 elsewhere.

    So every token has p = 3/10 ("hit") or 1/10 ("miss"), PAD and BOS included: banning those two afterwards
    (log_probs_from_logits) does not renormalise the rest. The source is ignored.
    """

    config = types.SimpleNamespace(max_length=4)

    def encode(self, source_ids):
        return tf.zeros([tf.shape(source_ids)[0], tf.shape(source_ids)[1], 1])  # [B, S, 1]

    def decode(self, target_in_ids, memory, memory_mask):
        return tf.one_hot((target_in_ids + 1) % 8, 8) * math.log(3.0)  # [B, T, V]


class _LetterTokenizer:
    """'a' -> 4, 'b' -> 5, 'c' -> 6, 'd' -> 7 (one subword per letter)."""

    def tokenize(self, lines):
        rows = [[ord(c) - ord("a") + 4 for c in line] for line in lines]
        return tf.RaggedTensor.from_row_lengths(tf.constant(sum(rows, []), tf.int32), [len(r) for r in rows])

    source = target = property(lambda self: self)  # one vocabulary for both sides, as ``Tokenizer``


HIT, MISS = math.log(0.3), math.log(0.1)


def test_a_blank_source_and_target_score_zero_without_the_model(monkeypatch):
    recipe, rows = recipes.get("tiny"), []
    score_ids = scoring.score_ids
    monkeypatch.setattr(scoring, "score_ids", lambda model, source_ids, *a: rows.append(len(source_ids)) or
                        score_ids(model, source_ids, *a))
    result = scoring.score_lines(_FakeModel(), recipe, _LetterTokenizer(), ["x", " ", "", "x"], ["ab", "", "", ""])
    assert result.log_probs[1:3].tolist() == [0, 0] and result.lengths.tolist() == [3, 0, 0, 1]
    assert result.scores[1:3].tolist() == [0, 0] and sum(rows) == 2  # only the two pairs with a source
    np.testing.assert_allclose(result.log_probs[[0, 3]], [2 * MISS + HIT, HIT], rtol=1e-6)


def test_hand_computed_log_probs_lengths_and_length_penalty():
    recipe = recipes.get("tiny")
    # Y (EOS = 3)  decoder in   favoured     log P
    # ab3          2 a b        3 5 6        miss hit miss
    # 3            2            3            hit
    # dd3          2 d d        3 0 0        miss miss miss  (PAD favoured and banned: the rest not renormalised)
    # c3           2 c          3 7          miss miss
    targets = ["ab", "", "dd", "c"]
    log_probs = [2 * MISS + HIT, HIT, 3 * MISS, 2 * MISS]
    lengths = [3, 1, 3, 2]
    result = scoring.score_lines(_FakeModel(), recipe, _LetterTokenizer(), ["x"] * 4, targets, batch_size=3)
    np.testing.assert_allclose(result.log_probs, log_probs, rtol=1e-6)
    np.testing.assert_array_equal(result.lengths, lengths)
    lp = [((5.0 + n) / 6.0) ** recipe.decode.alpha for n in lengths]
    np.testing.assert_allclose(result.scores, np.divide(log_probs, lp), rtol=1e-6)
    assert recipe.decode.alpha == 0.6
    at_zero = scoring.score_lines(_FakeModel(), recipe, _LetterTokenizer(), ["x"] * 4, targets, alpha=0.0)
    np.testing.assert_allclose(at_zero.scores, log_probs, rtol=1e-6)  # α = 0: no length normalisation

    assert scoring.format_scores(result)[1] == f"{HIT:.6f}\t1\t{HIT / (1.0 ** 0.6):.6f}"
    assert json.loads(scoring.format_scores(result, as_json=True)[0]) == {
        "log_prob": round(2 * MISS + HIT, 6), "tokens": 3, "score": round((2 * MISS + HIT) / (8 / 6) ** 0.6, 6)}


def test_a_target_longer_than_max_length_is_refused_naming_its_line():
    recipe = recipes.get("tiny")
    ok = scoring.score_lines(_FakeModel(), recipe, _LetterTokenizer(), ["x"], ["abc"])  # 4 tokens with EOS
    assert ok.lengths.tolist() == [4]
    with pytest.raises(ValueError, match=r"line 2: the target has 5 tokens \(EOS included\), more than the "
                                         r"model's max_length 4"):
        scoring.score_lines(_FakeModel(), recipe, _LetterTokenizer(), ["x", "x"], ["a", "abcd"])
    with pytest.raises(ValueError, match="sources and targets: 2 and 1 lines"):
        scoring.score_lines(_FakeModel(), recipe, _LetterTokenizer(), ["x", "x"], ["a"])


# -- forced decoding reproduces the beam search --------------------------------------------------------------


def _pad(rows):
    out = np.full([len(rows), max(len(r) for r in rows)], PAD_ID, np.int32)
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out


def test_scoring_every_beam_hypothesis_gives_back_its_beam_score(trained_workdir):
    """All K hypotheses of each source, finished (up to EOS) or not (the whole sequence), truncated sources."""
    model, recipe, tok = artifacts.load_model(trained_workdir)
    source_ids = _pad([row + [EOS_ID] for row in tok.tokenize(SOURCES).to_list()])  # [B, S]
    assert source_ids.shape[1] > MAX_SOURCE  # LONG is cut by the translator and by the scorer alike
    limit = checks.max_source_length(recipe)
    sequences, beam_scores = decoding.translate_ids(model, checks.truncate_source(source_ids, limit), 4, 0.6, 50)
    rows, targets, expected = [], [], []
    for b, (hypotheses, scores) in enumerate(zip(sequences.numpy(), beam_scores.numpy())):  # [K, T], [K]
        for ids, score in zip(hypotheses, scores):
            ids = ids[ids != PAD_ID].tolist()
            if score > decoding.NEG_INF / 2:
                rows.append(b)
                targets.append(ids[:ids.index(EOS_ID) + 1] if EOS_ID in ids else ids)
                expected.append(score)
    assert len(expected) >= 4 * len(SOURCES) - 2
    log_probs, lengths, scores = scoring.score_ids(model, source_ids[rows], _pad(targets), 0.6, limit)
    np.testing.assert_allclose(scores.numpy(), expected, rtol=1e-5, atol=1e-4)
    assert lengths.numpy().tolist() == [len(t) for t in targets]
    lp = decoding.length_penalty(lengths, 0.6).numpy()
    np.testing.assert_allclose(log_probs.numpy() / lp, scores.numpy(), rtol=1e-6)


@pytest.mark.slow
def test_kt_score_of_kt_translate_nbest_gives_back_its_scores(tmp_path):
    """The shipped model, through both entry points: n-best text re-tokenized and scored (6 decimals)."""
    sources = ["A dog is running on the beach.", "", "Two men are playing soccer in the park.", "Kids."]
    nbest = run_cli("translate", f"--model={SHIPPED}", "--nbest=4", stdin="".join(f"{s}\n" for s in sources))
    entries = [line.split(" ||| ") for line in nbest.stdout.splitlines()]
    assert len(entries) >= 2 * len(sources)
    (tmp_path / "src.en").write_text("".join(f"{sources[int(i)]}\n" for i, _, _ in entries), encoding="utf-8")
    with gzip.open(tmp_path / "hyp.de.gz", "wt", encoding="utf-8") as f:
        f.write("".join(f"{text}\n" for _, text, _ in entries))
    scored = run_cli("score", f"--model={SHIPPED}", f"--source={tmp_path / 'src.en'}",
                     f"--target={tmp_path / 'hyp.de.gz'}")
    columns = [line.split("\t") for line in scored.stdout.splitlines()]
    assert len(columns) == len(entries) and all(len(c) == 3 for c in columns)
    np.testing.assert_allclose([float(c[2]) for c in columns], [float(s) for _, _, s in entries], atol=1e-4)
    with open(os.path.join(SHIPPED, "metadata.json"), encoding="utf-8") as f:
        alpha = json.load(f)["decode"]["alpha"]  # the export's default, which both commands decoded with
    for log_prob, tokens, score in columns:  # the third column is the first over lp(the second)
        assert float(score) == pytest.approx(float(log_prob) / ((5 + int(tokens)) / 6) ** alpha, abs=2e-6)
    assert f"scored {len(entries)} pairs" in scored.stderr


# -- kt-score's command line ----------------------------------------------------------------------------------


def test_kt_score_writes_one_line_per_pair_in_order(trained_workdir, tmp_path):
    targets = ["Ein Hund rennt.", "", "", "Zwei Männer stehen auf der Straße und reden miteinander.", "x"]
    (tmp_path / "src.en").write_text("".join(f"{s}\n" for s in SOURCES), encoding="utf-8")
    (tmp_path / "tgt.de").write_text("".join(f"{t}\n" for t in targets), encoding="utf-8")
    output = tmp_path / "out" / "scores.jsonl"
    run_cli("score", f"--model={trained_workdir}", f"--source={tmp_path / 'src.en'}",
            f"--target={tmp_path / 'tgt.de'}", "--batch_size=2", "--json", f"--output={output}")
    rows = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    model, recipe, tok = artifacts.load_model(trained_workdir)
    expected = scoring.score_lines(model, recipe, tok, SOURCES, targets)  # other batches: float32 sums differ a bit
    assert [r["tokens"] for r in rows] == expected.lengths.tolist()
    assert rows[1] == {"log_prob": 0, "tokens": 0, "score": 0}  # a blank pair: kt-translate's score of a blank line
    assert rows[2]["tokens"] == 1  # an empty target of a source is [EOS]
    np.testing.assert_allclose([r["log_prob"] for r in rows], expected.log_probs, rtol=1e-6, atol=2e-6)
    np.testing.assert_allclose([r["score"] for r in rows], expected.scores, rtol=1e-6, atol=2e-6)


@pytest.mark.slow
def test_kt_score_refuses_unaligned_files_and_overlong_targets(trained_workdir, tmp_path):
    source, target = tmp_path / "src.en", tmp_path / "tgt.de"
    source.write_text("a\nb\nc\n", encoding="utf-8")
    target.write_text("a\nb\n", encoding="utf-8")
    result = run_cli("score", f"--model={trained_workdir}", f"--source={source}", f"--target={target}", check=False)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: --source/--target: {source} has 3 lines, {target} has 2; they must be aligned")

    target.write_text("a\n" + "x y z " * 40 + "\nc\n", encoding="utf-8")  # line 2: far more than 96 subwords
    result = run_cli("score", f"--model={trained_workdir}", f"--source={source}", f"--target={target}", check=False)
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: --target: {target}: line 2: the target has ") and "max_length 96" in last
