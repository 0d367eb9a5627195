"""Parallel corpora as ``tf.data`` datasets of raw (source, target) strings.

Three kinds of corpus, chosen by ``DataConfig.corpus``:

* ``wmt14`` / ``wmt_t2t``: WMT14 English-German through TFDS
  (``wmt14_translate/de-en``, and ``wmt_t2t_translate/de-en``, the variant the
  paper's tensor2tensor code trained on); ``wmt14`` with en/fr is English-French
  (``wmt14_translate/fr-en``, §5.1). Splits: train, validation
  (newstest2013), test (newstest2014).
* ``multi30k``: Multi30k Task 1, English with German, French or Czech,
  ``<data_dir>/multi30k-task1-en-de/<split>.<lang>.gz`` (train, val, test_2016_flickr); downloaded, and checked
  by sha256, when the files are absent.
* ``text``: aligned local files ``<prefix>.<lang>`` or ``<prefix>.<lang>.gz``
  per split (``DataConfig.train_prefix/eval_prefix/test_prefix``). A prefix
  may be a glob (``data/train-*``) naming shard pairs ``<shard>.<lang>[.gz]``;
  training interleaves the shards, their order shuffled with ``cfg.seed``.

A corpus reader is an object with ``load_split``, ``fingerprint`` and ``tokenizer_text`` (:class:`Corpus`);
``TEXT`` reads the corpora above, and a task may bring its own (the parsing task reads a treebank:
``tasks/parsing/treebank.py``). The tokenizer and the batches take whichever reader they are given.

Any corpus also loads ``newstest2013`` / ``newstest2014`` from
``<data_dir>/wmt-newstest-en-de/`` as evaluation splits.

Local text streams through ``tf.data.TextLineDataset`` (gzip or plain), never whole into Python memory. Bad
local input never passes silently: one cached streaming pass (``validation.py``) raises ``ValueError`` naming
the file(s) on a line-count mismatch or invalid UTF-8, and counts the pairs with an empty or whitespace-only side
in :class:`CorpusStats`; the pipeline skips those pairs in-graph, as it does for TFDS.
"""

from __future__ import annotations

import glob
import hashlib
import os
import random
from pathlib import Path
from typing import Iterator, List, Optional, Tuple, Union

import tensorflow as tf
from absl import logging

from keras_transformer.config import DataConfig
from keras_transformer.data import fetch, multilingual, validation
from keras_transformer.data.files import file_fingerprint, read_lines  # noqa: F401  (read_lines: also from here)
from keras_transformer.data.reader import Corpus, CorpusStats  # noqa: F401  (CorpusStats: also from here)
from keras_transformer.workdir import WorkDir

MULTI30K_DIR = "multi30k-task1-en-de"
NEWSTEST_DIR = "wmt-newstest-en-de"
MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{split}.{lang}.gz"
MULTI30K_SPLITS = ("train", "val", "test_2016_flickr", "test_2017_flickr", "test_2018_flickr", "test_2017_mscoco")
MULTI30K_SHA256 = {  # of the upstream .gz files (multi30k-task1-en-de/SOURCE.md); a download must match its own
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "train.cs.gz": "a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077",
    "val.cs.gz": "b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc",
    "test_2016_flickr.cs.gz": "200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1",
}
# TFDS builder of each corpus, by the pair's non-English language (the other side is English).
TFDS_NAMES = {
    "wmt14": {"de": "wmt14_translate/de-en", "fr": "wmt14_translate/fr-en"},  # §5.1: WMT 2014 En-De and En-Fr
    "wmt_t2t": {"de": "wmt_t2t_translate/de-en"},
}
_LANGS = ("en", "de", "fr", "cs")  # Task 1's sides; the folder is named for its first pair
TEXT_CORPORA = ("multi30k", "wmt14", "wmt_t2t", "text")  # the DataConfig.corpus values TEXT reads


