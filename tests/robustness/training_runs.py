"""Small kt-train runs on local text for the signal and corpus-fingerprint tests: the flags and the summary.

On ``local_corpus`` (tests/conftest.py: 300 training and 100 dev pairs of Multi30k val as plain files), a
1+1-layer tiny model with a 600-piece vocabulary: one run of 300 steps takes about 30 s on two CPU cores, 15 s of it
training.
"""

import json
from pathlib import Path


def train_flags(corpus, workdir, train_steps=300, *extra) -> list:
    """kt-train flags of a small run on ``corpus`` into ``workdir``.

    The tiny recipe's dropout (0.1): a checkpoint holds the dropout generators' states, so a resumed run ends
    bit-identical to an uninterrupted one with dropout too. One checkpoint interval longer than the run: the
    only checkpoints are the ones a test causes and the final one. The progress line "step 50/..." is printed to
    stdout (not a terminal) every 50 steps.
    """
    return ["--recipe=tiny", "--num_layers=1", f"--train_prefix={corpus}/train", f"--eval_prefix={corpus}/dev",
            "--source_lang=en", "--target_lang=de", "--vocab_size=600", "--max_length=48", "--tokens_per_batch=1024",
            "--bucket_boundaries=8,16,24,32,48", "--tokenizer_sample_lines=500", "--shuffle_buffer=64",
            f"--train_steps={train_steps}", "--checkpoint_every=1000", "--seed=3",
            f"--workdir={workdir}", *extra]


def summary(workdir) -> dict:
    """The work directory's train_summary.json."""
    return json.loads((Path(workdir) / "train_summary.json").read_text())
