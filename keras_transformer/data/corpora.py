"""Parallel corpora as ``tf.data`` datasets of raw (source, target) strings.

Three kinds of corpus, chosen by ``DataConfig.corpus``:

* ``wmt14`` / ``wmt_t2t``: WMT14 English-German through TFDS
  (``wmt14_translate/de-en``, and ``wmt_t2t_translate/de-en``, the variant the
  paper's tensor2tensor code trained on); ``wmt14`` with en/fr is English-French
  (``wmt14_translate/fr-en``, §5.1). Splits: train, validation
  (newstest2013), test (newstest2014).
* ``multi30k``: Multi30k Task 1 En-De, ``<data_dir>/multi30k-task1-en-de/
  <split>.<lang>.gz`` (splits train, val, test_2016_flickr); downloaded from
  the dataset's GitHub repository when the files are absent.
* ``text``: a pair of aligned local files ``<prefix>.<lang>`` or
  ``<prefix>.<lang>.gz`` per split (``DataConfig.train_prefix/eval_prefix``).

Any corpus also loads ``newstest2013`` / ``newstest2014`` from
``<data_dir>/wmt-newstest-en-de/`` as evaluation splits.

Bad local input never passes silently: a line-count mismatch or invalid UTF-8
raises ``ValueError`` naming the file(s); empty or whitespace-only lines skip
the pair and are counted in :class:`CorpusStats` and logged.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import List, Optional, Tuple, Union

import tensorflow as tf
from absl import logging

from keras_transformer.config import DataConfig

MULTI30K_DIR = "multi30k-task1-en-de"
NEWSTEST_DIR = "wmt-newstest-en-de"
MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{split}.{lang}.gz"
MULTI30K_SPLITS = ("train", "val", "test_2016_flickr", "test_2017_flickr", "test_2018_flickr", "test_2017_mscoco")
# TFDS builder of each corpus, by the pair's non-English language (the other side is English).
TFDS_NAMES = {
    "wmt14": {"de": "wmt14_translate/de-en", "fr": "wmt14_translate/fr-en"},  # §5.1: WMT 2014 En-De and En-Fr
    "wmt_t2t": {"de": "wmt_t2t_translate/de-en"},
}
_LANGS = ("en", "de")


@dataclasses.dataclass(frozen=True)
class CorpusStats:
    """What loading one split read and skipped.

    For TFDS corpora the counts are ``None``: the 4.5M WMT14 pairs are not read
    up front; empty pairs are dropped in-graph as the dataset is iterated.
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


def read_lines(path: Path) -> List[str]:
    """One sentence per line, UTF-8, plain or gzip. Splits on '\\n' only (not on U+2028 etc.)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ValueError(f"{path}: invalid UTF-8 on line {line} (byte {e.start})") from None
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it does not start a new one
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_parallel_files(source_path, target_path) -> Tuple[List[str], List[str], CorpusStats]:
    """Reads two aligned files; returns (sources, targets, stats) without empty pairs.

    Raises ValueError when the line counts differ or a file is not UTF-8, and
    FileNotFoundError when a file is missing.
    """
    source_path, target_path = Path(source_path), Path(target_path)
    for path in (source_path, target_path):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file")
    sources, targets = read_lines(source_path), read_lines(target_path)
    if len(sources) != len(targets):
        raise ValueError(
            f"line counts differ: {source_path} has {len(sources)} lines, {target_path} has {len(targets)}"
        )
    keep, skipped = [], []
    for i, (x, y) in enumerate(zip(sources, targets)):
        (keep if x.strip() and y.strip() else skipped).append(i)
    if skipped:
        shown = ", ".join(str(i + 1) for i in skipped[:10]) + (", ..." if len(skipped) > 10 else "")
        logging.warning(
            "%s / %s: skipped %d pairs with an empty or whitespace-only side (lines %s)",
            source_path, target_path, len(skipped), shown,
        )
        sources = [sources[i] for i in keep]
        targets = [targets[i] for i in keep]
    stats = CorpusStats(str(source_path), str(target_path), pairs_read=len(keep) + len(skipped),
                        empty_skipped=len(skipped))
    return sources, targets, stats


def _download_multi30k(path: Path, split: str, lang: str) -> None:
    """Fetches one Multi30k file from the dataset's GitHub repository into ``path``."""
    url = MULTI30K_URL.format(split=split, lang=lang)
    logging.info("downloading %s -> %s", url, path)
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            data = response.read()
    except (urllib.error.URLError, OSError) as e:
        raise FileNotFoundError(
            f"{path} is missing and downloading {url} failed ({e}); "
            "point --data_dir or KT_DATA_DIR at a directory holding multi30k-task1-en-de/"
        ) from None
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    partial.write_bytes(data)
    os.replace(partial, path)  # never leaves a truncated file under the final name


