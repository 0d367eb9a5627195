"""Tokenizer: reserved ids, exact round trip on real lines, in-graph use, SavedModel, cache."""

import dataclasses
import gzip

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import recipes
from keras_transformer import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from keras_transformer.data import tokenizer as tokenizer_lib
from keras_transformer.data.tokenizer import Tokenizer


def _real_lines(multi30k_dir, newstest_dir):
    lines = []
    for split in ("val", "test_2016_flickr"):
        for lang in ("en", "de"):
            lines += gzip.open(multi30k_dir / f"{split}.{lang}.gz", "rt", encoding="utf-8").read().split("\n")[:-1]
    for name in ("newstest2013", "newstest2014"):
        for lang in ("en", "de"):
            lines += (newstest_dir / f"{name}.{lang}").read_text(encoding="utf-8").split("\n")[:-1]
    return lines


def test_reserved_ids_and_vocab_size(multi30k_tokenizer):
    pieces = multi30k_tokenizer.id_to_piece(tf.constant([PAD_ID, UNK_ID, BOS_ID, EOS_ID])).numpy().tolist()
    assert pieces == [b"<pad>", b"<unk>", b"<s>", b"</s>"]
    assert multi30k_tokenizer.vocab_size == 8000


def test_tokenize_gives_int32_ragged_without_bos_eos(multi30k_tokenizer):
    ids = multi30k_tokenizer.tokenize(tf.constant(["A dog runs.", "Zwei Männer."]))
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32 and ids.shape[0] == 2
    flat = ids.flat_values.numpy()
    assert np.all(flat > EOS_ID) and np.all(flat < 8000)


def test_round_trip_on_real_multi30k_and_newstest_lines(multi30k_tokenizer, multi30k_dir, newstest_dir):
    lines = _real_lines(multi30k_dir, newstest_dir)
    assert len(lines) == 2 * 1014 + 2 * 1000 + 2 * 3000 + 2 * 3003
    # The sample covers umlauts, ß, German and English quotes, and numbers.
    for needle in ("ä", "ö", "ü", "ß", "Ä", "„", "“", '"', "'", "€", "%"):
        assert any(needle in line for line in lines), needle
    assert sum(any(c.isdigit() for c in line) for line in lines) > 500
    text = multi30k_tokenizer.detokenize(multi30k_tokenizer.tokenize(tf.constant(lines))).numpy()
    mismatches = [(a, b.decode()) for a, b in zip(lines, text) if a != b.decode()]
    assert mismatches == []


def test_bpe_dropout_samples_other_segmentations_of_the_same_text(multi30k_tokenizer, multi30k_dir):
    tok = multi30k_tokenizer
    lines = [line for lang in ("en", "de")
             for line in gzip.open(multi30k_dir / f"val.{lang}.gz", "rt", encoding="utf-8").read().split("\n")[:-1]]
    plain = tok.tokenize(lines).to_list()
    assert tok.tokenize(lines, dropout=0.0).to_list() == plain  # p = 0: the one segmentation
    assert tok.tokenize(lines, dropout=tf.constant(0.0)).to_list() == plain  # also when sampling with p = 0
    pieces = sum(map(len, plain))
    for dropout, low, high in ((0.1, 1.3, 1.5), (0.3, 2.0, 2.4)):  # measured 1.41 and 2.17 times the pieces
        first, second = (tok.tokenize(lines, dropout) for _ in range(2))
        assert [t.decode() for t in tok.detokenize(first).numpy()] == lines  # the same text, exactly
        assert low < sum(first.row_lengths().numpy()) / pieces < high
        assert np.mean([a == b for a, b in zip(first.to_list(), plain)]) < 0.1  # most rows split otherwise
        assert first.to_list() != second.to_list()  # drawn anew at every call
    in_graph = tf.function(lambda s: tok.tokenize(s, 0.1))(tf.constant(lines))
    assert [t.decode() for t in tok.detokenize(in_graph).numpy()] == lines
    assert 1.3 < sum(in_graph.row_lengths().numpy()) / pieces < 1.5


def test_append_eos_ends_every_row_with_eos_eagerly_and_in_a_graph():
    ids = tf.ragged.constant([[7, 8, 9], [], [5]], dtype=tf.int32)  # [3, (n)]
    expected = [[7, 8, 9, EOS_ID], [EOS_ID], [5, EOS_ID]]
    assert tokenizer_lib.append_eos(ids).to_list() == expected
    in_graph = tf.function(lambda x: tokenizer_lib.append_eos(x).to_tensor(PAD_ID))(ids)
    np.testing.assert_array_equal(in_graph, [[7, 8, 9, EOS_ID], [EOS_ID, PAD_ID, PAD_ID, PAD_ID],
                                             [5, EOS_ID, PAD_ID, PAD_ID]])


