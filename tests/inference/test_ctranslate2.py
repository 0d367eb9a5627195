"""CTranslate2 export of the tiny work directory: the converted model scores and translates as ours does.

CTranslate2's log-probabilities of a forced target equal our decoder's; its translations, n-best lists and
scores, driven as ``ctranslate2_translate``'s gnmt search describes, equal our beam search's under the same
truncation, empty-input and per-sentence length rules; its native search returns what CTranslate2's
``translate_batch`` does, within each sentence's maximum length. The re-ranking and the stopping rule are
checked on hand-made hypotheses.

Ours bans PAD and BOS after its log-softmax, CTranslate2 before it (renormalising over the other tokens).
A trained model gives them next to no probability (at most 3.3e-5 per token for the shipped model), the
tiny random one about 2/V; for the decoding comparisons the tiny model's PAD and BOS logits are pushed to
-30 (``_pinned``), so that the two searches compare the same log-probabilities to float precision.
"""

import gzip
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from keras_transformer import BOS_ID, EOS_ID, PAD_ID, inference
from keras_transformer.data import corpora
from keras_transformer.engines import INFO, SENTENCEPIECE, SOURCE_EOS
from tests.inference.support import run_cli

ctranslate2 = pytest.importorskip("ctranslate2")

from keras_transformer.engines import ctranslate2_convert, ctranslate2_translate  # noqa: E402
from keras_transformer.tasks.translation.module import Translator
from keras_transformer.tasks.translation import lines as translation_lines
from keras_transformer import artifacts

LONG = " ".join(["A man in a blue shirt is standing on a tall ladder cleaning the windows of a house."] * 3)
LINES = ["A dog runs across the green field near the river.", "", "Two men.", "A girl is playing.",
         "A man in a blue shirt is standing on a ladder cleaning windows.", "Kids.", LONG]
TARGETS = ["Ein Hund rennt über die grüne Wiese am Fluss.", "", "Zwei Männer.", "Ein Mädchen spielt.",
           "Ein Mann in einem blauen Hemd steht auf einer Leiter und putzt Fenster.", "Kinder.", "Ein Mann."]


def _pinned(model, logit):
    """The model with the PAD and BOS logits pinned at ``logit``: dimension 0 of the last decoder LayerNorm
    outputs |logit| (gamma 0, beta |logit|), no other token's embedding uses dimension 0, and PAD's and BOS's
    embeddings are sign(logit) e_0 (a moderate input embedding for BOS)."""
    embeddings = model.embedding.embeddings.numpy()  # [V, D]
    embeddings[:, 0] = 0.0
    embeddings[[PAD_ID, BOS_ID]] = 0.0
    embeddings[[PAD_ID, BOS_ID], 0] = np.sign(logit)
    model.embedding.embeddings.assign(embeddings)
    norm = model.decoder.blocks[-1].ffn_residual.layer_norm
    first = np.arange(norm.gamma.shape[0]) == 0
    norm.gamma.assign(np.where(first, 0.0, norm.gamma.numpy()))
    norm.beta.assign(np.where(first, abs(logit), norm.beta.numpy()))
    return model


@pytest.fixture(scope="module")
def keras_parts(trained_workdir):
    return artifacts.load_model(trained_workdir)  # (model, recipe, tokenizer), latest checkpoint


@pytest.fixture(scope="module")
def converted(keras_parts, tmp_path_factory):
    model, recipe, tok = keras_parts
    return ctranslate2_convert.convert(model, tok, recipe, tmp_path_factory.mktemp("ct2") / "tiny",
                                       info={"checkpoint": "latest"})


@pytest.fixture(scope="module")
def sharp(trained_workdir, tmp_path_factory):
    """(the tiny model with PAD and BOS pinned at -30 in our Translator, its CTranslate2 directory)."""
    model, recipe, tok = artifacts.load_model(trained_workdir)
    model = _pinned(model, -30.0)
    directory = ctranslate2_convert.convert(model, tok, recipe, tmp_path_factory.mktemp("ct2") / "sharp")
    return Translator(model, tok, recipe), directory


@pytest.fixture(scope="module")
def pair(sharp):
    """(ours, theirs) over the pinned tiny model: our Translator and the CTranslate2 translator's gnmt search."""
    translator, directory = sharp
    return translator, ctranslate2_translate.load(directory, intra_threads=1, search="gnmt")


