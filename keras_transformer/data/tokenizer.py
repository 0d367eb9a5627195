"""Shared source/target subword vocabulary (§5.1): SentencePiece BPE, run in-graph.

§5.1: "Sentences were encoded using byte-pair encoding, which has a shared
source-target vocabulary of about 37000 tokens." We train a SentencePiece BPE
model on both sides of the training text and run it with
``tensorflow_text.SentencepieceTokenizer``, so the same model bytes
(:attr:`Tokenizer.model_proto`) serve in ``tf.data`` and inside an exported
SavedModel (raw strings in, raw strings out).

With ``ModelConfig.shared_vocabulary`` False (not in the paper) each language
has its own BPE model of ``vocab_size`` pieces, trained on its side of the text
only: a :class:`TokenizerPair`. Code that tokenizes sources or detokenizes
outputs asks for ``tokenizer.source`` and ``tokenizer.target``, which a shared
:class:`Tokenizer` answers with itself.

Reserved ids: PAD 0, UNK 1, BOS 2, EOS 3 (``keras_transformer.PAD_ID`` ...).
A sequence the model reads ends with EOS (``append_eos``): a source in
training, decoding and export, and a target's output side in training.
Departures from the paper's BPE: byte fallback is on, so characters never seen
in training (e.g. news text through a Multi30k vocabulary) still round-trip
exactly instead of becoming UNK; runs of whitespace are collapsed to one space
and leading/trailing spaces dropped (SentencePiece's usual normalisation).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import time
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Union

import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text
from absl import logging

from keras_transformer import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from keras_transformer.data import corpora, validation
from keras_transformer.workdir import WorkDir

# Changing these changes the model, so they are part of the cache key.
_TRAINER_OPTIONS = dict(
    model_type="bpe",
    pad_id=PAD_ID,
    unk_id=UNK_ID,
    bos_id=BOS_ID,
    eos_id=EOS_ID,
    character_coverage=1.0,
    normalization_rule_name="identity",  # no NFKC: keeps "…", "„" etc. exactly as written
    byte_fallback=True,
    shuffle_input_sentence=True,
    num_threads=2,
    minloglevel=2,
)
SIDES = ("source", "target")  # of a TokenizerPair; "shared" names the one model of a shared vocabulary


def append_eos(ids: tf.RaggedTensor) -> tf.RaggedTensor:
    """[B, (n)] subword ids -> [B, (n + 1)]: each row followed by EOS."""
    eos = tf.fill([ids.nrows(), 1], EOS_ID)  # [B, 1]
    return tf.concat([ids, eos], axis=1)  # [B, (n + 1)]


def _sentences(text: Union[Iterable[str], Iterable[os.PathLike]]) -> Iterator[str]:
    """Sentences as given, or the non-empty lines of files (streamed, as ``corpora.read_lines`` splits them)."""
    for item in text:
        if isinstance(item, os.PathLike):
            with validation.open_binary(Path(item)) as f:
                for raw in validation.iter_lines(Path(item), f):
                    line = raw.rstrip(b"\n")
                    line = (line[:-1] if line.endswith(b"\r") else line).decode("utf-8")
                    if line.strip():
                        yield line
        else:
            yield item


class Tokenizer:
    """A SentencePiece model run in-graph by tensorflow-text.

    ``tokenize`` gives subword ids without BOS/EOS; ``detokenize`` reads ids up
    to the first EOS and ignores PAD and BOS, so decoder output can be passed
    in as it comes. Both work eagerly and inside ``tf.function``/``tf.data``.

    The SentencePiece op is built inside each graph that uses it (eager calls
    go through small ``tf.function``s), never once eagerly: tensorflow-text
    keeps the model in a kernel-owned resource, which ``tf.random.set_seed``
    (and so ``keras.utils.set_random_seed``) destroys by clearing the kernel
    caches. Built per graph, it survives reseeding and is self-contained in a
    SavedModel (the model bytes are an attribute of the op).
    """

    def __init__(self, model_path: Union[str, os.PathLike]):
        self.model_path = str(model_path)
        self.model_proto = Path(model_path).read_bytes()
        self._vocab_size = spm.SentencePieceProcessor(model_proto=self.model_proto).get_piece_size()
        self._eager_tokenize = tf.function(self._tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
        self._eager_sample = tf.function(
            self._tokenize, input_signature=[tf.TensorSpec([None], tf.string), tf.TensorSpec([], tf.float32)])
        self._eager_detokenize = tf.function(self._detokenize, input_signature=[tf.TensorSpec([None, None], tf.int32)])
        self._eager_id_to_piece = tf.function(lambda ids: self._op().id_to_string(ids))

    def _op(self, dropout=None) -> tf_text.SentencepieceTokenizer:
        if dropout is None:
            return tf_text.SentencepieceTokenizer(model=self.model_proto, out_type=tf.int32)
        # nbest_size -1 with a BPE model: SentencePiece's BPE-dropout, each merge skipped with probability alpha
        return tf_text.SentencepieceTokenizer(model=self.model_proto, out_type=tf.int32, nbest_size=-1, alpha=dropout)

    def _tokenize(self, strings: tf.Tensor, dropout=None) -> tf.RaggedTensor:
        return self._op(dropout).tokenize(strings)

    def _detokenize(self, ids: tf.Tensor) -> tf.Tensor:
        before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=1), 0)  # [B, L]
        keep = before_eos & tf.not_equal(ids, PAD_ID) & tf.not_equal(ids, BOS_ID)  # [B, L]
        return self._op().detokenize(tf.ragged.boolean_mask(ids, keep))  # [B]

    @classmethod
    def train(
        cls,
        text: Union[Iterable[str], Iterable[os.PathLike]],
        vocab_size: int,
        model_prefix: Union[str, os.PathLike],
        *,
        sample_lines: int = 2_000_000,
        seed: int = 1,
        atomic_words: Sequence[str] = (),
    ) -> "Tokenizer":
        """Trains a BPE model on sentences (or the lines of files); writes ``<model_prefix>.model``.

        ``atomic_words`` (e.g. a parser's "(NP" and ")") are each one piece, with their leading space, wherever
        they stand as words (SentencePiece user-defined symbols).
        """
        options = dict(_TRAINER_OPTIONS)
        if atomic_words:
            options["user_defined_symbols"] = ["\u2581" + word for word in atomic_words]
        path = Path(f"{model_prefix}.model")
        path.parent.mkdir(parents=True, exist_ok=True)
        spm.set_random_generator_seed(seed)
        model = io.BytesIO()
        start = time.time()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=_sentences(text),
                model_writer=model,
                vocab_size=vocab_size,
                input_sentence_size=sample_lines,
                **options,
            )
        except RuntimeError as e:
            raise ValueError(f"vocab_size: cannot train a {vocab_size}-token BPE model on this text ({e})") from None
        partial = path.with_name(path.name + ".part")
        partial.write_bytes(model.getvalue())
        os.replace(partial, path)  # a crash never leaves a truncated model in the cache
        logging.info("trained a %d-token BPE model in %.1f s: %s", vocab_size, time.time() - start, path)
        return cls(path)

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    # One shared vocabulary (§5.1) tokenizes the sources and detokenizes the outputs.
    source = property(lambda self: self)
    target = property(lambda self: self)
    models = property(lambda self: {"shared": self}, doc="{role: Tokenizer} of the SentencePiece models")

    def tokenize(self, strings, dropout=0.0) -> tf.RaggedTensor:
        """[B] strings -> [B, (len)] int32 subword ids, no BOS/EOS.

        ``dropout`` > 0 samples a segmentation by BPE-dropout (Provilkov et al., 2020): every merge is skipped
        with that probability, so a word may come out in smaller pieces; the pieces still detokenize to the
        same text. Drawn by SentencePiece's own generator: not reproducible from run to run.
        """
        strings = tf.convert_to_tensor(strings, tf.string)
        if isinstance(dropout, (int, float)) and dropout == 0:  # the op of the export and of evaluation
            return self._eager_tokenize(strings) if tf.executing_eagerly() else self._tokenize(strings)
        dropout = tf.cast(dropout, tf.float32)
        return self._eager_sample(strings, dropout) if tf.executing_eagerly() else self._tokenize(strings, dropout)

    def piece_counts(self, lines: Sequence[str], chunk: int = 4096) -> List[int]:
        """How many subwords each line tokenizes to (no EOS), ``chunk`` lines per call."""
        counts: List[int] = []
        for start in range(0, len(lines), chunk):
            counts.extend(self.tokenize(list(lines[start:start + chunk])).row_lengths().numpy().tolist())
        return counts

    def detokenize(self, ids) -> tf.Tensor:
        """[B, L] ids (dense or ragged) -> [B] strings; stops at the first EOS, drops PAD/BOS."""
        ids = ids.to_tensor(PAD_ID) if isinstance(ids, tf.RaggedTensor) else tf.convert_to_tensor(ids)
        ids = tf.cast(ids, tf.int32)  # [B, L]
        return self._eager_detokenize(ids) if tf.executing_eagerly() else self._detokenize(ids)

    def id_to_piece(self, ids) -> tf.Tensor:
        """Subword strings of ids, for inspection and attention plots."""
        ids = tf.convert_to_tensor(ids, tf.int32)
        return self._eager_id_to_piece(ids) if tf.executing_eagerly() else self._op().id_to_string(ids)


@dataclasses.dataclass(frozen=True)
class TokenizerPair:
    """Separate vocabularies: the source language's SentencePiece model and the target language's."""

    source: Tokenizer
    target: Tokenizer

    @property
    def models(self) -> Dict[str, Tokenizer]:
        return {"source": self.source, "target": self.target}


Tokenizers = Union[Tokenizer, TokenizerPair]  # what a model's vocabulary is: shared or one per side


def cache_key(recipe, data_dir=None, side: Optional[str] = None, digest: bool = True,
              corpus: corpora.Corpus = corpora.TEXT) -> str:
    """Names the model by corpus, language(s), vocabulary size and a hash of what trains it (``digest``; computing
    it reads the training corpus's files under ``data_dir`` through ``corpus``, the reader of its task).

    ``side`` ("source" or "target") names one language's model of separate vocabularies (None: the shared one).
    """
    cfg = recipe.data
    targets = cfg.target_langs or (cfg.target_lang,)
    if side is None:
        langs = "-".join(sorted((cfg.source_lang, *targets)))  # shared vocabulary: direction-free
    else:
        langs = cfg.source_lang if side == "source" else "-".join(targets)
    name = f"{cfg.corpus}_{langs}_bpe{recipe.model.vocab_size}"
    if not digest:
        return name
    inputs = dict(
        train=corpus.fingerprint(cfg, cfg.train_split, data_dir),
        sample_lines=cfg.tokenizer_sample_lines,
        seed=cfg.seed,
        options=_TRAINER_OPTIONS,
        **corpus.tokenizer_key(cfg),
    )
    if side is not None:
        inputs["side"] = side
    return f"{name}_{hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:8]}"


def get_or_train(recipe, workdir, data_dir=None, corpus: corpora.Corpus = corpora.TEXT) -> Tokenizers:
    """The recipe's tokenizer from ``<workdir>/tokenizer/<key>.model``, training it if absent on the text
    ``corpus`` (the reader of the recipe's task) gives it (``Corpus.tokenizer_text``).

    Source and target training text both feed the one shared vocabulary; with
    separate vocabularies each side's text trains its own model.
    """
    if recipe.model.shared_vocabulary:
        return _get_or_train(recipe, workdir, data_dir, None, corpus)
    return TokenizerPair(*(_get_or_train(recipe, workdir, data_dir, side, corpus) for side in SIDES))


def _get_or_train(recipe, workdir, data_dir, side: Optional[str], corpus: corpora.Corpus) -> Tokenizer:
    """The shared model (``side`` None) or one side's."""
    cfg = recipe.data
    prefix = WorkDir(workdir).tokenizer / cache_key(recipe, data_dir, side, corpus=corpus)
    if Path(f"{prefix}.model").is_file():
        logging.info("using cached tokenizer %s.model", prefix)
        return Tokenizer(f"{prefix}.model")
    if cfg.tokenizer_sample_lines < 1:
        raise ValueError(f"tokenizer_sample_lines: must be positive, got {cfg.tokenizer_sample_lines}")
    text, atomic_words = corpus.tokenizer_text(cfg, data_dir, workdir, side)
    return Tokenizer.train(text, vocab_size=recipe.model.vocab_size, model_prefix=prefix,
                           sample_lines=cfg.tokenizer_sample_lines, seed=cfg.seed, atomic_words=atomic_words)
