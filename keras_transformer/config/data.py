"""Corpora, tokenizer and batching (§5.1): ``DataConfig``. Each field's docstring is its flag's help."""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from keras_transformer.config.common import CORPORA, _require



@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Corpora, tokenizer and batching (§5.1)."""

    corpus: str = "multi30k"
    """multi30k, wmt14 (TFDS; en-de or en-fr), wmt_t2t, text (your own files, --train_prefix), or ptb
    (constituency parsing, §6.3: --treebank)."""
    source_lang: str = "en"
    """Source language code; for corpus text the source files' suffix."""
    target_lang: str = "de"
    """Target language code; for corpus text the target files' suffix."""
    target_langs: Tuple[str, ...] = ()
    """Several target languages in one model (Johnson et al., 2017), comma-separated, e.g. de,fr,cs: the union of
    the directions source_lang -> each, every source tagged <2lang> (a reserved piece); --target_lang must be one."""
    train_split: str = "train"
    """Name of the training split (e.g. train)."""
    eval_split: str = "val"
    """Validation split (e.g. val, validation, newstest2013)."""
    test_split: str = "test_2016_flickr"
    """Test split (e.g. test_2016_flickr, test, newstest2014)."""
    train_prefix: Optional[str] = None
    """Your own parallel text for the training split: files PREFIX.<source_lang>[.gz] and
    PREFIX.<target_lang>[.gz], one sentence per line (a glob such as data/train-* names aligned shards). Setting
    any prefix switches the recipe's corpus to text (its model and training settings stay); with a --corpus
    other than text it is an error."""
    eval_prefix: Optional[str] = None
    """The same for the validation split (--eval_split)."""
    test_prefix: Optional[str] = None
    """The same for the test split (--test_split)."""
    max_length: int = 256
    """Drop pairs with more subword tokens (EOS included) on a side."""
    tokens_per_batch: int = 25000
    """GLOBAL token budget of one parameter update, per side: padded tokens summed over replicas and accumulated
    micro-batches (§5.1: ~25000 source + 25000 target)."""
    max_tokens_per_device: int = 0
    """Memory budget of one device: padded tokens per side in one micro-batch on one replica (0 = no cap);
    gradient accumulation is derived from it to reach --tokens_per_batch."""
    bucket_boundaries: Optional[Tuple[int, ...]] = None
    """Comma-separated, increasing sequence lengths of the length buckets, e.g. 8,16,32,64 (default: geometric up
    to --max_length)."""
    shuffle_buffer: int = 20000
    """Pairs in the training shuffle buffer."""
    seed: int = 1
    """Seed of the data's shuffles and of the tokenizer's sample."""
    tokenizer_sample_lines: int = 2_000_000
    """Lines of training text sampled to train SentencePiece (a seeded reservoir: the first run's memory follows
    it, not the corpus)."""
    bpe_dropout: float = 0.0
    """BPE-dropout (Provilkov et al., 2020; SentencePiece's; not in the paper): segment training pairs anew at
    every pass, each merge skipped with this probability (0 = off); validation, test and decoding are never
    sampled."""
    treebank: Optional[str] = None
    """Corpus ptb: a directory of Penn Treebank .mrg files (searched recursively) or a zip of them, relative paths
    in the data directory (default: the WSJ sample ptb-wsj-sample/treebank.zip). Splits train/dev/test are WSJ
    sections 02-21/22/23 when present, else the sample's files 0001-0179/0180-0189/0190-0199; sections:SS-SS and
    files:NNNN-NNNN name others."""
    tree_leaves: str = "slot"
    """Corpus ptb: a word's leaf in the linearized tree: slot (XX, Vinyals et al. 2015) or tag (its POS tag, @NN,
    as tensor2tensor's WSJ problem: the parser also tags)."""

    def __post_init__(self):
        _require(self.tree_leaves in ("slot", "tag"), "tree_leaves", f"must be 'slot' or 'tag', got "
                 f"{self.tree_leaves!r}")
        _require(self.corpus in CORPORA, "corpus", f"unknown corpus {self.corpus!r}; expected {', '.join(CORPORA)}")
        _require(self.source_lang != self.target_lang, "target_lang", "must differ from source_lang")
        if self.target_langs:
            langs = tuple(self.target_langs)
            _require(len(set(langs)) == len(langs) and self.source_lang not in langs, "target_langs",
                     f"must be distinct languages other than source_lang {self.source_lang}, got {','.join(langs)}")
            _require(self.target_lang in langs, "target_lang",
                     f"must be one of target_langs ({','.join(langs)}), got {self.target_lang}")
        _require(self.max_length > 1, "max_length", f"must be > 1, got {self.max_length}")
        _require(self.tokens_per_batch > 0, "tokens_per_batch", f"must be positive, got {self.tokens_per_batch}")
        _require(self.max_tokens_per_device >= 0, "max_tokens_per_device",
                 f"must be >= 0, got {self.max_tokens_per_device}")
        _require(0.0 <= self.bpe_dropout < 1.0, "bpe_dropout", f"must be in [0, 1), got {self.bpe_dropout}")
        if self.bucket_boundaries is not None:
            b = tuple(self.bucket_boundaries)
            _require(
                all(x < y for x, y in zip(b, b[1:])) and b and b[0] > 0,
                "bucket_boundaries",
                f"must be positive and strictly increasing, got {b}",
            )
            _require(b[-1] <= self.max_length, "bucket_boundaries", "last boundary exceeds max_length")
