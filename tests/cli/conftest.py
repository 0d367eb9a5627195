"""Fixtures of the command-line tests: one's own parallel text as local files."""

import gzip

import pytest


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, multi30k_dir):
    """300 training and 100 dev pairs of Multi30k val, as plain local files <prefix>.en / <prefix>.de."""
    root = tmp_path_factory.mktemp("corpus")
    for lang in ("en", "de"):
        with gzip.open(multi30k_dir / f"val.{lang}.gz", "rt", encoding="utf-8") as f:
            lines = f.read().splitlines()[:400]
        (root / f"train.{lang}").write_text("\n".join(lines[:300]) + "\n", encoding="utf-8")
        (root / f"dev.{lang}").write_text("\n".join(lines[300:]) + "\n", encoding="utf-8")
    return root
