"""Streaming local corpora: shards, the cached check, the tokenizer sample, and equality with the old reading."""

import collections
import dataclasses
import gzip
import logging
import os
from pathlib import Path

import pytest

from keras_transformer import recipes
from keras_transformer.config import DataConfig
from keras_transformer.data import corpora, tokenizer, validation
from keras_transformer.data.tokenizer import Tokenizer


def _pairs(ds):
    return [(x.decode(), y.decode()) for x, y in ds.as_numpy_iterator()]


def _old_read_lines(path: Path):
    """The reading local corpora had before streaming: the whole file, split on '\\n', one final '\\r' dropped."""
    data = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
    lines = data.decode("utf-8").split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _old_pairs(source: Path, target: Path):
    return [(x, y) for x, y in zip(_old_read_lines(source), _old_read_lines(target)) if x.strip() and y.strip()]


def _shards(tmp_path, write_lines, counts=(3, 2, 4), gz=(False, True, False)):
    """Shards train-<k>.en/.de with pairs "e<k>.<i>" / "d<k>.<i>"; the German side of shard 1 plain, English gz."""
    for k, (n, z) in enumerate(zip(counts, gz)):
        write_lines(tmp_path / f"train-{k}.en{'.gz' if z else ''}", [f"e{k}.{i}" for i in range(n)], gz=z)
        write_lines(tmp_path / f"train-{k}.de", [f"d{k}.{i}" for i in range(n)])
    return [(f"e{k}.{i}", f"d{k}.{i}") for k, n in enumerate(counts) for i in range(n)]


def test_glob_prefix_reads_every_shard_gzip_and_plain(tmp_path, write_lines):
    expected = _shards(tmp_path, write_lines)
    cfg = DataConfig(corpus="text", train_prefix=str(tmp_path / "train-*"), eval_prefix=str(tmp_path / "train-*"),
                     eval_split="dev")
    shards = corpora.split_shards(cfg, "train", tmp_path)
    assert [(s.name, t.name) for s, t in shards] == [
        ("train-0.en", "train-0.de"), ("train-1.en.gz", "train-1.de"), ("train-2.en", "train-2.de")]
    train, stats = corpora.load_split(cfg, "train", tmp_path)
    assert (stats.pairs_read, stats.empty_skipped) == (9, 0)
    assert stats.source_file == f"{tmp_path / 'train-0.en'} (+2 more shards)"
    got = _pairs(train)
    assert sorted(got) == sorted(expected) and got != expected  # every pair once, shards interleaved
    assert _pairs(corpora.load_split(cfg, "train", tmp_path)[0]) == got  # the seeded order is deterministic
    other_seed = _pairs(corpora.load_split(dataclasses.replace(cfg, seed=4), "train", tmp_path)[0])
    assert sorted(other_seed) == sorted(expected) and other_seed != got
    dev, _ = corpora.load_split(cfg, "dev", tmp_path)
    assert _pairs(dev) == expected  # other splits read the shards in name order
    with pytest.raises(ValueError, match="sharded into 3 file pairs"):
        corpora.split_files(cfg, "train", tmp_path)


def test_a_shard_with_one_side_is_an_error_naming_it(tmp_path, write_lines):
    _shards(tmp_path, write_lines)
    write_lines(tmp_path / "train-3.en", ["lonely"])
    cfg = DataConfig(corpus="text", train_prefix=str(tmp_path / "train-*"))
    with pytest.raises(FileNotFoundError, match=r"train_prefix=.*shard .*train-3\.en has no aligned .*train-3\.de"):
        corpora.load_split(cfg, "train", tmp_path)
    with pytest.raises(FileNotFoundError, match=r"test_prefix='nothing-\*' matches no files"):
        corpora.load_split(DataConfig(corpus="text", test_prefix="nothing-*"), "test_2016_flickr", tmp_path)


def test_test_prefix_names_the_test_split(tmp_path, write_lines):
    write_lines(tmp_path / "held.en", ["a"])
    write_lines(tmp_path / "held.de", ["b"])
    cfg = DataConfig(corpus="text", test_prefix="held", test_split="held_out")
    assert _pairs(corpora.load_split(cfg, "held_out", tmp_path)[0]) == [("a", "b")]


def test_streaming_check_names_files_and_counts_on_a_mismatch(tmp_path, write_lines):
    src = write_lines(tmp_path / "train.en", ["a", "b", "c"])
    tgt = write_lines(tmp_path / "train.de.gz", ["a", "b"], gz=True)
    with pytest.raises(ValueError, match=r"line counts differ: .*train\.en has 3 lines, .*train\.de\.gz has 2"):
        validation.check([(src, tgt)])
    cfg = DataConfig(corpus="text", train_prefix=str(tmp_path / "train"))
    with pytest.raises(ValueError, match=r"train\.en has 3 lines, .*train\.de\.gz has 2"):
        corpora.load_split(cfg, "train", tmp_path)
    write_lines(tmp_path / "train.de.gz", ["a", "b", "c", "d", "e"], gz=True)  # now the target is longer
    with pytest.raises(ValueError, match=r"train\.en has 3 lines, .*train\.de\.gz has 5"):
        validation.check([(src, tgt)])