def corpus_data_dir(data, flag_value: Union[str, os.PathLike, None] = None) -> Union[str, os.PathLike, None]:
    """The data directory for ``data``'s corpus (a ``DataConfig``): TFDS corpora keep ``--data_dir`` as given (None:
    TFDS's own), the others :func:`resolve_data_dir` it."""
    return flag_value if data.corpus in TFDS_NAMES else resolve_data_dir(flag_value)


def resolve_data_dir(flag_value: Union[str, os.PathLike, None] = None) -> Path:
    """``--data_dir`` if given, else ``$KT_DATA_DIR``, else ``../shared/data`` beside the repository.

    A directory named by the flag or the variable must exist (Multi30k files missing
    *inside* an existing directory are downloaded there; a mistyped path is an error).
    """
    for source, value in (("--data_dir", flag_value), ("KT_DATA_DIR", os.environ.get("KT_DATA_DIR"))):
        if value:
            path = Path(value).expanduser()
            if not path.is_dir():
                raise FileNotFoundError(f"{source}: {path} is not a directory")
            return path
    repo_root = Path(__file__).resolve().parents[2]
    candidate = repo_root.parent / "shared" / "data"
    return candidate if candidate.is_dir() else Path.cwd().parent / "shared" / "data"


def read_parallel_files(source_path, target_path) -> Tuple[List[str], List[str], CorpusStats]:
    """Reads two small aligned files; returns (sources, targets, stats) without empty pairs.

    Lines as :func:`read_lines` reads them. Raises ValueError when the line counts
    differ or a file is not UTF-8, and FileNotFoundError when a file is missing.
    For a training corpus use :func:`load_split`, which streams.
    """
    source_path, target_path = Path(source_path), Path(target_path)
    for path in (source_path, target_path):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file")
    sources, targets, skipped = [], [], []
    for n, x, y in validation.aligned_lines(source_path, target_path):
        if x.strip() and y.strip():
            sources.append(x[:-1].decode("utf-8") if x.endswith(b"\r") else x.decode("utf-8"))
            targets.append(y[:-1].decode("utf-8") if y.endswith(b"\r") else y.decode("utf-8"))
        else:
            skipped.append(n)
    if skipped:
        shown = ", ".join(str(n) for n in skipped[:10]) + (", ..." if len(skipped) > 10 else "")
        logging.warning(
            "%s / %s: skipped %d pairs with an empty or whitespace-only side (lines %s)",
            source_path, target_path, len(skipped), shown,
        )
    stats = CorpusStats(str(source_path), str(target_path), pairs_read=len(sources) + len(skipped),
                        empty_skipped=len(skipped))
    return sources, targets, stats


def _download_multi30k(path: Path, split: str, lang: str) -> None:
    """Fetches one Multi30k file from the dataset's GitHub repository into ``path``, checked by its
    ``MULTI30K_SHA256``."""
    fetch.download(MULTI30K_URL.format(split=split, lang=lang), path, MULTI30K_SHA256.get(path.name),
                   f"a directory holding {MULTI30K_DIR}/")


def _find(prefix: Path, lang: str) -> Optional[Path]:
    for path in (Path(f"{prefix}.{lang}"), Path(f"{prefix}.{lang}.gz")):
        if path.is_file():
            return path
    return None


def _glob_shards(pattern: str, langs, field: str) -> List[Tuple[Path, Path]]:
    """Aligned shard pairs ``<shard>.<lang>[.gz]`` of a glob prefix, sorted; [] when none matches."""
    sides = {}  # shard -> [source, target]
    for index, lang in enumerate(langs):
        for ext in (".gz", ""):  # plain wins over .gz, as in _find
            for name in glob.glob(f"{pattern}.{lang}{ext}"):
                sides.setdefault(name[: -len(f".{lang}{ext}")], [None, None])[index] = Path(name)
    for shard, pair in sorted(sides.items()):
        if None in pair:
            have, lack = (langs[0], langs[1]) if pair[0] else (langs[1], langs[0])
            raise FileNotFoundError(f"{field}={pattern!r}: shard {shard}.{have} has no aligned {shard}.{lack}[.gz]")
    return [(s, t) for _, (s, t) in sorted(sides.items())]