def _ours(translator, lines, beam_size, alpha, extra_length):
    out = translator.translate_with_options(tf.constant(lines), tf.constant(beam_size), tf.constant(alpha),
                                            tf.constant(extra_length))
    return {k: v.numpy() for k, v in out.items()}


def test_directory_holds_the_model_vocabulary_tokenizer_and_recipe(converted, keras_parts):
    _, recipe, tok = keras_parts
    names = sorted(os.listdir(converted))
    assert names == sorted(["config.json", "model.bin", "source_vocabulary.json", "target_vocabulary.json",
                            SENTENCEPIECE, INFO])
    config = json.loads(Path(converted, "config.json").read_text())
    assert config["layer_norm_epsilon"] == pytest.approx(1e-6) and config["decoder_start_token"] == "<s>"
    assert (config["bos_token"], config["eos_token"], config["add_source_eos"]) == ("<s>", "</s>", False)
    target = json.loads(Path(converted, "target_vocabulary.json").read_text())
    source = json.loads(Path(converted, "source_vocabulary.json").read_text())
    pieces = [p.decode() for p in tok.id_to_piece(tf.range(tok.vocab_size)).numpy()]
    assert target == pieces and source == pieces[:EOS_ID] + [SOURCE_EOS] + pieces[EOS_ID + 1:]
    assert Path(converted, SENTENCEPIECE).read_bytes() == tok.model_proto
    info = json.loads(Path(converted, INFO).read_text())
    assert (info["max_source_length"], info["quantization"], info["checkpoint"]) == (24, "float32", "latest")
    assert info["decode"] == {"beam_size": 4, "alpha": 0.6, "extra_length": 50}
    assert info["recipe"] == json.loads(recipe.to_json())  # tuples as JSON lists


def test_forced_target_log_probs_equal_ours(converted, keras_parts):
    model, _, tok = keras_parts
    sp = spm.SentencePieceProcessor(model_proto=tok.model_proto)
    translator = ctranslate2.Translator(converted, intra_threads=1)
    results = translator.score_batch([sp.encode(x, out_type=str) + [SOURCE_EOS] for x in LINES[:6]],
                                     [sp.encode(y, out_type=str) for y in TARGETS[:6]])  # appends EOS
    for source, target, result in zip(LINES, TARGETS, results):
        source_ids, target_ids = sp.encode(source) + [EOS_ID], sp.encode(target)
        logits = model((tf.constant([source_ids]), tf.constant([[BOS_ID] + target_ids])), training=False)
        target_out = target_ids + [EOS_ID]
        ours = tf.nn.log_softmax(logits[0]).numpy()[np.arange(len(target_out)), target_out]  # [T]
        np.testing.assert_allclose(result.log_probs, ours, atol=1e-4, rtol=0)


@pytest.mark.parametrize("changes", [dict(norm="pre"), dict(positional="learned"), dict(d_k=8, d_v=8)],
                         ids=["pre_norm", "learned_positions", "head_size_8"])
def test_other_architectures_score_as_ours(keras_parts, tmp_path, changes):
    """Pre-LN with the stacks' final LayerNorm, learned positions (Table 3 row E), d_k = d_v != d_model / h
    (Table 3 row B): random weights, forced log-probs equal to 1e-4."""
    import dataclasses

    from keras_transformer.model import build_model

    _, recipe, tok = keras_parts
    recipe = dataclasses.replace(recipe, model=dataclasses.replace(recipe.model, **changes))
    model = build_model(recipe.model)
    for weight in model.weights:  # LayerNorm gains and biases away from 1 and 0 too
        weight.assign(weight.numpy() + np.random.default_rng(1).normal(0, 0.1, weight.shape).astype(np.float32))
    directory = ctranslate2_convert.convert(model, tok, recipe, tmp_path / "ct2")
    sp = spm.SentencePieceProcessor(model_proto=tok.model_proto)
    result = ctranslate2.Translator(directory, intra_threads=1).score_batch(
        [sp.encode(LINES[0], out_type=str) + [SOURCE_EOS]], [sp.encode(TARGETS[0], out_type=str)])[0]
    source_ids, target_ids = sp.encode(LINES[0]) + [EOS_ID], sp.encode(TARGETS[0])
    logits = model((tf.constant([source_ids]), tf.constant([[BOS_ID] + target_ids])), training=False)
    ours = tf.nn.log_softmax(logits[0]).numpy()[np.arange(len(target_ids) + 1), target_ids + [EOS_ID]]
    np.testing.assert_allclose(result.log_probs, ours, atol=1e-4, rtol=0)


