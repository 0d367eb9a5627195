"""Corpora: local parallel text, Multi30k, newstest and TFDS WMT14 (under mock_data)."""

import gzip
import hashlib
import io
import logging
import urllib.error
import urllib.request

import pytest
import tensorflow_datasets as tfds

from keras_transformer.config import DataConfig
from keras_transformer.data import corpora


def _pairs(ds):
    return [(x.decode(), y.decode()) for x, y in ds.as_numpy_iterator()]


@pytest.mark.parametrize("gz", [False, True])
def test_read_parallel_files_plain_and_gz(tmp_path, write_lines, gz):
    ext = ".gz" if gz else ""
    src = write_lines(tmp_path / f"a.en{ext}", ["Hello.", "Two\u2028lines?", "Straße 5\r"], gz=gz)
    tgt = write_lines(tmp_path / f"a.de{ext}", ["Hallo.", "Zwei Zeilen?", "Straße 5"], gz=gz)
    sources, targets, stats = corpora.read_parallel_files(src, tgt)
    # U+2028 is not a line break in a one-sentence-per-line file; a CR before LF is dropped.
    assert sources == ["Hello.", "Two\u2028lines?", "Straße 5"]
    assert targets == ["Hallo.", "Zwei Zeilen?", "Straße 5"]
    assert (stats.pairs_read, stats.empty_skipped, stats.pairs) == (3, 0, 3)
    assert stats.source_file == str(src) and stats.target_file == str(tgt)


def test_line_count_mismatch_names_both_files_and_counts(tmp_path, write_lines):
    src = write_lines(tmp_path / "train.en", ["a", "b", "c"])
    tgt = write_lines(tmp_path / "train.de.gz", ["a", "b"], gz=True)
    with pytest.raises(ValueError, match=r"train\.en has 3 lines, .*train\.de\.gz has 2"):
        corpora.read_parallel_files(src, tgt)


def test_empty_and_whitespace_lines_are_skipped_counted_and_logged(tmp_path, write_lines, caplog):
    src = write_lines(tmp_path / "x.en", ["one", "", "three", "four", "five", " "])
    tgt = write_lines(tmp_path / "x.de", ["eins", "zwei", "drei", " \t ", "fünf", "sechs"])
    with caplog.at_level(logging.WARNING):
        sources, targets, stats = corpora.read_parallel_files(src, tgt)
    assert sources == ["one", "three", "five"]
    assert targets == ["eins", "drei", "fünf"]
    assert (stats.pairs_read, stats.empty_skipped, stats.pairs) == (6, 3, 3)
    assert "skipped 3 pairs" in caplog.text and "lines 2, 4, 6" in caplog.text


def test_invalid_utf8_names_file_and_line(tmp_path, write_lines):
    src = write_lines(tmp_path / "bad.en", b"fine\nalso fine\nbroken \xff\xfe here\n")
    tgt = write_lines(tmp_path / "bad.de", ["gut", "auch gut", "kaputt"])
    with pytest.raises(ValueError, match=r"bad\.en: invalid UTF-8 on line 3"):
        corpora.read_parallel_files(src, tgt)


def test_missing_file_names_path(tmp_path, write_lines):
    src = write_lines(tmp_path / "x.en", ["a"])
    with pytest.raises(FileNotFoundError, match=r"nope\.de"):
        corpora.read_parallel_files(src, tmp_path / "nope.de")


def test_resolve_data_dir_precedence(monkeypatch, tmp_path):
    (tmp_path / "env").mkdir()
    (tmp_path / "flag").mkdir()
    monkeypatch.setenv("KT_DATA_DIR", str(tmp_path / "env"))
    assert corpora.resolve_data_dir(str(tmp_path / "flag")) == tmp_path / "flag"
    assert corpora.resolve_data_dir() == tmp_path / "env"
    monkeypatch.delenv("KT_DATA_DIR")
    assert corpora.resolve_data_dir().parts[-2:] == ("shared", "data")


