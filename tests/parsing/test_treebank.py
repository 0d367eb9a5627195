"""The treebank as a corpus: files from a zip or a directory, splits, pairs, and the tokenizer's atomic labels."""

import dataclasses
import hashlib
import io
import urllib.error
import urllib.request
import zipfile

import pytest

from keras_transformer import recipes
from keras_transformer.config import DataConfig, Recipe
from keras_transformer.data import tokenizer
from keras_transformer.tasks.parsing import treebank
from keras_transformer.tasks.parsing import trees

PTB = DataConfig(corpus="ptb", source_lang="en", target_lang="tree")
TREE = "( (S (NP-SBJ (DT The) (NN {word}) ) (VP (VBZ sleeps) ) (. .) ))\n"


def test_sample_splits_by_file(sample_splits):
    counts = {name: (len(split.files), split.trees_read, len(split.trees)) for name, split in sample_splits.items()}
    assert counts == {"train": (179, 3669, 3669), "dev": (10, 127, 127), "test": (10, 118, 118)}  # 3,914 in all
    assert sample_splits["train"].files[0] == "wsj_0001.mrg" and sample_splits["train"].files[-1] == "wsj_0179.mrg"
    assert sample_splits["dev"].files == tuple(f"wsj_{n:04d}.mrg" for n in range(180, 190))
    assert sample_splits["test"].files == tuple(f"wsj_{n:04d}.mrg" for n in range(190, 200))
    assert sample_splits["train"].sources[0].startswith("Pierre Vinken , 61 years old")


def _treebank_dir(root, sections):
    for section in sections:
        for n in range(2):
            path = root / "wsj" / f"{section:02d}" / f"wsj_{section:02d}{n:02d}.mrg"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(TREE.format(word=f"cat{section}x{n}"))
    return root


def test_standard_sections_when_present(tmp_path):
    root = _treebank_dir(tmp_path / "treebank", range(0, 25))
    cfg = dataclasses.replace(PTB, treebank=str(root))
    sections = {split: sorted({int(name[4:6]) for name in treebank.load(cfg, split, tmp_path).files})
                for split in ("train", "dev", "test")}
    assert sections == {"train": list(range(2, 22)), "dev": [22], "test": [23]}  # §6.3's WSJ split
    assert treebank.load(cfg, "sections:00-01,24", tmp_path).files == (
        "wsj_0000.mrg", "wsj_0001.mrg", "wsj_0100.mrg", "wsj_0101.mrg", "wsj_2400.mrg", "wsj_2401.mrg")
    assert treebank.load(cfg, "files:2301-2301", tmp_path).sources == ("The cat23x1 sleeps .",)


def test_a_zip_and_a_directory_read_alike(tmp_path):
    root = _treebank_dir(tmp_path / "tb", (0, 1))
    with zipfile.ZipFile(tmp_path / "tb.zip", "w") as archive:
        for path in sorted(root.rglob("*.mrg")):
            archive.write(path, f"treebank/combined/{path.name}")
    from_dir = treebank.load(dataclasses.replace(PTB, treebank=str(root)), "files:0001-0100", tmp_path)
    from_zip = treebank.load(dataclasses.replace(PTB, treebank="tb.zip"), "files:0001-0100", tmp_path)  # in data_dir
    assert from_dir.trees == from_zip.trees and len(from_zip.trees) == 2
    assert from_zip.targets[0] == "(S (NP XX XX ) (VP XX ) XX )"


@pytest.mark.parametrize("split, message", [
    ("valid", "split: unknown treebank split 'valid'"),
    ("sections:-3", "split: bad range '-3'"),
    ("sections:40", "split: treebank split 'sections:40' holds no files"),
])
def test_bad_splits_are_named(tmp_path, split, message):
    cfg = dataclasses.replace(PTB, treebank=str(_treebank_dir(tmp_path / "tb", (0,))))
    with pytest.raises(ValueError, match=message):
        treebank.load(cfg, split, tmp_path)


def test_the_default_sample_is_fetched_from_nltk_when_missing_checked_by_sha256(tmp_path, monkeypatch):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("treebank/combined/wsj_0190.mrg", TREE.format(word="dog"))
    served, fetched = buffer.getvalue(), []
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: fetched.append(url) or io.BytesIO(served))
    with pytest.raises(FileNotFoundError, match=r"treebank\.zip is missing and .* gave [\d,]+ bytes of sha256 .*, not the "
                                                r"dataset's 9da92d76c366\.\.\.; nothing was written"):
        treebank.load(PTB, "test", tmp_path)
    assert fetched == [treebank.SAMPLE_URL] and not (tmp_path / treebank.SAMPLE).exists()
    monkeypatch.setattr(treebank, "SAMPLE_SHA256", hashlib.sha256(served).hexdigest())
    assert [trees.words(t) for t in treebank.load(PTB, "test", tmp_path).trees] == [["The", "dog", "sleeps", "."]]
    assert (tmp_path / treebank.SAMPLE).read_bytes() == served

    def offline(url, timeout):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    (tmp_path / "offline").mkdir()
    with pytest.raises(FileNotFoundError, match=r"treebank\.zip is missing and downloading .* failed .*--data_dir"):
        treebank.load(PTB, "test", tmp_path / "offline")


