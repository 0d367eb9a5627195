"""Small kt-train runs on local text for the signal and corpus-fingerprint tests: a corpus fixture and the flags.

300 training and 100 dev pairs of Multi30k val as plain files, a 1+1-layer tiny model with a 600-piece
vocabulary: one run of 300 steps takes about 30 s on two CPU cores, 15 s of it training.
"""

import gzip
import json
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def local_corpus(tmp_path_factory, multi30k_dir):
    """A directory holding train.{en,de} (300 pairs) and dev.{en,de} (100 pairs)."""
    root = tmp_path_factory.mktemp("corpus")
    for lang in ("en", "de"):
        with gzip.open(multi30k_dir / f"val.{lang}.gz", "rt", encoding="utf-8") as f:
            lines = f.read().splitlines()[:400]
        (root / f"train.{lang}").write_text("\n".join(lines[:300]) + "\n", encoding="utf-8")
        (root / f"dev.{lang}").write_text("\n".join(lines[300:]) + "\n", encoding="utf-8")
    return root


def train_flags(corpus, workdir, train_steps=300, *extra) -> list:
    """kt-train flags of a small run on ``corpus`` into ``workdir``.

    Dropout 0: Keras' dropout seed state is not in a training checkpoint (only the model's weights and the
    optimizer are), so a resumed run with dropout draws other masks than an uninterrupted one; without dropout
    the two end bit-identical. One checkpoint interval longer than the run: the only checkpoints are the ones a
    test causes and the final one. TensorBoardScalars prints "step 50: ..." to stdout (not a terminal).
    """
    return ["--recipe=tiny", "--num_layers=1", f"--train_prefix={corpus}/train", f"--eval_prefix={corpus}/dev",
            "--source_lang=en", "--target_lang=de", "--vocab_size=600", "--max_length=48", "--tokens_per_batch=1024",
            "--bucket_boundaries=8,16,24,32,48", "--tokenizer_sample_lines=500", "--shuffle_buffer=64",
            "--dropout=0", f"--train_steps={train_steps}", "--checkpoint_every=1000", "--seed=3",
            f"--workdir={workdir}", *extra]


def summary(workdir) -> dict:
    """The work directory's train_summary.json."""
    return json.loads((Path(workdir) / "train_summary.json").read_text())