@pytest.mark.parametrize("beam_size, alpha, extra_length", [(4, 0.6, 50), (3, 1.0, 10), (4, 0.6, 2), (1, 0.0, 50)])
def test_translations_nbest_and_scores_equal_ours(pair, beam_size, alpha, extra_length):
    """Beam 4 and 3 with GNMT's penalty; extra_length 2, where most items end at their own maximum length
    with nothing finished (the alive fallback); beam 1 with α = 0 (greedy)."""
    ours, theirs = pair
    expected = _ours(ours, LINES, beam_size, alpha, extra_length)
    got = theirs.translate(LINES, beam_size, alpha, extra_length)
    assert [t.decode() for t in expected["translations"]] == list(got["translations"])
    assert [[t.decode() for t in row] for row in expected["nbest_translations"]] == got["nbest_translations"].tolist()
    np.testing.assert_allclose(got["nbest_scores"], expected["nbest_scores"], atol=1e-4, rtol=1e-5)
    np.testing.assert_array_equal(got["scores"], got["nbest_scores"][:, 0])


def test_long_and_empty_inputs_follow_our_rules(pair):
    ours, theirs = pair
    sources = theirs.encode(["", LONG])
    assert sources[0] == [SOURCE_EOS] and len(sources[1]) == 24 and sources[1][-1] == SOURCE_EOS  # 23 pieces + EOS
    expected = _ours(ours, ["", LONG, LONG + " And more words at the end."], 4, 0.6, 5)
    got = theirs.translate(["", LONG, LONG + " And more words at the end."], 4, 0.6, 5)
    assert (got["translations"][0], got["scores"][0]) == ("", 0)  # a blank input, as the signatures answer it
    assert got["translations"][1] == got["translations"][2]  # the words past max_source_length are cut
    assert [t.decode() for t in expected["translations"]] == list(got["translations"])
    np.testing.assert_allclose(got["scores"], expected["scores"], atol=1e-4, rtol=1e-5)


def test_each_sentence_keeps_its_own_maximum_length(pair, monkeypatch):
    """extra_length 1: "Kids." (S tokens, EOS included) may emit S + 1 tokens, the long line (24) 25. Searched
    together to 25, "Kids." keeps its hypotheses of at most S + 1 tokens, or is searched again to exactly S + 1
    where none of them finished (for its alive beams at S + 1)."""
    ours, theirs = pair
    calls, translator = [], theirs._translator

    class Recorder:
        def translate_batch(self, sources, **options):
            calls.append((len(sources), options["max_decoding_length"]))
            return translator.translate_batch(sources, **options)

    monkeypatch.setattr(theirs, "_translator", Recorder())
    sources = theirs.encode(["Kids.", LONG, "Kids."])
    limits = [len(sources[0]) + 1, 25, len(sources[0]) + 1]
    nbest = theirs._gnmt_search(sources, limits, beam_size=2, alpha=0.0)
    assert limits[0] < 25 and calls[0] == (3, 25) and calls[1:] in ([], [(2, limits[0])])
    assert all(len(tokens) <= limit for hypotheses, limit in zip(nbest, limits) for tokens, _ in hypotheses)
    got = theirs.translate(["Kids.", LONG, "Kids."], beam_size=2, alpha=0.0, extra_length=1)
    expected = _ours(ours, ["Kids.", LONG, "Kids."], 2, 0.0, 1)
    assert [t.decode() for t in expected["translations"]] == list(got["translations"])
    np.testing.assert_allclose(got["nbest_scores"], expected["nbest_scores"], atol=1e-4, rtol=1e-5)


