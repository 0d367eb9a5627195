"""Parsing fixtures: the WSJ sample's location and its three splits, read once per session."""

import pytest

from keras_transformer.config import DataConfig
from keras_transformer.data import corpora
from keras_transformer.tasks.parsing import treebank


@pytest.fixture(scope="session")
def sample_data_dir():
    data_dir = corpora.resolve_data_dir()
    if not (data_dir / treebank.SAMPLE).is_file():
        pytest.skip(f"the WSJ sample {treebank.SAMPLE} is not under {data_dir} (set KT_DATA_DIR)")
    return data_dir


@pytest.fixture(scope="session")
def sample_splits(sample_data_dir):
    """{"train", "dev", "test": treebank.ParseSplit} of the sample."""
    cfg = DataConfig(corpus="ptb", source_lang="en", target_lang="tree")
    return {split: treebank.load(cfg, split, sample_data_dir) for split in ("train", "dev", "test")}
