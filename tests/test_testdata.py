"""The generated corpora every test reads (tests/testdata/corpora.py): the same bytes on every machine, in the
layouts the tools read, and the suite's data directory."""

import hashlib
import os

from keras_transformer.config import DataConfig
from keras_transformer.data import corpora
from keras_transformer.tasks.parsing import treebank
from tests.testdata import corpora as generated


def _digests(root):
    return {os.path.relpath(os.path.join(d, f), root): hashlib.sha256(open(os.path.join(d, f), "rb").read()).hexdigest()
            for d, _, files in os.walk(root) for f in files}


def test_the_files_are_the_same_bytes_every_time_and_the_suite_reads_them(tmp_path, data_dir):
    first, second = generated.write_data_dir(tmp_path / "a"), generated.write_data_dir(tmp_path / "b")
    assert _digests(first) == _digests(second) == _digests(data_dir) and len(_digests(first)) == 11
    assert corpora.resolve_data_dir() == data_dir  # $KT_DATA_DIR, which the programs the tests start inherit


def test_the_tools_read_them_as_multi30k_newstest_and_the_treebank_sample(data_dir):
    for split, size in generated.SPLITS.items():
        sources, targets, _ = corpora.read_parallel_files(*corpora.split_files(DataConfig(), split, data_dir))
        assert len(sources) == len(targets) == size
    english, german = corpora.read_parallel_files(*corpora.split_files(DataConfig(), "newstest2014", data_dir))[:2]
    assert len(english) == 50 and german[0][0].isupper() and english[0].endswith(" .")
    ptb = DataConfig(corpus="ptb", source_lang="en", target_lang="tree")
    counts = {split: len(treebank.load(ptb, split, data_dir).trees) for split in ("train", "dev", "test")}
    assert counts == {"train": 179 * 4, "dev": 40, "test": 40}


def test_a_sentence_and_its_translation_and_tree_agree():
    import numpy as np

    from keras_transformer.tasks.parsing import trees

    tree, english, german = generated.sentence(np.random.default_rng(3))
    assert trees.words(trees.read_trees(generated.bracketed(tree))[0]) == english.split()
    assert len(german.split()) == len(english.split()) and german.endswith(" .")
