"""Parsing fixtures: the real WSJ sample's three splits (``corpus`` tests), and the generated sample's."""

import pytest

from keras_transformer.config import DataConfig
from keras_transformer.tasks.parsing import treebank
from tests.support import fetched

PTB = DataConfig(corpus="ptb", source_lang="en", target_lang="tree")


@pytest.fixture(scope="session")
def sample_data_dir(real_data_dir):
    """The real corpora's directory, holding NLTK's WSJ sample (fetched as the tools fetch it)."""
    fetched("the WSJ sample", lambda: treebank.treebank_path(PTB, real_data_dir))
    return real_data_dir


@pytest.fixture(scope="session")
def sample_splits(sample_data_dir):
    """{"train", "dev", "test": treebank.ParseSplit} of the real sample."""
    return {split: treebank.load(PTB, split, sample_data_dir) for split in ("train", "dev", "test")}


@pytest.fixture(scope="session")
def generated_splits(data_dir):
    """{"train", "dev", "test": treebank.ParseSplit} of the generated sample (tests/testdata/corpora.py)."""
    return {split: treebank.load(PTB, split, data_dir) for split in ("train", "dev", "test")}