def test_missing_treebank_and_odd_names(tmp_path):
    with pytest.raises(FileNotFoundError, match="treebank: nowhere/wsj not found"):
        treebank.load(dataclasses.replace(PTB, treebank="nowhere/wsj"), "train", tmp_path)
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "chapter1.mrg").write_text(TREE.format(word="dog"))
    with pytest.raises(ValueError, match="chapter1.mrg is not named wsj_SSNN.mrg"):
        treebank.load(dataclasses.replace(PTB, treebank=str(tmp_path / "odd")), "train", tmp_path)
    assert [trees.words(t) for t in treebank.load_file(tmp_path / "odd" / "chapter1.mrg")] == [
        ["The", "dog", "sleeps", "."]]  # one file of gold trees reads whatever its name
    with pytest.raises(ValueError, match="treebank: applies to the parsing task only, not translation"):
        Recipe(name="x", data=DataConfig(treebank="x"))


def test_load_split_yields_sentence_tree_pairs(sample_data_dir):
    pairs, stats = treebank.TREEBANK.load_split(recipes.get("ptb_sample").data, "test", sample_data_dir)
    first = next(iter(pairs.as_numpy_iterator()))
    assert first[0].decode().startswith("Companies listed below reported quarterly profit")  # wsj_0190.mrg
    assert first[1].decode().startswith("(S (NP (NP @NNS ) (VP @VBN (ADVP @IN ) ) ) (VP @VBD ")  # tag leaves
    assert (stats.pairs_read, stats.empty_skipped, stats.pairs) == (118, 0, 118)
    assert stats.source_file.endswith("treebank.zip:test (sentences)")


@pytest.mark.slow
def test_tokenizer_keeps_every_label_whole(sample_data_dir, tmp_path, sample_splits):
    """Each tree token is one piece (measured: plain BPE splits 26 of 28 labels, 1.30 pieces per token)."""
    from keras_transformer.tasks.parsing import constraint as tree_constraint

    recipe = recipes.get("ptb_sample")
    tok = tokenizer.get_or_train(recipe, tmp_path, sample_data_dir, treebank.TREEBANK)
    assert tok.vocab_size == recipe.model.vocab_size
    assert tokenizer.cache_key(recipe, sample_data_dir, corpus=treebank.TREEBANK).startswith("ptb_en-tree_bpe4000_")
    symbols = treebank.target_symbols(sample_splits["train"])
    assert len(symbols) == 28 and symbols[-2:] == [")", "XX"]
    pieces = tok.tokenize(symbols)
    assert pieces.row_lengths().numpy().tolist() == [1] * len(symbols)
    dev = sample_splits["dev"]
    target_pieces = tok.tokenize(list(dev.targets)).row_lengths().numpy()
    assert target_pieces.tolist() == [len(t.split()) for t in dev.targets]  # one piece per tree token
    assert tok.detokenize(tok.tokenize(list(dev.targets))).numpy().astype(str).tolist() == list(dev.targets)
    # The constraint counts a sentence's words by its word-initial pieces: the same count as the words.
    kinds = tree_constraint.token_kinds(tok)
    assert sorted(kinds.kinds).count(tree_constraint.OPEN) == 26
    import tensorflow as tf

    source_ids = tok.tokenize(list(dev.sources)).to_tensor(0)
    counted = tree_constraint.count_words(source_ids, tf.constant(kinds.word_starts)).numpy().tolist()
    assert counted == [len(s.split()) for s in dev.sources]


def test_tag_leaves_are_one_piece_each(sample_data_dir, tmp_path):
    recipe = recipes.get("ptb_sample")
    assert recipe.data.tree_leaves == "tag"
    slots = dataclasses.replace(recipe, data=dataclasses.replace(recipe.data, tree_leaves="slot"))
    dev = treebank.load(recipe.data, "dev", sample_data_dir)
    assert dev.targets[0].startswith("(S (NP (NP @NNP @NNP @NNP ) @, (NP @NNP @, @NNP ) @, ) (VP @VBD ")
    tok = tokenizer.get_or_train(recipe, tmp_path, sample_data_dir, treebank.TREEBANK)
    assert tokenizer.cache_key(recipe, sample_data_dir, corpus=treebank.TREEBANK) != tokenizer.cache_key(
        slots, sample_data_dir, corpus=treebank.TREEBANK)  # a tokenizer of XX trees is not reused
    target_pieces = tok.tokenize(list(dev.targets)).row_lengths().numpy()
    assert target_pieces.tolist() == [len(t.split()) for t in dev.targets]