def split_shards(cfg: DataConfig, split: str, data_dir: Path) -> List[Tuple[Path, Path]]:
    """The (source, target) file pairs of a local-text split, downloading Multi30k if needed.

    One pair, except for a corpus-"text" prefix that is a glob: then every shard pair
    it matches, sorted by name. Raises FileNotFoundError naming what is missing.
    """
    langs = (cfg.source_lang, cfg.target_lang)
    if cfg.corpus not in TEXT_CORPORA:
        raise ValueError(f"corpus: {cfg.corpus} is not parallel text ({', '.join(TEXT_CORPORA)}); its task reads it")
    if split.startswith("newstest"):
        prefixes, field = [data_dir / NEWSTEST_DIR / split], None
    elif cfg.corpus == "multi30k":
        for name, lang in zip(("source_lang", "target_lang"), langs):
            if lang not in _LANGS:
                raise ValueError(f"{name}: multi30k has {', '.join(_LANGS)} only, got {lang!r}")
        paths = []
        for lang in langs:  # <split>.<lang> or <split>.<lang>.gz; fetched as .gz when neither is there
            path = _find(data_dir / MULTI30K_DIR / split, lang) or data_dir / MULTI30K_DIR / f"{split}.{lang}.gz"
            if not path.is_file():
                if split not in MULTI30K_SPLITS:
                    raise FileNotFoundError(f"{path}: no such file (--data_dir={data_dir}); known: {MULTI30K_SPLITS}")
                _download_multi30k(path, split, lang)
            paths.append(path)
        return [(paths[0], paths[1])]
    else:  # corpus == "text"; the train split's prefix wins where split names coincide
        fields = {cfg.test_split: "test_prefix", cfg.eval_split: "eval_prefix", cfg.train_split: "train_prefix"}
        field = fields.get(split)
        prefix = getattr(cfg, field) if field else None
        if prefix is None:
            raise ValueError(
                f"split {split!r}: corpus 'text' needs train_prefix (for {cfg.train_split!r}), "
                f"eval_prefix (for {cfg.eval_split!r}) or test_prefix (for {cfg.test_split!r}), "
                "or a newstest2013/newstest2014 split"
            )
        # A relative prefix is looked up in the current directory, then in the data directory.
        if any(c in prefix for c in "*?["):
            patterns = [prefix] if Path(prefix).is_absolute() else [prefix, os.path.join(glob.escape(str(data_dir)),
                                                                                            prefix)]
            for pattern in patterns:
                shards = _glob_shards(pattern, langs, field)
                if shards:
                    return shards
            tried = ", ".join(f"{p}.{lang}[.gz]" for p in patterns for lang in langs)
            raise FileNotFoundError(f"split {split!r}: {field}={prefix!r} matches no files "
                                    f"(tried {tried}; --data_dir={data_dir})")
        prefixes = [Path(prefix)] if Path(prefix).is_absolute() else [Path(prefix), data_dir / prefix]
    for prefix in prefixes:
        found = [_find(prefix, lang) for lang in langs]
        if all(found):
            return [(found[0], found[1])]
    tried = ", ".join(f"{p}.{lang}[.gz]" for p in prefixes for lang in langs)
    raise FileNotFoundError(f"split {split!r}: missing files (tried {tried}; --data_dir={data_dir})")


def split_files(cfg: DataConfig, split: str, data_dir: Path) -> Tuple[Path, Path]:
    """The (source, target) files of a local-text split held in one pair of files (see :func:`split_shards`)."""
    shards = split_shards(cfg, split, data_dir)
    if len(shards) > 1:
        raise ValueError(f"split {split!r} is sharded into {len(shards)} file pairs ({shards[0][0]}, ...); "
                         "read it with load_split")
    return shards[0]