def test_pad_and_bos_are_never_emitted(trained_workdir, tmp_path):
    """Not even where the model puts nearly all its mass on them (their logits pinned at +30)."""
    model, recipe, tok = artifacts.load_model(trained_workdir)
    directory = ctranslate2_convert.convert(_pinned(model, 30.0), tok, recipe, tmp_path / "pad_loving")
    translator = ctranslate2_translate.load(directory, intra_threads=1, search="gnmt")
    hypotheses = translator._decode(translator.encode(LINES), beam_size=4, length=10)
    tokens = [token for item in hypotheses for pieces, _ in item for token in pieces]
    assert len(tokens) > 100 and not set(tokens) & {"<pad>", "<s>"}
    unasked = translator._translate_batch(translator.encode(LINES[:1]), 4, 10, suppress=False)  # the first search
    assert {"<pad>", "<s>"} & {token for pieces, _ in unasked[0] for token in pieces}


def test_native_search_is_translate_batch_within_each_maximum_length(converted, monkeypatch):
    """The native search returns what CTranslate2's translate_batch returns for each sentence searched to its
    own maximum length (source tokens + extra_length): hypotheses and scores (log P / |Y|^α). A batch is
    searched to its longest maximum; with extra_length 1 the sentences with a hypothesis past their own
    are searched again, grouped by maximum length."""
    native = ctranslate2_translate.load(converted, intra_threads=1)
    assert native.search == "native" and "native search" in native.description
    translator, calls = native._translator, []

    class Recorder:
        def translate_batch(self, sources, **options):
            calls.append((len(sources), options["max_decoding_length"]))
            return translator.translate_batch(sources, **options)

    sources = native.encode(LINES)
    for extra_length in (50, 1):
        calls.clear()
        monkeypatch.setattr(native, "_translator", Recorder())
        got = native.translate(LINES, beam_size=3, alpha=0.5, extra_length=extra_length)
        monkeypatch.setattr(native, "_translator", translator)
        limits = [len(s) + extra_length for s in sources]
        kept = [i for i, line in enumerate(LINES) if line.strip()]  # a blank line is not searched: "", score 0
        assert calls[0] == (len(kept), max(limits[i] for i in kept))
        assert all(length in limits for _, length in calls[1:])
        for i, (source, limit) in enumerate(zip(sources, limits)):
            if i not in kept:
                assert got["nbest_translations"][i][0] == "" and got["nbest_scores"][i][0] == 0
                continue
            alone = translator.translate_batch(
                [source], beam_size=3, num_hypotheses=3, length_penalty=0.5, return_scores=True,
                max_decoding_length=limit, max_input_length=0, suppress_sequences=[["<pad>"], ["<s>"]])[0]
            assert got["nbest_translations"][i].tolist() == [native._detokenize(t) for t in alone.hypotheses], i
            np.testing.assert_allclose(got["nbest_scores"][i], alone.scores, rtol=1e-4, atol=1e-5)
    assert len(calls) > 1  # extra_length 1: some sentences were searched again to their own maximum


def test_a_target_prefix_gives_our_greedy_translations_and_only_the_native_search_takes_one(sharp, pair):
    """Beam 1 at α = 0 is greedy decoding in both searches: CTranslate2's target_prefix and ours give the same
    outputs, every one starting with its prefix (a blank line is not decoded)."""
    translator, directory = sharp
    native = inference.load(directory)
    prefixes = ["Ein Hund", "x", "Zwei", "", "Ein Mann in", "Kinder", "Ein"]
    ours = inference.from_module(translator, translator.tokenizer, "ours")
    options = {"beam_size": 1, "alpha": 0.0, "extra_length": 10, "prefixes": prefixes}
    mine, _ = translation_lines.translate_lines(ours, LINES, **options)
    theirs, _ = translation_lines.translate_lines(native, LINES, **options)
    assert mine == theirs and mine[1] == ""
    assert all(t.startswith(p) for i, (t, p) in enumerate(zip(mine, prefixes)) if i != 1)
    with pytest.raises(ValueError, match="native search only"):
        pair[1].translate(LINES, prefixes=prefixes)


