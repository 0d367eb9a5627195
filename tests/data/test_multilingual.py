"""Several target languages in one model (Johnson et al., 2017): the tagged union of the directions, the tags one
piece each, and the config's refusals."""

import dataclasses
import gzip
import os
import shutil

import pytest

from keras_transformer import recipes
from keras_transformer.config import DataConfig
from keras_transformer.data import corpora, multilingual
from keras_transformer.data import tokenizer as tokenizer_lib


def _french(line: str) -> str:  # a stand-in third language: the German words, reversed
    return " ".join(word[::-1] for word in line.split())


@pytest.fixture(scope="module")
def three_languages(tmp_path_factory, multi30k_dir):
    """A data directory whose Multi30k has en, de and a generated fr side, line-aligned."""
    root = tmp_path_factory.mktemp("multi") / "multi30k-task1-en-de"
    shutil.copytree(multi30k_dir, root)
    for split in ("train", "val", "test_2016_flickr"):
        german = corpora.read_lines(root / f"{split}.de.gz")
        with gzip.open(root / f"{split}.fr.gz", "wt", encoding="utf-8") as f:
            f.writelines(f"{_french(line)}\n" for line in german)
    return root.parent


def _recipe(vocab_size=500):
    tiny = recipes.get("tiny")
    return dataclasses.replace(tiny, model=dataclasses.replace(tiny.model, vocab_size=vocab_size),
                               data=dataclasses.replace(tiny.data, corpus="multi30k", target_lang="de",
                                                        target_langs=("de", "fr"), tokenizer_sample_lines=4000))


def test_the_directions_come_in_turn_with_their_tags(three_languages):
    cfg = _recipe().data
    pairs, stats = corpora.load_split(cfg, "val", three_languages)
    got = [(s.decode(), t.decode()) for s, t in pairs.take(4).as_numpy_iterator()]
    english = corpora.read_lines(three_languages / corpora.MULTI30K_DIR / "val.en.gz")
    german = corpora.read_lines(three_languages / corpora.MULTI30K_DIR / "val.de.gz")
    assert got == [(f"<2de> {english[0]}", german[0]), (f"<2fr> {english[0]}", _french(german[0])),
                   (f"<2de> {english[1]}", german[1]), (f"<2fr> {english[1]}", _french(german[1]))]
    assert stats.pairs_read == 2 * len(english) and "(+1 more target languages)" in stats.target_file
    assert sum(1 for _ in pairs) == 2 * len(english)  # every pair of every direction, once
    one = corpora.fingerprint(multilingual.direction(cfg, "de"), "train", three_languages)
    assert corpora.fingerprint(cfg, "train", three_languages) not in (one, corpora.fingerprint(
        multilingual.direction(cfg, "fr"), "train", three_languages))


def test_each_tag_is_one_piece_of_the_shared_vocabulary(three_languages, tmp_path):
    recipe = _recipe()
    tokenizer = tokenizer_lib.get_or_train(recipe, tmp_path, three_languages)
    assert "_de-en-fr_" in os.path.basename(tokenizer.model_path)  # the languages name it
    ids = tokenizer.tokenize(["<2fr> a man .", "<2de> a man ."]).to_list()
    pieces = [p.decode() for p in tokenizer.id_to_piece([ids[0][0], ids[1][0]]).numpy()]
    assert pieces == ["\u2581<2fr>", "\u2581<2de>"] and ids[0][1:] == ids[1][1:]


@pytest.mark.parametrize("changes, message", [
    (dict(target_langs=("de", "de")), r"^target_langs: must be distinct languages other than source_lang en"),
    (dict(target_langs=("en", "de")), r"^target_langs: must be distinct"),
    (dict(target_langs=("fr", "cs")), r"^target_lang: must be one of target_langs \(fr,cs\), got de"),
])
def test_a_bad_language_list_is_refused_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        DataConfig(**changes)