def test_streaming_check_names_file_and_line_of_invalid_utf8(tmp_path, write_lines):
    src = write_lines(tmp_path / "bad.en", ["fine", "also fine", "still fine"])
    tgt = write_lines(tmp_path / "bad.de.gz", b"gut\nauch gut\nkaputt \xc3\x28 hier\n", gz=True)
    with pytest.raises(ValueError, match=r"bad\.de\.gz: invalid UTF-8 on line 3 \(byte 7 of the line\)"):
        validation.check([(src, tgt)])


def test_empty_pairs_are_counted_logged_and_skipped_in_graph(tmp_path, write_lines, caplog):
    write_lines(tmp_path / "x.en", ["one", "", "three", "four", "five", " ", "seven\r"])
    write_lines(tmp_path / "x.de", ["eins", "zwei", "drei", " \t ", "fünf", "sechs", "sieben"])
    cfg = DataConfig(corpus="text", train_prefix=str(tmp_path / "x"))
    with caplog.at_level(logging.WARNING):
        ds, stats = corpora.load_split(cfg, "train", tmp_path)
    assert (stats.pairs_read, stats.empty_skipped, stats.pairs) == (7, 3, 4)
    assert "skipped 3 pairs" in caplog.text and "lines 2, 4, 6" in caplog.text
    assert sorted(_pairs(ds)) == sorted([("one", "eins"), ("three", "drei"), ("five", "fünf"), ("seven", "sieben")])


def test_textlinedataset_reads_as_the_old_reading_did(tmp_path, write_lines):
    # CRLF endings, a missing final newline, U+2028 inside a line, an empty last line before EOF.
    src = write_lines(tmp_path / "c.en", b"Hello.\r\nTwo\xe2\x80\xa8lines?\nno final newline")
    tgt = write_lines(tmp_path / "c.de.gz", b"Hallo.\r\nZwei Zeilen?\r\nkein Zeilenende\n", gz=True)
    cfg = DataConfig(corpus="text", eval_prefix=str(tmp_path / "c"))
    ds, stats = corpora.load_split(cfg, "val", tmp_path)
    assert _pairs(ds) == _old_pairs(src, tgt) == [
        ("Hello.", "Hallo."), ("Two\u2028lines?", "Zwei Zeilen?"), ("no final newline", "kein Zeilenende")]
    # A '\r' inside a line: TextLineDataset removes it (the old reading kept it); the check counts such lines.
    write_lines(tmp_path / "r.en", b"a\rb\nc\n")
    write_lines(tmp_path / "r.de", b"x\ny\r\r\n")
    assert validation.check([(tmp_path / "r.en", tmp_path / "r.de")]).carriage_returns == 2
    assert stats.pairs_read == 3


@pytest.mark.parametrize("split", ["val", "test_2016_flickr", "train"])
def test_multi30k_streams_the_same_pairs_as_the_old_reading(multi30k_dir, data_dir, split):
    ds, stats = corpora.load_split(DataConfig(corpus="multi30k"), split, data_dir)
    old = _old_pairs(multi30k_dir / f"{split}.en.gz", multi30k_dir / f"{split}.de.gz")
    assert _pairs(ds) == old and stats.pairs == len(old) == {"val": 1014, "test_2016_flickr": 1000,
                                                             "train": 29000}[split]


def test_newstest_streams_the_same_pairs_as_the_old_reading(newstest_dir, data_dir):
    for split, count in (("newstest2013", 3000), ("newstest2014", 3003)):
        ds, stats = corpora.load_split(DataConfig(corpus="multi30k", source_lang="de", target_lang="en"), split,
                                       data_dir)
        old = _old_pairs(newstest_dir / f"{split}.de", newstest_dir / f"{split}.en")
        assert _pairs(ds) == old and len(old) == stats.pairs == count


def test_the_check_is_cached_by_fingerprint(tmp_path, write_lines, monkeypatch):
    src = write_lines(tmp_path / "t.en", ["a", "", "c"])
    tgt = write_lines(tmp_path / "t.de", ["x", "y", "z"])
    passes = []
    scan = validation._scan
    monkeypatch.setattr(validation, "_scan", lambda *a: passes.append(1) or scan(*a))
    first = validation.check([(src, tgt)], cache_dir=tmp_path / "cache", sample_sentences=4, seed=1)
    assert (first.pairs_read, first.empty_skipped, first.empty_lines, first.sample_pairs) == (3, 1, ("2",), 2)
    assert Path(first.sample_path).read_text() == "a\nx\nc\nz\n"
    validation._memo.clear()  # a new process: only the files under cache_dir remain
    again = validation.check([(src, tgt)], cache_dir=tmp_path / "cache", sample_sentences=4, seed=1)
    assert again == first and len(passes) == 1
    assert validation.check([(src, tgt)]) == dataclasses.replace(first, sample_pairs=0, sample_path=None)
    assert len(passes) == 1  # without cache_dir: the process's memo
    os.utime(tgt, ns=(1, 1))  # same size, other mtime: another fingerprint, another pass
    assert validation.check([(src, tgt)], cache_dir=tmp_path / "cache").fingerprint != first.fingerprint
    assert len(passes) == 2