def test_gnmt_rerank_by_hand():
    """lp(n) = ((5 + n) / 6)^α, n counting EOS. With α = 1: "a b c EOS" (log P -2.2) scores -2.2 / 1.5 = -1.467
    and beats "a EOS" (-2.0 / (7/6) = -1.714) and "EOS" (-1.8); unfinished hypotheses count only where
    nothing finished, at the maximum length."""
    eos = "</s>"
    hypotheses = [(["a", eos], -2.0), (["a", "b", "c", eos], -2.2), ([eos], -1.8), (["a", "b", "c"], -0.5)]
    best = ctranslate2_translate.gnmt_rerank(hypotheses, eos, max_length=4, beam_size=2, alpha=1.0)
    assert [t for t, _ in best] == [["a", "b", "c", eos], ["a", eos]]
    np.testing.assert_allclose([s for _, s in best], [-2.2 / 1.5, -2.0 / (7 / 6)])
    best = ctranslate2_translate.gnmt_rerank([(["a", "c", "c"], -0.8), (["a", "b", "c"], -0.5)], eos, 3, 4, 1.0)
    assert [t for t, _ in best] == [["a", "b", "c"], ["a", "c", "c"]]
    np.testing.assert_allclose([s for _, s in best], [-0.5 / (8 / 6), -0.8 / (8 / 6)])


def test_settled_is_ours_stopping_rule():
    """K = 2, α = 0, maximum length 10: settled once 2 finished and the worse (-2) beats the best candidate of
    the last step (log P -2.5 at length 3); not with one finished, nor when that candidate scores -1.5."""
    eos = "</s>"
    finished = [(["a", eos], -1.0), (["b", eos], -2.0)]

    def settled(hypotheses):
        best = ctranslate2_translate.gnmt_rerank(hypotheses, eos, 10, 2, 0.0)
        return ctranslate2_translate._settled(hypotheses, best, eos, 3, 10, 2, 0.0)

    assert settled(finished + [(["a", "b", "c"], -2.5)])
    assert not settled(finished[:1] + [(["a", "b", "c"], -2.5)])
    assert not settled(finished + [(["a", "b", "c"], -1.5)])


def test_convert_refuses_an_existing_directory_and_an_unknown_quantization(keras_parts, converted, tmp_path):
    model, recipe, tok = keras_parts
    with pytest.raises(FileExistsError, match="already exists"):
        ctranslate2_convert.convert(model, tok, recipe, converted)
    with pytest.raises(ValueError, match="^quantization: expected one of float32, int8"):
        ctranslate2_convert.convert(model, tok, recipe, tmp_path / "x", quantization="int4")
    assert not (tmp_path / "x").exists()


def test_int8_directory_loads_through_load_translator(keras_parts, tmp_path):
    model, recipe, tok = keras_parts
    directory = ctranslate2_convert.convert(model, tok, recipe, tmp_path / "int8", quantization="int8")
    loaded = inference.load(directory)  # the native search, with CTranslate2's default length penalty
    assert loaded.defaults == (4, ctranslate2_translate.DEFAULT_LENGTH_PENALTY, 50) and "int8" in loaded.description
    assert inference.load(directory, ctranslate2_search="gnmt").defaults == (4, 0.6, 50)
    translations, scores = translation_lines.translate_lines(loaded, LINES[:3], batch_size=2)
    assert len(translations) == 3 and np.all(scores[[0, 2]] < 0) and (translations[1], scores[1]) == ("", 0)
    with pytest.raises(ValueError, match="^--checkpoint: .* CTranslate2"):
        inference.load(directory, checkpoint="averaged")


