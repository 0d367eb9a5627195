"""One model for several target languages (Johnson et al., 2017): a reserved piece per target, prepended to the source.

A recipe with ``DataConfig.target_langs`` (e.g. de, fr, cs) trains on the union of its directions: each pair
source_lang -> lang of the corpus, its source tagged ``<2lang>`` (Johnson et al.'s form; OPUS-MT writes ``>>fr<<``),
the directions taken in turn. The tags are SentencePiece user-defined symbols, each always one piece; a tagged
line is plain text, so every text signature of an export translates ``"<2fr> A man rides a bike."``, and
``kt-translate --target_lang=fr`` writes the tag for you.

    tag(lang) -> "<2lang>"                     tagged(lang, line) -> "<2lang> line"
    direction(cfg, lang) -> the single-direction DataConfig of one target
    interleave(parts) -> the round-robin union of the directions' (tagged source, target) datasets

A corpus reader (``data.reader.Corpus``) hands a multi-target config to ``load_split``, ``fingerprint``,
``training_fingerprint`` and ``tokenizer_text`` here, which read each direction through that reader.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from typing import Sequence

import tensorflow as tf

from keras_transformer.data.reader import CorpusStats


def tag(lang: str) -> str:
    return f"<2{lang}>"


def tagged(lang: str, line: str) -> str:
    return f"{tag(lang)} {line}"


def direction(cfg, lang: str):
    """``cfg`` (a multi-target ``DataConfig``) for its one direction source_lang -> ``lang``, untagged."""
    return dataclasses.replace(cfg, target_lang=lang, target_langs=())


def tag_sources(pairs: tf.data.Dataset, lang: str) -> tf.data.Dataset:
    """(source, target) -> ("<2lang> source", target)."""
    return pairs.map(lambda source, target: (tf.strings.join([tag(lang), source], " "), target))


def interleave(parts: Sequence[tf.data.Dataset]) -> tf.data.Dataset:
    """One element of each dataset in turn (a direction that ends is skipped), deterministic: a resumed run
    skips into the same stream."""
    if len(parts) == 1:
        return parts[0]
    turns = tf.data.Dataset.range(len(parts)).repeat()
    return tf.data.Dataset.choose_from_datasets(list(parts), turns, stop_on_empty_dataset=False)


def check_target_lang(known: Sequence[str], lang: str, flag: str = "--target_lang") -> None:
    """ValueError naming ``flag`` unless ``lang`` is one of a multi-target model's ``known`` targets."""
    if not known:
        raise ValueError(f"{flag}: this model has one target language (trained without --target_langs)")
    if lang not in known:
        raise ValueError(f"{flag}: {lang!r} is not one of this model's target languages ({', '.join(known)})")


def load_split(corpus, cfg, split: str, data_dir=None, workdir=None):
    """(the directions' tagged pairs in turn, their summed ``CorpusStats``), each read by ``corpus``."""
    loaded = [corpus.load_split(direction(cfg, lang), split, data_dir, workdir) for lang in cfg.target_langs]
    pairs = interleave([tag_sources(p, lang) for (p, _), lang in zip(loaded, cfg.target_langs)])
    counts = [stats for _, stats in loaded]
    known = all(c.pairs_read is not None for c in counts)
    more = f" (+{len(counts) - 1} more target languages)" if len(counts) > 1 else ""
    return pairs, CorpusStats(counts[0].source_file, counts[0].target_file + more,
                              sum(c.pairs_read for c in counts) if known else None,
                              sum(c.empty_skipped for c in counts) if known else None)


def fingerprint(corpus, cfg, split: str, data_dir=None) -> str:
    text = ":".join(corpus.fingerprint(direction(cfg, lang), split, data_dir) for lang in cfg.target_langs)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def training_fingerprint(corpus, cfg, data_dir=None) -> dict:
    """The directions' training fingerprints as one: their files, or their TFDS splits."""
    found = [corpus.training_fingerprint(direction(cfg, lang), data_dir) for lang in cfg.target_langs]
    if "files" in found[0]:
        return {"files": {path: print_ for f in found for path, print_ in f["files"].items()}}
    return {"tfds": ",".join(f["tfds"] for f in found)}


def tokenizer_text(corpus, cfg, data_dir, workdir, side):
    """Each direction's tokenizer text, and the tags as atomic words of the source side (or the shared one)."""
    parts = [corpus.tokenizer_text(direction(cfg, lang), data_dir, workdir, side)[0] for lang in cfg.target_langs]
    tags = tuple(tag(lang) for lang in cfg.target_langs) if side != "target" else ()
    return itertools.chain.from_iterable(parts), tags
