"""--noshared_vocabulary: a BPE model per language, trained on its side of the text only, carried from kt-train
through a resumed run, kt-export (SavedModel and CTranslate2), the exported signatures and --init_from."""

import json
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from keras_transformer import BOS_ID, EOS_ID, PAD_ID
from keras_transformer.config import Recipe
from keras_transformer.data.tokenizer import TokenizerPair, append_eos
from keras_transformer.engines import SOURCE_EOS, sentencepiece_file
from keras_transformer.training import init_from
from keras_transformer.tasks.translation.module import Translator
from keras_transformer.serving import loading
from keras_transformer import artifacts
from tests.support import run_cli

TRAIN = ("--recipe=tiny", "--num_layers=1", "--source_lang=en", "--target_lang=de", "--noshared_vocabulary",
         "--vocab_size=400", "--max_length=48", "--tokens_per_batch=1024", "--bucket_boundaries=8,16,24,32,48",
         "--tokenizer_sample_lines=600", "--shuffle_buffer=64", "--train_steps=2", "--checkpoint_every=2", "--seed=3")
SOURCES = ["A dog runs through the grass.", "Two men play football."]
TARGETS = ["Ein Hund läuft durch das Gras.", "Zwei Männer spielen Fußball."]


@pytest.fixture(scope="module")
def run(corpus, tmp_path_factory):
    """A 2-step kt-train, its kt-export: (work directory, export directory)."""
    root = corpus
    workdir = tmp_path_factory.mktemp("separate") / "run"
    out = run_cli("train", *TRAIN, f"--train_prefix={root}/train", f"--eval_prefix={root}/dev",
                  f"--workdir={workdir}", timeout=300)
    assert f"trained tiny to step 2 in {workdir}" in out.stdout
    export_dir = workdir.parent / "export"
    run_cli("export", f"--model={workdir}", f"--export_dir={export_dir}", timeout=300)
    return workdir, export_dir


def _pieces(path):
    sp = spm.SentencePieceProcessor(model_file=str(path))
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i)
                                                                           or sp.is_byte(i))]


@pytest.mark.slow
def test_each_language_has_a_model_trained_on_its_own_side(run, corpus):
    workdir, _ = run
    text = {lang: (corpus / f"train.{lang}").read_text(encoding="utf-8").splitlines() for lang in ("en", "de")}
    models = {p.name.split("_")[1]: p for p in (workdir / "tokenizer").glob("*.model")}
    assert sorted(models) == ["de", "en"] and all(p.name.startswith("text_") for p in models.values())
    for lang, other in (("en", "de"), ("de", "en")):
        seen = " ".join(text[lang])
        pieces = [p.replace("\u2581", " ").strip() for p in _pieces(models[lang])]
        assert len(pieces) > 100 and all(p in seen for p in pieces if p), lang  # every piece is its side's text
        foreign = [p.replace("\u2581", " ").strip() for p in _pieces(models[other])]
        assert any(p and p not in seen for p in foreign), other  # and the other side's model is not
    recipe = Recipe.from_dict(json.loads((workdir / "recipe.json").read_text()))
    assert recipe.model.shared_vocabulary is False and recipe.model.vocab_size == 400