def test_a_mistyped_data_dir_is_an_error_not_a_download(monkeypatch, tmp_path):
    with pytest.raises(FileNotFoundError, match="--data_dir"):
        corpora.resolve_data_dir(str(tmp_path / "typo"))
    monkeypatch.setenv("KT_DATA_DIR", str(tmp_path / "typo"))
    with pytest.raises(FileNotFoundError, match="KT_DATA_DIR"):
        corpora.resolve_data_dir()


def test_text_corpus_prefixes_and_newstest(tmp_path, write_lines):
    write_lines(tmp_path / "corp" / "train.en", ["a b", "c d"])
    write_lines(tmp_path / "corp" / "train.de.gz", ["A B", "C D"], gz=True)
    write_lines(tmp_path / "data" / corpora.NEWSTEST_DIR / "newstest2013.en", ["news"])
    write_lines(tmp_path / "data" / corpora.NEWSTEST_DIR / "newstest2013.de", ["Nachricht"])
    cfg = DataConfig(corpus="text", train_prefix=str(tmp_path / "corp" / "train"), source_lang="de", target_lang="en")
    ds, stats = corpora.load_split(cfg, "train", data_dir=tmp_path / "data")
    assert _pairs(ds) == [("A B", "a b"), ("C D", "c d")]
    assert stats.pairs == 2
    ds, _ = corpora.load_split(cfg, "newstest2013", data_dir=tmp_path / "data")
    assert _pairs(ds) == [("Nachricht", "news")]
    with pytest.raises(ValueError, match="eval_prefix"):
        corpora.load_split(cfg, "val", data_dir=tmp_path / "data")
    with pytest.raises(FileNotFoundError, match=r"newstest2014\.de.*--data_dir"):
        corpora.load_split(cfg, "newstest2014", data_dir=tmp_path / "data")


def test_relative_text_prefix_is_found_in_data_dir(tmp_path, write_lines):
    write_lines(tmp_path / "train.en", ["x"])
    write_lines(tmp_path / "train.de", ["y"])
    cfg = DataConfig(corpus="text", train_prefix="train")
    ds, _ = corpora.load_split(cfg, "train", data_dir=tmp_path)
    assert _pairs(ds) == [("x", "y")]


def test_multi30k_both_directions(multi30k_dir, data_dir):
    en_de, stats = corpora.load_split(DataConfig(corpus="multi30k"), "val", data_dir)
    de_en, _ = corpora.load_split(DataConfig(corpus="multi30k", source_lang="de", target_lang="en"), "val", data_dir)
    en_de, de_en = _pairs(en_de), _pairs(de_en)
    assert (stats.pairs_read, stats.empty_skipped) == (1014, 0)
    assert len(en_de) == 1014 and de_en == [(y, x) for x, y in en_de]
    assert stats.source_file.endswith("val.en.gz") and stats.target_file.endswith("val.de.gz")
    test, _ = corpora.load_split(DataConfig(corpus="multi30k"), "test_2016_flickr", data_dir)
    assert len(_pairs(test)) == 1000


def test_newstest_splits(newstest_dir, data_dir):
    cfg = DataConfig(corpus="multi30k")
    for split, count in (("newstest2013", 3000), ("newstest2014", 3003)):
        ds, stats = corpora.load_split(cfg, split, data_dir)
        assert (stats.pairs_read, stats.empty_skipped) == (count, 0)
        assert sum(1 for _ in ds) == count


_SERVED = {"en": gzip.compress(b"A dog.\nA cat.\n", mtime=0), "de": gzip.compress(b"Ein Hund.\nEine Katze.\n", mtime=0)}


def test_multi30k_downloads_missing_files(tmp_path, monkeypatch):
    fetched = []

    def fake_urlopen(url, timeout):
        fetched.append(url)
        return io.BytesIO(_SERVED[url.rsplit(".", 2)[-2]])

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    monkeypatch.setitem(corpora.MULTI30K_SHA256, "val.en.gz", hashlib.sha256(_SERVED["en"]).hexdigest())
    monkeypatch.setitem(corpora.MULTI30K_SHA256, "val.de.gz", hashlib.sha256(_SERVED["de"]).hexdigest())
    ds, stats = corpora.load_split(DataConfig(corpus="multi30k"), "val", data_dir=tmp_path)
    assert fetched == [
        "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/val.en.gz",
        "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/val.de.gz",
    ]
    assert _pairs(ds) == [("A dog.", "Ein Hund."), ("A cat.", "Eine Katze.")]
    assert (tmp_path / corpora.MULTI30K_DIR / "val.de.gz").is_file()