def test_detokenize_stops_at_first_eos_and_ignores_pad_and_bos(multi30k_tokenizer):
    tok = multi30k_tokenizer
    a, b = tok.tokenize(tf.constant(["Ein Hund läuft.", "Straße 42"])).to_list()
    dense = tf.constant([
        [BOS_ID] + a + [EOS_ID] + b + [PAD_ID],  # everything after EOS is dropped
        b + [EOS_ID, PAD_ID] + [PAD_ID] * (len(a) + 1),
    ])
    assert tok.detokenize(dense).numpy().tolist() == ["Ein Hund läuft.".encode(), b"Stra\xc3\x9fe 42"]
    ragged = tf.ragged.constant([a + [EOS_ID] + a, [PAD_ID] + b])  # ragged input and PAD inside
    assert tok.detokenize(ragged).numpy().tolist() == ["Ein Hund läuft.".encode(), "Straße 42".encode()]


def test_in_graph_and_through_a_saved_model(multi30k_tokenizer, tmp_path):
    class Translator(tf.Module):  # what an export does: strings in, strings out
        def __init__(self, tok):
            super().__init__()
            self.tok = tok

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def round_trip(self, text):
            ids = self.tok.tokenize(text).to_tensor(PAD_ID)  # [B, L]
            return self.tok.detokenize(ids)

    lines = ["Zwei Männer spielen „Fußball“ um 3 Uhr.", "A dog's 2nd ball."]
    module = Translator(multi30k_tokenizer)
    assert [s.decode() for s in module.round_trip(tf.constant(lines)).numpy()] == lines
    tf.saved_model.save(module, str(tmp_path / "sm"))
    del module
    reloaded = tf.saved_model.load(str(tmp_path / "sm"))
    assert [s.decode() for s in reloaded.round_trip(tf.constant(lines)).numpy()] == lines


def test_get_or_train_caches_and_keys_by_vocab_and_corpus(multi30k_tokenizer, workdir, data_dir, monkeypatch):
    recipe = recipes.get("multi30k")
    # Direction does not matter: the vocabulary is shared by both sides.
    reversed_recipe = dataclasses.replace(recipe, data=dataclasses.replace(recipe.data, source_lang="de",
                                                                           target_lang="en"))
    assert tokenizer_lib.cache_key(reversed_recipe, data_dir) == tokenizer_lib.cache_key(recipe, data_dir)
    monkeypatch.setattr(Tokenizer, "train", classmethod(lambda *a, **k: pytest.fail("retrained")))
    again = tokenizer_lib.get_or_train(recipe, workdir, data_dir)
    assert again.model_path == multi30k_tokenizer.model_path
    assert again.model_proto == multi30k_tokenizer.model_proto
    assert multi30k_tokenizer.model_path.startswith(str(workdir / "tokenizer" / "multi30k_de-en_bpe8000_"))
    smaller = dataclasses.replace(recipe, model=dataclasses.replace(recipe.model, vocab_size=4000))
    assert tokenizer_lib.cache_key(smaller, data_dir) != tokenizer_lib.cache_key(recipe, data_dir)
    other_corpus = dataclasses.replace(recipe, data=dataclasses.replace(recipe.data, corpus="wmt14"))
    assert tokenizer_lib.cache_key(other_corpus, data_dir).startswith("wmt14_de-en_bpe8000_")


def test_train_from_files_and_a_too_large_vocabulary(tmp_path, write_lines):
    path = write_lines(tmp_path / "t.en", ["the cat sat on the mat", "the dog sat on the log"] * 20)
    # Byte fallback reserves 256 byte pieces, so the smallest vocabulary is a little over 256.
    tok = Tokenizer.train([path], vocab_size=300, model_prefix=tmp_path / "small")
    assert tok.vocab_size == 300 and (tmp_path / "small.model").is_file()
    assert tok.detokenize(tok.tokenize(tf.constant(["the cat sat"]))).numpy().tolist() == [b"the cat sat"]
    with pytest.raises(ValueError, match="vocab_size: cannot train a 5000-token"):
        Tokenizer.train([path], vocab_size=5000, model_prefix=tmp_path / "big")


def test_survives_reseeding(multi30k_tokenizer):
    # tf.random.set_seed clears TF's kernel caches, where tensorflow-text keeps an eagerly built model.
    tok = multi30k_tokenizer
    ds = tf.data.Dataset.from_tensor_slices(["Ein Hund."]).batch(1).map(lambda s: tok.tokenize(s).to_tensor())
    expected = tok.tokenize(["Ein Hund."]).to_list()
    tf.random.set_seed(7)
    assert tok.tokenize(["Ein Hund."]).to_list() == expected
    assert [b.tolist() for b in ds.as_numpy_iterator()] == [expected]