@pytest.mark.slow
def test_the_export_carries_both_models_and_translates(run, corpus):
    workdir, export_dir = run
    tok = artifacts.find_tokenizer(workdir, Recipe.from_dict(json.loads((workdir / "recipe.json").read_text())))
    assert isinstance(tok, TokenizerPair) and tok.source.model_proto != tok.target.model_proto
    roles = json.loads((export_dir / "assets" / loading.EXPORT_INFO).read_text())["tokenizers"]
    assert sorted(roles) == ["source", "target"]
    model, recipe, loaded = loading.load_exported(export_dir)
    assert (loaded.source.model_proto, loaded.target.model_proto) == (tok.source.model_proto, tok.target.model_proto)
    trained, _, _ = artifacts.load_model(workdir)
    for ours, theirs in zip(model.weights, trained.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert "transformer/source_embedding/embeddings" in [w.path for w in model.weights]
    # Sources go in through the English model, translations come out through the German one, in the export too.
    texts = tf.constant(SOURCES)
    translator = Translator(model, loaded, recipe)
    ids = translator.source_ids(texts).numpy()
    assert ids.tolist() == append_eos(loaded.source.tokenize(texts)).to_tensor(PAD_ID).numpy().tolist()
    assert ids.tolist() != append_eos(loaded.target.tokenize(texts)).to_tensor(PAD_ID).numpy().tolist()
    sequences = translator.translate_ids(ids)["sequences"]  # [B, K, T]
    saved_model = loading.load_saved_model(export_dir)  # held: its functions read its variables
    served = saved_model.serving_default(texts)["translations"]
    assert served.numpy().tolist() == loaded.target.detokenize(sequences[:, 0, :]).numpy().tolist()


@pytest.mark.slow
def test_the_ctranslate2_export_reads_english_and_scores_german_as_ours(run, tmp_path):
    pytest.importorskip("ctranslate2")
    from keras_transformer.engines import ctranslate2_convert, ctranslate2_translate

    model, recipe, tok = artifacts.load_model(run[0])
    directory = Path(ctranslate2_convert.convert(model, tok, recipe, tmp_path / "ct2"))
    for side in ("source", "target"):
        assert (directory / sentencepiece_file(side)).read_bytes() == tok.models[side].model_proto
    pieces = {side: [p.decode() for p in t.id_to_piece(tf.range(t.vocab_size)).numpy()]
              for side, t in tok.models.items()}
    assert json.loads((directory / "target_vocabulary.json").read_text()) == pieces["target"]
    source_vocabulary = json.loads((directory / "source_vocabulary.json").read_text())
    assert source_vocabulary == pieces["source"][:EOS_ID] + [SOURCE_EOS] + pieces["source"][EOS_ID + 1:]
    translator = ctranslate2_translate.load(directory, intra_threads=1)
    sources = translator.encode(SOURCES)  # the English model's pieces, then EOS
    assert sources == [[pieces["source"][i] for i in row] + [SOURCE_EOS]
                       for row in tok.source.tokenize(SOURCES).to_list()]
    targets = [[pieces["target"][i] for i in row] for row in tok.target.tokenize(TARGETS).to_list()]
    results = translator._translator.score_batch(sources, targets)  # CTranslate2 appends EOS
    for source, target, result in zip(SOURCES, TARGETS, results):  # log P of each target token, EOS included
        source_ids = append_eos(tok.source.tokenize([source])).to_tensor()
        target_ids = tok.target.tokenize([target])[0].numpy().tolist()
        logits = model((source_ids, tf.constant([[BOS_ID] + target_ids])), training=False)
        ours = tf.nn.log_softmax(logits[0]).numpy()[np.arange(len(target_ids) + 1), target_ids + [EOS_ID]]
        np.testing.assert_allclose(result.log_probs, ours, atol=1e-4, rtol=0)


@pytest.mark.slow
def test_resume_and_init_from_find_both_models(run, tmp_path):
    workdir, export_dir = run
    recipe = Recipe.from_dict(json.loads((workdir / "recipe.json").read_text()))
    assert init_from.prepare_workdir(recipe, workdir) is False  # resumes: both models are where it looks
    for source in (workdir, export_dir):
        fine_tune = Recipe.from_dict(dict(recipe.to_dict(), train=dict(recipe.to_dict()["train"],
                                                                       init_from=str(source))))
        new = tmp_path / source.name
        assert init_from.prepare_workdir(fine_tune, new) is True
        copied = {p.name: p.read_bytes() for p in (new / "tokenizer").glob("*.model")}
        assert copied == {p.name: p.read_bytes() for p in (workdir / "tokenizer").glob("*.model")}