def fingerprint(cfg: DataConfig, split: str, data_dir=None) -> str:
    """A short hash naming a split's files (resolved paths and sizes, as before streaming; TFDS name).

    Keys the tokenizer cache: a copied or touched corpus keeps its tokenizer, so a run resumes.
    """
    if cfg.target_langs:
        return multilingual.fingerprint(TEXT, cfg, split, data_dir)
    if cfg.corpus in TFDS_NAMES and not split.startswith("newstest"):
        text = f"tfds:{tfds_name(cfg)}:{split}"
    else:
        return validation.fingerprint(split_shards(cfg, split, resolve_data_dir(data_dir)), mtime=False)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _non_empty(source: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
    return tf.logical_and(tf.strings.strip(source) != "", tf.strings.strip(target) != "")


def tfds_name(cfg: DataConfig) -> str:
    """The TFDS builder of a TFDS corpus and language pair, e.g. ``wmt14_translate/fr-en`` for wmt14 en->fr.

    Raises ValueError naming source_lang or target_lang when the corpus has no such pair.
    """
    builders = TFDS_NAMES[cfg.corpus]
    known = ", ".join(f"en-{lang}" for lang in builders)
    for field, lang, other in (("source_lang", cfg.source_lang, cfg.target_lang),
                               ("target_lang", cfg.target_lang, cfg.source_lang)):
        if lang != "en" and (lang not in builders or other != "en"):
            raise ValueError(f"{field}: corpus {cfg.corpus} has {known} (either direction), "
                             f"got {cfg.source_lang}-{cfg.target_lang}")
    return builders[cfg.target_lang if cfg.source_lang == "en" else cfg.source_lang]


def _load_tfds(cfg: DataConfig, split: str) -> Tuple[tf.data.Dataset, CorpusStats]:
    import tensorflow_datasets as tfds

    name = tfds_name(cfg)
    try:
        examples = tfds.load(  # {"en": string, "de" or "fr": string}
            name, split=split, shuffle_files=split == cfg.train_split,  # WMT14's files are sorted by source corpus
            read_config=tfds.ReadConfig(shuffle_seed=cfg.seed),
        )
    except Exception as e:  # not prepared and not downloadable: say so in one line
        raise FileNotFoundError(
            f"TFDS {name} split {split!r} is not prepared and could not be downloaded or built "
            f"({type(e).__name__}: {e}); prepare it where TFDS_DATA_DIR points"
        ) from e
    pairs = examples.map(lambda ex: (ex[cfg.source_lang], ex[cfg.target_lang]),
                         num_parallel_calls=tf.data.AUTOTUNE)
    pairs = pairs.filter(_non_empty)
    stats = CorpusStats(f"tfds:{name}:{split}:{cfg.source_lang}", f"tfds:{name}:{split}:{cfg.target_lang}",
                        pairs_read=None, empty_skipped=None)
    return pairs, stats


def _text_pairs(shards: List[Tuple[Path, Path]], training: bool, seed: int) -> tf.data.Dataset:
    """(source, target) lines of aligned shard pairs, streamed; several shards are interleaved.

    Training shuffles the shard order with ``seed`` and takes one line from each
    of up to 16 open shards in turn; other splits read the shards in order.
    """
    def lines(path):  # a scalar string path (Python or tensor) -> its lines
        compression = tf.where(tf.strings.regex_full_match(path, r".*\.gz"), "GZIP", "")
        return tf.data.TextLineDataset(path, compression_type=compression)

    def pair(source, target):
        return tf.data.Dataset.zip((lines(source), lines(target)))

    if len(shards) == 1:
        pairs = pair(tf.constant(str(shards[0][0])), tf.constant(str(shards[0][1])))
    else:
        if training:
            shards = list(shards)
            random.Random(seed).shuffle(shards)
        files = tf.data.Dataset.from_tensor_slices(([str(s) for s, _ in shards], [str(t) for _, t in shards]))
        pairs = files.interleave(pair, cycle_length=min(len(shards), 16) if training else 1, block_length=1)
    return pairs.filter(_non_empty)


def load_split(cfg: DataConfig, split: str, data_dir=None, workdir=None) -> Tuple[tf.data.Dataset, CorpusStats]:
    """A split as a dataset of (source, target) scalar strings, and what loading it read.

    ``data_dir`` defaults to :func:`resolve_data_dir`; it is not used by TFDS
    corpora (TFDS keeps its own ``TFDS_DATA_DIR``). Local text is checked first
    (``validation.check``); the result is cached under ``<workdir>/corpus`` when
    ``workdir`` is given, and for the process in any case.
    """
    if cfg.target_langs:  # several targets in one model: each direction's pairs, sources tagged, in turn
        return multilingual.load_split(TEXT, cfg, split, data_dir, workdir)
    if cfg.corpus in TFDS_NAMES and not split.startswith("newstest"):
        return _load_tfds(cfg, split)
    shards = split_shards(cfg, split, resolve_data_dir(data_dir))
    check = validation.check(shards, cache_dir=WorkDir(workdir).corpus_cache if workdir else None)
    more = f" (+{len(shards) - 1} more shards)" if len(shards) > 1 else ""
    stats = CorpusStats(f"{shards[0][0]}{more}", f"{shards[0][1]}{more}", pairs_read=check.pairs_read,
                        empty_skipped=check.empty_skipped)
    return _text_pairs(shards, split == cfg.train_split, cfg.seed), stats


class TextCorpus(Corpus):
    """Parallel text: Multi30k, local files (``text``) and the TFDS WMT corpora (the module docstring)."""

    def load_split(self, cfg, split, data_dir=None, workdir=None):
        return load_split(cfg, split, data_dir, workdir)

    def fingerprint(self, cfg, split, data_dir=None):
        return fingerprint(cfg, split, data_dir)

    def training_fingerprint(self, cfg, data_dir=None):
        """{"tfds": builder:split} for a TFDS corpus, else {"files": {path: files.file_fingerprint}}."""
        split = cfg.train_split
        if cfg.target_langs:
            return multilingual.training_fingerprint(self, cfg, data_dir)
        if cfg.corpus in TFDS_NAMES and not split.startswith("newstest"):
            return {"tfds": f"{tfds_name(cfg)}:{split}"}
        shards = split_shards(cfg, split, resolve_data_dir(data_dir))
        return {"files": {str(p.resolve()): file_fingerprint(p) for shard in shards for p in shard}}

    def tokenizer_text(self, cfg, data_dir, workdir, side):
        """Local text: the seeded sample of at most ``tokenizer_sample_lines`` sentences that the corpus check
        draws and caches under ``<workdir>/corpus`` (all of Multi30k's 58,000 training sentences, in file
        order); TFDS corpora: a shuffled prefix of that many pairs. Several target languages: each direction's,
        the tags (``multilingual``) atomic words of the source side."""
        if cfg.target_langs:
            return multilingual.tokenizer_text(self, cfg, data_dir, workdir, side)
        if cfg.corpus not in TFDS_NAMES:
            shards = split_shards(cfg, cfg.train_split, resolve_data_dir(data_dir))
            check = validation.check(shards, cache_dir=WorkDir(workdir).corpus_cache,
                                     sample_sentences=cfg.tokenizer_sample_lines, seed=cfg.seed)
            if side is None:
                return [Path(check.sample_path)], ()
            return _side_of_sample(Path(check.sample_path), ("source", "target").index(side)), ()
        pairs, _ = load_split(cfg, cfg.train_split, data_dir)
        pairs = pairs.shuffle(100_000, seed=cfg.seed).take(cfg.tokenizer_sample_lines)  # millions of pairs

        def text():
            for sources, targets in pairs.batch(4096).as_numpy_iterator():
                for x, y in zip(sources, targets):
                    if side != "target":
                        yield x.decode("utf-8")
                    if side != "source":
                        yield y.decode("utf-8")

        return text(), ()


def _side_of_sample(path: Path, parity: int) -> Iterator[str]:
    """One side of the corpus check's sample (its lines alternate source, target: ``validation``)."""
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i % 2 == parity and line.strip():
                yield line.rstrip("\n")


TEXT = TextCorpus()