# -- the entry points ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_kt_export_from_a_saved_model_then_kt_translate_serves_it(exported, tmp_path):
    directory, data = tmp_path / "ct2", tmp_path / "data" / corpora.MULTI30K_DIR
    data.mkdir(parents=True)
    for side in ("en", "de"):  # the eval split that chooses the length penalty, cut to 30 lines
        lines = corpora.read_lines(corpora.resolve_data_dir() / corpora.MULTI30K_DIR / f"val.{side}.gz")[:30]
        with gzip.open(data / f"val.{side}.gz", "wt", encoding="utf-8") as f:
            f.write("".join(f"{line}\n" for line in lines))
    result = run_cli("export", f"--model={exported}", "--format=ctranslate2", "--quantization=int8",
                     f"--export_dir={directory}", f"--data_dir={data.parent}")
    assert f"to {directory} as a CTranslate2 model (int8)" in result.stdout
    info = json.loads((directory / INFO).read_text())
    assert info["saved_model"] == str(exported) and info["checkpoint"].endswith("ckpt-12")
    assert info["quantization"] == "int8"
    decode = info["decode"]  # CTranslate2's length penalty, chosen on the eval split
    assert decode["length_penalty"] in ctranslate2_translate.LENGTH_PENALTY_GRID
    assert sorted(map(float, decode["length_penalty_eval_scores"])) == list(ctranslate2_translate.LENGTH_PENALTY_GRID)
    assert "BLEU by length penalty" in result.stdout

    result = run_cli("translate", f"--model={directory}", "--batch_size=2", "--ctranslate2_search=gnmt",
                     stdin="".join(f"{x}\n" for x in LINES))
    expected, _ = translation_lines.translate_lines(inference.load(directory, ctranslate2_search="gnmt"), LINES,
                                                    batch_size=2)
    assert result.stdout.split("\n") == expected + [""]
    assert f"translated {len(LINES)} lines" in result.stderr and "gnmt search" in result.stderr
    assert "native search" in inference.load(directory).description  # what kt-translate runs without the flag

    given = tmp_path / "given"
    run_cli("export", f"--model={exported}", "--format=ctranslate2", "--length_penalty=0.7", f"--export_dir={given}")
    decode = json.loads((given / INFO).read_text())["decode"]
    assert decode["length_penalty"] == 0.7 and "length_penalty_eval_scores" not in decode
    assert inference.load(given).defaults == (4, 0.7, 50)


@pytest.mark.slow
def test_bad_options_exit_2_with_one_line(trained_workdir, converted, tmp_path, monkeypatch):
    out = str(tmp_path / "out")
    cases = {
        ("-m", "keras_transformer.cli.export", f"--model={trained_workdir}", f"--export_dir={out}",
         "--quantization=int8"): "error: --quantization: applies to --format=ctranslate2 only",
        ("-m", "keras_transformer.cli.export", f"--model={trained_workdir}", f"--export_dir={out}",
         "--format=onnx"): "error: flag --format=onnx: value should be one of <saved_model|ctranslate2>",
        ("-m", "keras_transformer.cli.export", f"--model={trained_workdir}", f"--export_dir={converted}",
         "--format=ctranslate2"): f"error: --export_dir: {converted} already exists; remove it or choose another",
        ("-m", "keras_transformer.cli.export", f"--model={trained_workdir}", f"--export_dir={out}",
         "--format=ctranslate2", "--ids_only"): "error: --ids_only: applies to --format=saved_model only",
        ("-m", "keras_transformer.cli.export", f"--model={trained_workdir}", f"--export_dir={out}",
         "--format=ctranslate2", "--parallel_searches=2"):
            "error: --parallel_searches: applies to --format=saved_model only",
        ("-m", "keras_transformer.cli.export", f"--model={trained_workdir}", f"--export_dir={out}",
         "--format=ctranslate2", "--precision=bfloat16"): "error: --precision: applies to --format=saved_model only",
        ("-m", "keras_transformer.cli.export", f"--model={trained_workdir}", f"--export_dir={out}",
         "--parallel_searches=0"): "error: flag --parallel_searches=0: 0 is not a positive integer",
        ("blocked", "keras_transformer.cli.export", f"--model={trained_workdir}", f"--export_dir={out}",
         "--format=ctranslate2"):
            'error: --format=ctranslate2: the ctranslate2 package is not installed; pip install -e ".[ctranslate2]"',
        ("-m", "keras_transformer.cli.translate", f"--model={converted}", "--checkpoint=averaged"):
            f"error: --checkpoint: {converted} is a CTranslate2 export; checkpoints apply to work directories",
        ("-m", "keras_transformer.cli.export", f"--model={trained_workdir}", f"--export_dir={out}",
         "--length_penalty=0.5"): "error: --length_penalty: applies to --format=ctranslate2 only",
        ("-m", "keras_transformer.cli.translate", f"--model={trained_workdir}", "--ctranslate2_search=gnmt"):
            f"error: --ctranslate2_search: {trained_workdir} is not a CTranslate2 directory",
    }
    for args, expected in cases.items():
        with monkeypatch.context() as patch:
            if args[0] == "blocked":  # as if the ctranslate2 package were not installed
                patch.setitem(sys.modules, "ctranslate2", None)
            result = run_cli(*args[1:], check=False)
        assert (result.returncode, result.stderr.strip().splitlines()) == (2, [expected]), args
    assert not os.path.exists(out)
