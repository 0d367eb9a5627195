"""The interface of a corpus reader: what the tokenizer and the batches read a task's corpus through.

``data.corpora.TEXT`` reads parallel text; the parsing task's ``TREEBANK`` reads a treebank
(``tasks/parsing/treebank.py``).
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

import tensorflow as tf

from keras_transformer.config import DataConfig


class Corpus:
    """What reads a task's corpus: its splits as (source, target) text, a fingerprint naming the training files
    (keys the tokenizer cache), and the text a tokenizer trains on. ``TEXT`` is the parallel-text reader."""

    def load_split(self, cfg: DataConfig, split: str, data_dir=None,
                   workdir=None) -> Tuple[tf.data.Dataset, object]:
        raise NotImplementedError

    def fingerprint(self, cfg: DataConfig, split: str, data_dir=None) -> str:
        raise NotImplementedError

    def tokenizer_text(self, cfg: DataConfig, data_dir, workdir, side: Optional[str]):
        """(sentences or files of text for SentencePiece, atomic words each kept one piece) for the tokenizer of
        ``side`` ("source", "target", or None for a shared vocabulary)."""
        raise NotImplementedError

    def training_fingerprint(self, cfg: DataConfig, data_dir=None) -> dict:
        """What a work directory records of its training split, to refuse resuming on other data
        (``training/data_fingerprint.py``): by default the split's ``fingerprint``."""
        return {"corpus": self.fingerprint(cfg, cfg.train_split, data_dir)}

    def tokenizer_key(self, cfg: DataConfig) -> dict:
        """What else names this corpus's tokenizer in its cache key (``tokenizer.cache_key``)."""
        return {}


@dataclasses.dataclass(frozen=True)
class CorpusStats:
    """What loading one split read and skipped.

    For local text the counts come from the streaming check (``validation.py``);
    a sharded split names its first shard. For TFDS corpora the counts are
    ``None``: the 4.5M WMT14 pairs are not read up front. Either way empty pairs
    are dropped in-graph as the dataset is iterated.
    """

    source_file: str
    target_file: str
    pairs_read: Optional[int]
    empty_skipped: Optional[int]

    @property
    def pairs(self) -> Optional[int]:
        """Pairs the dataset yields (read minus skipped)."""
        if self.pairs_read is None or self.empty_skipped is None:
            return None
        return self.pairs_read - self.empty_skipped
