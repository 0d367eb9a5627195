"""Fixtures of the command-line tests: one's own parallel text as local files."""

import pytest


@pytest.fixture(scope="module")
def corpus(local_corpus):
    """300 training and 100 dev pairs of Multi30k val, as plain local files <prefix>.en / <prefix>.de."""
    return local_corpus
