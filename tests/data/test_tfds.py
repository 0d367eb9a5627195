"""TFDS WMT14 in the installed environment: the builders construct (no download), En-Fr loads under mock_data."""

import pytest
import tensorflow_datasets as tfds

from keras_transformer.config import DataConfig
from keras_transformer.data import corpora


@pytest.mark.parametrize("name, pair, train_subsets", [
    ("wmt14_translate/de-en", ("de", "en"), ["europarl_v7", "commoncrawl", "newscommentary_v9"]),
    ("wmt14_translate/fr-en", ("fr", "en"),
     ["europarl_v7", "commoncrawl", "multiun", "newscommentary_v9", "gigafren"]),  # §5.1: 36M sentences
])
def test_wmt14_builders_construct_with_the_installed_dependencies(name, pair, train_subsets):
    builder = tfds.builder(name)
    assert builder.builder_config.language_pair == pair
    assert sorted(builder.info.features.languages) == sorted(pair)
    assert builder.info.supervised_keys == pair
    subsets = {str(split): names for split, names in builder.subsets.items()}
    assert subsets == {"train": train_subsets, "validation": ["newstest2013"], "test": ["newstest2014"]}
    # What download_and_prepare reads first: the builder's code path and its URL checksums. This is
    # where a missing dependency (importlib_resources) used to fail, after construction had passed.
    assert type(builder).code_path.name == "wmt14.py"
    assert len(builder.url_infos) > 0


@pytest.mark.parametrize("source_lang, target_lang", [("en", "fr"), ("fr", "en")])
def test_wmt14_en_fr_under_mock_data(source_lang, target_lang):
    cfg = DataConfig(corpus="wmt14", source_lang=source_lang, target_lang=target_lang)
    assert corpora.tfds_name(cfg) == "wmt14_translate/fr-en"
    with tfds.testing.mock_data(num_examples=12, policy=tfds.testing.MockPolicy.USE_CODE):
        raw = [(ex[source_lang].decode(), ex[target_lang].decode())
               for ex in tfds.load("wmt14_translate/fr-en", split="validation").as_numpy_iterator()]
        ds, stats = corpora.load_split(cfg, "validation")
        pairs = [(x.decode(), y.decode()) for x, y in ds.as_numpy_iterator()]
    expected = [(x, y) for x, y in raw if x.strip() and y.strip()]
    assert len(raw) == 12 and pairs == expected and len(pairs) > 0
    assert stats.source_file == f"tfds:wmt14_translate/fr-en:validation:{source_lang}"


def test_en_de_and_en_fr_have_different_fingerprints():
    de, fr = DataConfig(corpus="wmt14"), DataConfig(corpus="wmt14", target_lang="fr")
    assert corpora.tfds_name(de) == "wmt14_translate/de-en"
    assert corpora.fingerprint(de, "train") != corpora.fingerprint(fr, "train")  # tokenizer caches stay apart


@pytest.mark.parametrize("corpus, source_lang, target_lang, field", [
    ("wmt14", "en", "ru", "target_lang"),
    ("wmt14", "de", "fr", "source_lang"),  # no German-French builder
    ("wmt_t2t", "fr", "en", "source_lang"),  # the t2t variant is En-De only
])
def test_a_pair_the_corpus_lacks_names_the_language_field(corpus, source_lang, target_lang, field):
    cfg = DataConfig(corpus=corpus, source_lang=source_lang, target_lang=target_lang)
    with pytest.raises(ValueError, match=f"^{field}: corpus {corpus} has en-de"):
        corpora.load_split(cfg, "train")