def test_the_reservoir_sample_is_bounded_seeded_and_aligned(tmp_path, write_lines):
    n = 1000
    src = write_lines(tmp_path / "s.en", [f"en {i}" for i in range(n)])
    tgt = write_lines(tmp_path / "s.de.gz", [f"de {i}" for i in range(n)], gz=True)

    def sample(seed, sentences=101, cache="c"):
        result = validation.check([(src, tgt)], cache_dir=tmp_path / cache, sample_sentences=sentences, seed=seed)
        lines = Path(result.sample_path).read_text().splitlines()
        return result.sample_pairs, list(zip(lines[0::2], lines[1::2]))

    count, pairs = sample(seed=1)
    assert count == len(pairs) == 51  # ceil(101 sentences / 2 per pair)
    assert all(x.split()[1] == y.split()[1] for x, y in pairs) and len(set(pairs)) == 51  # aligned, no repeats
    assert sample(seed=1, cache="other") == (count, pairs)  # same seed, same sample
    assert sample(seed=2)[1] != pairs
    assert sample(seed=1, sentences=4000)[1] == [(f"en {i}", f"de {i}") for i in range(n)]  # all, in file order


def test_the_check_holds_memory_for_its_sample_not_for_the_corpus(tmp_path, write_lines):
    # The first run on a new corpus: a corpus 8x larger, the same sample, the same Python memory at the peak
    # (bench/bench_corpus_scale.py's first_run stage measures the whole process, SentencePiece included).
    import tracemalloc

    peaks = []
    for n in (5_000, 40_000):
        lines = [f"sentence number {i} of the corpus, long enough to weigh something" for i in range(n)]
        src, tgt = write_lines(tmp_path / f"{n}.en", lines), write_lines(tmp_path / f"{n}.de.gz", lines, gz=True)
        tracemalloc.start()
        validation.check([(src, tgt)], cache_dir=tmp_path / f"cache{n}", sample_sentences=200, seed=1)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < 1.2 * peaks[0], peaks


def test_the_reservoir_is_uniform(tmp_path, write_lines):
    # Algorithm L keeps each of n items with probability k / n: 10 of 100, over 2000 seeds -> 200 each.
    src = write_lines(tmp_path / "u.en", [str(i) for i in range(100)])
    tgt = write_lines(tmp_path / "u.de", [str(i) for i in range(100)])
    counts = collections.Counter()
    for seed in range(2000):
        *_, xs, _ = validation._scan([(src, tgt)], 10, seed)
        assert len(xs) == 10
        counts.update(int(x) for x in xs)
    assert len(counts) == 100 and 140 < min(counts.values()) and max(counts.values()) < 260  # ± 4 sigma


def test_multi30k_tokenizer_trains_on_every_training_sentence_without_rereading(multi30k_dir, data_dir, tmp_path,
                                                                                monkeypatch):
    recipe = recipes.get("multi30k")  # tokenizer_sample_lines 60,000 >= 2 × 29,000 sentences
    tok = tokenizer.get_or_train(recipe, tmp_path, data_dir)
    (sample,) = (tmp_path / "corpus").glob("*.sample*.txt")
    lines = sample.read_text(encoding="utf-8").split("\n")[:-1]
    expected = [s for pair in _old_pairs(multi30k_dir / "train.en.gz", multi30k_dir / "train.de.gz") for s in pair]
    assert lines == expected and len(lines) == 58000
    # The model is the one the old reading trained (all pairs, source then target, in file order).
    old = Tokenizer.train(iter(expected), 8000, tmp_path / "old", sample_lines=60000, seed=recipe.data.seed)
    assert old.model_proto == tok.model_proto
    # A second start with the model gone retrains from the cached sample: the corpus is not read again.
    Path(tok.model_path).unlink()
    validation._memo.clear()
    monkeypatch.setattr(validation, "_scan", lambda *a: pytest.fail("the corpus was read again"))
    assert tokenizer.get_or_train(recipe, tmp_path, data_dir).model_proto == tok.model_proto
    _, stats = corpora.load_split(recipe.data, "train", data_dir, workdir=tmp_path)
    assert (stats.pairs_read, stats.empty_skipped) == (29000, 0)
