"""The Penn Treebank's WSJ trees as a parsing corpus (§6.3): files, splits, (sentence, linearized tree) pairs.

    treebank_path(cfg, data_dir)             -> Path   DataConfig.treebank, resolved
    split_names(cfg, split, data_dir)        -> [str]  the .mrg files of a split
    load(cfg, split, data_dir)               -> ParseSplit(trees, sources, targets, stats)

The treebank is a directory of ``.mrg`` files (searched recursively; LDC99T42
keeps them in ``parsed/mrg/wsj/<section>/wsj_<section><nn>.mrg``) or a zip of
them, named by ``DataConfig.treebank``; a relative path is looked up in the
data directory (``--data_dir``, ``KT_DATA_DIR``, else ``../shared/data``). The
default is the free ~5% sample ``ptb-wsj-sample/treebank.zip`` (fetched from NLTK's data when missing; 3,914
sentences, files wsj_0001-wsj_0199, sections 00-01).

Splits, by file (articles never straddle two splits):

* ``train``, ``dev``, ``test``: the standard WSJ split (sections 02-21, 22, 23)
  when the treebank holds those sections, else the sample's split by file
  number: wsj_0001-0179, wsj_0180-0189, wsj_0190-0199.
* ``sections:02-21``, ``sections:22,23``, ``files:0001-0179``: explicit.

Each tree is cleaned (``trees.clean``: no empty elements or function tags);
the source is its words joined by spaces (PTB tokens as the treebank writes
them: ``-LRB-`` for "("), the target its linearization ("(S (NP XX XX ) ...").
A tree with no word left (only empty elements) is skipped and counted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import tensorflow as tf

from keras_transformer.data import corpora, fetch
from keras_transformer.tasks.parsing import trees as trees_lib

SAMPLE = "ptb-wsj-sample/treebank.zip"  # the default treebank, in the data directory; downloaded when missing
SAMPLE_URL = ("https://raw.githubusercontent.com/nltk/nltk_data/5db857e6f7df11eabb5e5665836db9ec8df07e28/packages/"
              "corpora/treebank.zip")  # NLTK's ~5% WSJ sample (ptb-wsj-sample/SOURCE.md)
SAMPLE_SHA256 = "9da92d76c3666cfb6cddeaed0f7e86b344cce0f0928a286d439e555f19c37399"
STANDARD_SECTIONS = {"train": tuple(range(2, 22)), "dev": (22,), "test": (23,)}  # the WSJ split of §6.3
SAMPLE_FILES = {"train": (1, 179), "dev": (180, 189), "test": (190, 199)}  # wsj_NNNN numbers, inclusive
_NAME = re.compile(r"wsj_(\d{2})(\d{2})\.mrg$")
_EXPLICIT = re.compile(r"^(sections|files):([\d,\-]+)$")
_memo: Dict[Tuple[str, int, int], Dict[str, str]] = {}  # (path, size, mtime) -> {file name: text}


def treebank_path(cfg, data_dir) -> Path:
    """``cfg.treebank`` (default: the WSJ sample, fetched from NLTK's data into ``data_dir`` when it is not there),
    relative paths in ``data_dir``; FileNotFoundError naming it."""
    value = cfg.treebank or SAMPLE
    if value == SAMPLE and Path(data_dir).is_dir() and not (Path(data_dir) / SAMPLE).exists():
        fetch.download(SAMPLE_URL, Path(data_dir) / SAMPLE, SAMPLE_SHA256, "a directory holding ptb-wsj-sample/")
    path = Path(value).expanduser()
    candidates = [path] if path.is_absolute() else [Path(data_dir) / path, path]
    for candidate in candidates:
        if candidate.exists():
            return candidate
    tried = " or ".join(str(c) for c in candidates)
    raise FileNotFoundError(f"treebank: {value} not found (tried {tried}); give a directory of .mrg files or a zip "
                            "of them (the full WSJ treebank is LDC99T42)")


def read_files(path: Path) -> Dict[str, str]:
    """{file name (no folders): text} of every ``.mrg`` file in a directory (recursively), a zip, or one file."""
    path = Path(path)
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key in _memo:
        return _memo[key]
    files: Dict[str, str] = {}

    def add(name: str, data: bytes, where: str) -> None:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("latin-1")  # a few treebank copies are Latin-1; ASCII in practice
        base = name.rsplit("/", 1)[-1]
        if base in files:
            raise ValueError(f"treebank: {where} holds two files named {base}")
        files[base] = text

    if path.is_file() and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            for info in sorted(archive.infolist(), key=lambda i: i.filename):
                if info.filename.endswith(".mrg") and not info.is_dir():
                    add(info.filename, archive.read(info), f"{path}!{info.filename}")
    elif path.is_file():
        add(path.name, path.read_bytes(), str(path))
    else:
        for file in sorted(path.rglob("*.mrg")):
            add(file.name, file.read_bytes(), str(file))
    if not files:
        raise ValueError(f"treebank: {path} holds no .mrg files")
    _memo[key] = files
    return files


def _numbers(spec: str, field: str) -> List[Tuple[int, int]]:
    """ "02-21,23" -> [(2, 21), (23, 23)]."""
    ranges = []
    for part in spec.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"{field}: bad range {part!r} (e.g. sections:02-21 or files:0001-0179)")
        ranges.append((int(low), int(high or low)))
    return ranges


def split_names(cfg, split: str, files: Dict[str, str], field: str = "split") -> List[str]:
    """The file names of ``split`` among ``files`` (module docstring), sorted; ValueError naming ``field``."""
    numbered = {}
    for name in files:
        match = _NAME.search(name)
        if match is None:
            raise ValueError(f"{field}: {name} is not named wsj_SSNN.mrg, so the treebank cannot be split by "
                             "section or file")
        numbered[name] = (int(match.group(1)), int(match.group(1) + match.group(2)))
    explicit = _EXPLICIT.match(split)
    if explicit:
        by, ranges = explicit.group(1), _numbers(explicit.group(2), field)
        index = 0 if by == "sections" else 1
        chosen = [n for n, key in numbered.items() if any(lo <= key[index] <= hi for lo, hi in ranges)]
    elif split in STANDARD_SECTIONS:
        sections = {section for section, _ in numbered.values()}
        if set(range(2, 24)) <= sections:  # the full WSJ treebank: the standard split
            chosen = [n for n, (section, _) in numbered.items() if section in STANDARD_SECTIONS[split]]
        else:  # the sample: by file number
            lo, hi = SAMPLE_FILES[split]
            chosen = [n for n, (_, number) in numbered.items() if lo <= number <= hi]
    else:
        raise ValueError(f"{field}: unknown treebank split {split!r}; expected train, dev, test, sections:SS-SS or "
                         "files:NNNN-NNNN")
    if not chosen:
        raise ValueError(f"{field}: treebank split {split!r} holds no files")
    return sorted(chosen)


@dataclasses.dataclass(frozen=True)
class ParseSplit:
    """A split's cleaned trees and their (sentence, linearized tree) pairs, in file order."""

    trees: Tuple[trees_lib.Tree, ...]
    sources: Tuple[str, ...]  # words joined by spaces
    targets: Tuple[str, ...]  # linearized trees
    files: Tuple[str, ...]
    trees_read: int
    empty_skipped: int  # trees with no word left after cleaning


def _split_field(cfg, split: str) -> str:
    fields = {cfg.train_split: "train_split", cfg.eval_split: "eval_split", cfg.test_split: "test_split"}
    return fields.get(split, "split")


def load(cfg, split: str, data_dir, path: Optional[Path] = None) -> ParseSplit:
    """The trees and pairs of ``split`` of the treebank (``path`` or ``cfg.treebank`` in ``data_dir``)."""
    path = Path(path) if path is not None else treebank_path(cfg, data_dir)
    files = read_files(path)
    names = split_names(cfg, split, files, _split_field(cfg, split))
    cleaned, read = [], 0
    for name in names:
        for tree in trees_lib.read_trees(files[name], f"{path}:{name}"):
            read += 1
            tree = trees_lib.clean(tree)
            if tree is not None:
                cleaned.append(tree)
    return ParseSplit(
        trees=tuple(cleaned),
        sources=tuple(" ".join(trees_lib.words(t)) for t in cleaned),
        targets=tuple(trees_lib.linearize(t, cfg.tree_leaves == "tag") for t in cleaned),
        files=tuple(names), trees_read=read, empty_skipped=read - len(cleaned))


def load_file(path, where: Optional[str] = None) -> List[trees_lib.Tree]:
    """The cleaned trees of one bracketed file (or every .mrg file of a directory or zip), in order."""
    files = read_files(Path(path))
    out = []
    for name in sorted(files):
        out += [t for t in (trees_lib.clean(tree) for tree in trees_lib.read_trees(files[name], where or name))
                if t is not None]
    return out


def fingerprint(cfg, split: str, data_dir) -> str:
    """A short hash of the treebank (resolved path and size) and the split's file names: keys the tokenizer."""
    path = treebank_path(cfg, data_dir)
    size = path.stat().st_size if path.is_file() else sum(f.stat().st_size for f in path.rglob("*.mrg"))
    names = split_names(cfg, split, read_files(path), _split_field(cfg, split))
    text = f"{path.resolve()}:{size}:{','.join(names)}"
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def target_symbols(split: ParseSplit) -> List[str]:
    """The target side's tokens, sorted: ``(LABEL`` of every constituent label in ``split``, ``)``, the slot and
    (for tag leaves) ``@TAG`` of every POS tag in ``split``."""
    found = {f"({label}" for tree in split.trees for label in trees_lib.labels(tree)}
    leaves = {token for target in split.targets for token in target.split() if token.startswith(trees_lib.TAG_LEAF)}
    return sorted(found) + [trees_lib.CLOSE, trees_lib.SLOT] + sorted(leaves)


class TreebankCorpus(corpora.Corpus):
    """The parsing task's reader (``data.corpora.Corpus``): (sentence, linearized tree) pairs of a treebank, a
    few 10k trees read and linearized in memory; the tokenizer trains on both sides with every target symbol
    ("(NP", ")", the slot) one piece."""

    def load_split(self, cfg, split, data_dir=None, workdir=None):
        data_dir = corpora.resolve_data_dir(data_dir)
        parsed = load(cfg, split, data_dir)
        name = f"{treebank_path(cfg, data_dir)}:{split}"
        stats = corpora.CorpusStats(f"{name} (sentences)", f"{name} (linearized trees)",
                                    pairs_read=parsed.trees_read, empty_skipped=parsed.empty_skipped)
        return tf.data.Dataset.from_tensor_slices((list(parsed.sources), list(parsed.targets))), stats

    def fingerprint(self, cfg, split, data_dir=None):
        return fingerprint(cfg, split, corpora.resolve_data_dir(data_dir))

    def tokenizer_text(self, cfg, data_dir, workdir, side):
        split = load(cfg, cfg.train_split, corpora.resolve_data_dir(data_dir))
        return list(split.sources + split.targets), target_symbols(split)

    def tokenizer_key(self, cfg):  # target_symbols of the training trees
        if cfg.tree_leaves == "tag":
            return {"atomic_words": "treebank labels, ), XX and @TAG leaves"}
        return {"atomic_words": "treebank labels, ) and XX"}


TREEBANK = TreebankCorpus()
