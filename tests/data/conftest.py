"""Shared data-test fixtures: the real corpora's location (these tests are ``corpus`` tests), a file writer, one
trained tokenizer."""

import gzip
from pathlib import Path

import pytest

from keras_transformer import recipes
from keras_transformer.data import corpora, tokenizer

def _write_lines(path: Path, lines, gz: bool = False) -> Path:
    """Writes lines ('\\n'-joined with a final newline, or raw bytes) to a plain or .gz file."""
    data = lines if isinstance(lines, bytes) else "".join(f"{line}\n" for line in lines).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return path


@pytest.fixture
def write_lines():
    return _write_lines


@pytest.fixture(scope="session")
def data_dir(real_multi30k_dir) -> Path:
    """These tests check the readers on the real corpora (``corpus``): their figures are the real files'."""
    return real_multi30k_dir.parent


@pytest.fixture(scope="session")
def multi30k_dir(real_multi30k_dir) -> Path:
    return real_multi30k_dir


@pytest.fixture(scope="session")
def newstest_dir(real_data_dir) -> Path:
    path = real_data_dir / corpora.NEWSTEST_DIR
    if not (path / "newstest2014.de").is_file():
        pytest.skip(f"newstest2013/2014 not found under {path} (set KT_DATA_DIR)")
    return path


@pytest.fixture(scope="session")
def workdir(tmp_path_factory) -> Path:
    """One work directory for the session, so the Multi30k tokenizer trains once."""
    return tmp_path_factory.mktemp("workdir")


@pytest.fixture(scope="session")
def multi30k_tokenizer(workdir, multi30k_dir):
    """The multi30k recipe's 8000-token BPE model, trained on Multi30k train (about a second)."""
    return tokenizer.get_or_train(recipes.get("multi30k"), workdir, multi30k_dir.parent)