def _find(prefix: Path, lang: str) -> Optional[Path]:
    for path in (Path(f"{prefix}.{lang}"), Path(f"{prefix}.{lang}.gz")):
        if path.is_file():
            return path
    return None


def split_files(cfg: DataConfig, split: str, data_dir: Path) -> Tuple[Path, Path]:
    """The (source, target) files of a local-text split, downloading Multi30k if needed."""
    langs = (cfg.source_lang, cfg.target_lang)
    if split.startswith("newstest"):
        prefixes = [data_dir / NEWSTEST_DIR / split]
    elif cfg.corpus == "multi30k":
        for name, lang in zip(("source_lang", "target_lang"), langs):
            if lang not in _LANGS:
                raise ValueError(f"{name}: multi30k has en and de only, got {lang!r}")
        paths = []
        for lang in langs:  # <split>.<lang> or <split>.<lang>.gz; fetched as .gz when neither is there
            path = _find(data_dir / MULTI30K_DIR / split, lang) or data_dir / MULTI30K_DIR / f"{split}.{lang}.gz"
            if not path.is_file():
                if split not in MULTI30K_SPLITS:
                    raise FileNotFoundError(f"{path}: no such file (--data_dir={data_dir}); known: {MULTI30K_SPLITS}")
                _download_multi30k(path, split, lang)
            paths.append(path)
        return paths[0], paths[1]
    else:  # corpus == "text"
        prefix = {cfg.train_split: cfg.train_prefix, cfg.eval_split: cfg.eval_prefix}.get(split)
        if prefix is None:
            raise ValueError(
                f"split {split!r}: corpus 'text' needs train_prefix (for {cfg.train_split!r}) or "
                f"eval_prefix (for {cfg.eval_split!r}), or a newstest2013/newstest2014 split"
            )
        # A relative prefix is looked up in the current directory, then in the data directory.
        prefixes = [Path(prefix)] if Path(prefix).is_absolute() else [Path(prefix), data_dir / prefix]
    for prefix in prefixes:
        found = [_find(prefix, lang) for lang in langs]
        if all(found):
            return found[0], found[1]
    tried = ", ".join(f"{p}.{lang}[.gz]" for p in prefixes for lang in langs)
    raise FileNotFoundError(f"split {split!r}: missing files (tried {tried}; --data_dir={data_dir})")


def fingerprint(cfg: DataConfig, split: str, data_dir=None) -> str:
    """A short hash naming a split's content (paths and sizes; TFDS name), to key caches."""
    if cfg.corpus in TFDS_NAMES and not split.startswith("newstest"):
        text = f"tfds:{tfds_name(cfg)}:{split}"
    else:
        files = split_files(cfg, split, resolve_data_dir(data_dir))
        text = "|".join(f"{p.resolve()}:{p.stat().st_size}" for p in sorted(files))
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


def load_split(cfg: DataConfig, split: str, data_dir=None) -> Tuple[tf.data.Dataset, CorpusStats]:
    """A split as a dataset of (source, target) scalar strings, and what loading it read.

    ``data_dir`` defaults to :func:`resolve_data_dir`; it is not used by TFDS
    corpora (TFDS keeps its own ``TFDS_DATA_DIR``).
    """
    if cfg.corpus in TFDS_NAMES and not split.startswith("newstest"):
        return _load_tfds(cfg, split)
    source_path, target_path = split_files(cfg, split, resolve_data_dir(data_dir))
    sources, targets, stats = read_parallel_files(source_path, target_path)
    pairs = tf.data.Dataset.from_tensor_slices(
        (tf.constant(sources, tf.string, shape=[len(sources)]), tf.constant(targets, tf.string, shape=[len(targets)]))
    )
    return pairs, stats