def test_a_multi30k_download_that_fails_its_checksum_is_refused_and_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: io.BytesIO(_SERVED["en"]))  # not train's
    with pytest.raises(FileNotFoundError, match=r"train\.en\.gz is missing and .* gave \d+ bytes of sha256 "
                                                r"[0-9a-f]{12}\.\.\., not the dataset's d79cfa999dd4\.\.\.; nothing"):
        corpora.load_split(DataConfig(corpus="multi30k"), "train", data_dir=tmp_path)
    assert not (tmp_path / corpora.MULTI30K_DIR).exists()


def test_multi30k_failed_download_is_a_clear_error(tmp_path, monkeypatch):
    def offline(url, timeout):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(FileNotFoundError, match=r"train\.en\.gz is missing and downloading .* failed.*--data_dir"):
        corpora.load_split(DataConfig(corpus="multi30k"), "train", data_dir=tmp_path)
    assert not (tmp_path / corpora.MULTI30K_DIR).exists()


def test_fingerprint_follows_file_content(tmp_path, write_lines):
    write_lines(tmp_path / "t.en", ["a"])
    write_lines(tmp_path / "t.de", ["b"])
    cfg = DataConfig(corpus="text", train_prefix=str(tmp_path / "t"))
    before = corpora.fingerprint(cfg, "train", tmp_path)
    assert corpora.fingerprint(cfg, "train", tmp_path) == before
    write_lines(tmp_path / "t.de", ["bb"])
    assert corpora.fingerprint(cfg, "train", tmp_path) != before


@pytest.mark.parametrize("corpus, name", [("wmt14", "wmt14_translate/de-en"), ("wmt_t2t", "wmt_t2t_translate/de-en")])
@pytest.mark.parametrize("source_lang, target_lang", [("en", "de"), ("de", "en")])
def test_tfds_wmt_under_mock_data(corpus, name, source_lang, target_lang):
    # mock_data works offline for both builders: TFDS ships no metadata for them, so the
    # features come from the builder code (MockPolicy.USE_CODE, what AUTO falls back to).
    cfg = DataConfig(corpus=corpus, source_lang=source_lang, target_lang=target_lang)
    with tfds.testing.mock_data(num_examples=12, policy=tfds.testing.MockPolicy.USE_CODE):
        raw = [(ex[source_lang].decode(), ex[target_lang].decode())
               for ex in tfds.load(name, split="validation").as_numpy_iterator()]
        ds, stats = corpora.load_split(cfg, "validation")
        pairs = _pairs(ds)
    expected = [(x, y) for x, y in raw if x.strip() and y.strip()]
    assert len(raw) == 12 and pairs == expected and len(pairs) > 0
    assert stats.pairs_read is None and stats.source_file == f"tfds:{name}:validation:{source_lang}"


def test_unknown_language_is_refused():
    with pytest.raises(ValueError, match="source_lang"):
        corpora.load_split(DataConfig(corpus="wmt14", source_lang="fr"), "train")


def test_fingerprint_of_a_corpus_is_its_paths_and_sizes_not_its_mtime(tmp_path, write_lines):
    """The tokenizer cache key survives a touched or copied corpus, and equals the key of earlier releases."""
    import hashlib
    import os

    write_lines(tmp_path / "t.en", ["a"])
    write_lines(tmp_path / "t.de", ["b"])
    cfg = DataConfig(corpus="text", train_prefix=str(tmp_path / "t"))
    before = corpora.fingerprint(cfg, "train", tmp_path)
    os.utime(tmp_path / "t.en", (1, 1))
    assert corpora.fingerprint(cfg, "train", tmp_path) == before
    files = sorted([tmp_path / "t.en", tmp_path / "t.de"])
    text = "|".join(f"{p.resolve()}:{p.stat().st_size}" for p in files)
    assert before == hashlib.sha256(text.encode()).hexdigest()[:10]
