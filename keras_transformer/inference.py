"""Translating many lines with either kind of model: an exported SavedModel or a training work directory.

    load_translator(model_arg, checkpoint="latest", data_dir=None) -> LoadedTranslator
    translate_lines(translator, lines, batch_size=32, beam_size=None, alpha=None, extra_length=None)
        -> (translations [N] list of str, scores [N] float32)
    translate_nbest(translator, lines, nbest, batch_size=32, ...) -> NBest(translations [N][<=n], scores [N][<=n])
    format_nbest(NBest) -> lines "i ||| translation ||| score";  format_scored(...) -> lines "score<TAB>translation"

Both kinds run the same ``export.Translator`` graph: a SavedModel through its
``translate_with_options`` signature, a work directory through a fresh
``Translator`` over the restored checkpoint. Lines are translated in batches of
similar length (sorted by length, so short lines are not padded to long ones)
and returned in their original order. A line break the model might emit (a byte
piece: newline, or any other character ``str.splitlines`` breaks at) is replaced
by a space, so output line i is always the translation of input line i.

Scores are log P(Y|X) / lp(|Y|) with GNMT's lp(n) = ((5 + n) / 6)^α, |Y|
counting the subwords and EOS (``keras_transformer.decoding``); ``kt-score``
gives the same number for a translation it is handed.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from keras_transformer import engines, evaluation, export
from keras_transformer.decoding import NEG_INF

EMPTY_SLOT_SCORE = NEG_INF / 2  # an n-best slot scored at or below this is empty (the search scores it NEG_INF)


class LoadedTranslator(NamedTuple):
    fn: Callable  # (inputs [B] string, beam_size, alpha, extra_length) -> {"translations", "scores", ...}
    defaults: Tuple[int, float, int]  # the recipe's (beam_size, alpha, extra_length)
    description: str  # what was loaded, for logs
    owner: object  # the loaded SavedModel or the Translator: keeps the function's variables alive


def is_saved_model(path) -> bool:
    return Path(path, "saved_model.pb").is_file()


def load_translator(model_arg, checkpoint: str = "latest", data_dir=None) -> LoadedTranslator:
    """A SavedModel directory (from ``kt-export``), a CTranslate2 directory (``kt-export --format=ctranslate2``,
    served by ``engines.ctranslate2_translate`` with the same inputs and outputs) or a training work directory
    (``checkpoint`` picks the weights)."""
    path = Path(model_arg)
    if is_saved_model(path):
        if checkpoint != "latest":
            raise ValueError(f"--checkpoint: {path} is an exported SavedModel; checkpoints apply to work directories")
        import tensorflow_text  # noqa: F401  (registers the SentencePiece ops the text signatures use)

        loaded = export.load_saved_model(path)
        if "parse_with_options" in loaded.signatures:
            raise ValueError(f"--model: {path} is a constituency parser; kt-parse and kt-evaluate-parser serve it")
        if "translate_with_options" not in loaded.signatures:
            raise ValueError(f"--model: {path} has no text signature (exported with --ids_only?)")
        try:
            info = json.loads(Path(path, "assets", export.EXPORT_INFO).read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}/assets/{export.EXPORT_INFO}: unreadable ({e.strerror or e}); not a complete "
                             "kt-export SavedModel") from None
        decode = info["decode"]
        signature = loaded.signatures["translate_with_options"]

        def call(inputs, beam_size, alpha, extra_length):  # signatures take keyword arguments only
            return signature(inputs=inputs, beam_size=beam_size, alpha=alpha, extra_length=extra_length)

        defaults = (decode["beam_size"], decode["alpha"], decode["extra_length"])
        return LoadedTranslator(call, defaults, str(path), loaded)
    if engines.is_ctranslate2_model(path):
        if checkpoint != "latest":
            raise ValueError(f"--checkpoint: {path} is a CTranslate2 export; checkpoints apply to work directories")
        try:
            from keras_transformer.engines import ctranslate2_translate

            translator = ctranslate2_translate.load(path)
        except ImportError as e:
            raise ValueError(f"{path} is a CTranslate2 export, but {e}") from None
        return LoadedTranslator(translator.translate_with_options, translator.defaults, translator.description,
                                translator)
    if not path.is_dir():
        raise FileNotFoundError(f"--model: {path} is neither a SavedModel nor a training work directory")
    from keras_transformer import checkpoints

    model, recipe, tok = checkpoints.load_for_inference(path, checkpoint, data_dir)
    translator = export.Translator(model, tok, recipe)
    d = recipe.decode
    return LoadedTranslator(translator.translate_with_options, (d.beam_size, d.alpha, d.extra_length),
                            f"{path} ({checkpoints.resolve_checkpoint(path, checkpoint)})", translator)


def length_batches(lines: Sequence[str], batch_size: int) -> List[List[int]]:
    """Indices of ``lines`` in batches of at most ``batch_size``, by increasing length (words, then characters)."""
    if batch_size < 1:
        raise ValueError(f"batch_size: must be >= 1, got {batch_size}")
    order = sorted(range(len(lines)), key=lambda i: (len(lines[i].split()), len(lines[i])))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def _resolve_options(translator: LoadedTranslator, beam_size, alpha, extra_length) -> Tuple[int, float, int]:
    """(beam_size, alpha, extra_length) with None options taken from the recipe's §6.1 values."""
    return tuple(d if v is None else v for v, d in zip((beam_size, alpha, extra_length), translator.defaults))


def _batches(translator: LoadedTranslator, lines: Sequence[str], batch_size: int, options: Tuple[int, float, int]):
    """Yields (indices of the batch's lines, the translator's outputs) over length-sorted batches."""
    beam_size, alpha, extra_length = options
    tensors = (tf.constant(beam_size, tf.int32), tf.constant(alpha, tf.float32), tf.constant(extra_length, tf.int32))
    for batch in length_batches(lines, batch_size):
        yield batch, translator.fn(tf.constant([lines[i] for i in batch], tf.string), *tensors)


# Every character str.splitlines() breaks at: none may split an output line, whatever reads it.
_LINE_BREAKS = {ord(c): " " for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}


def _one_line(text: bytes) -> str:
    """UTF-8 bytes -> str with each line break a space, so that output line i stays the translation of line i."""
    return text.decode("utf-8", errors="replace").translate(_LINE_BREAKS)


def translate_lines(translator: LoadedTranslator, lines: Sequence[str], batch_size: int = 32,
                    beam_size: Optional[int] = None, alpha: Optional[float] = None,
                    extra_length: Optional[int] = None) -> Tuple[List[str], np.ndarray]:
    """Translations and scores of ``lines``, in input order. None options take the recipe's §6.1 values."""
    options = _resolve_options(translator, beam_size, alpha, extra_length)
    translations: List[Optional[str]] = [None] * len(lines)
    scores = np.zeros([len(lines)], np.float32)
    for batch, out in _batches(translator, lines, batch_size, options):
        for i, text, score in zip(batch, out["translations"].numpy(), out["scores"].numpy()):
            translations[i] = _one_line(text)
            scores[i] = score
    return translations, scores


class NBest(NamedTuple):
    translations: List[List[str]]  # [N][<= n]: the n best hypotheses of each input line, best first
    scores: List[List[float]]  # [N][<= n]: their scores log P(Y|X) / lp(|Y|), descending


def translate_nbest(translator: LoadedTranslator, lines: Sequence[str], nbest: int, batch_size: int = 32,
                    beam_size: Optional[int] = None, alpha: Optional[float] = None,
                    extra_length: Optional[int] = None) -> NBest:
    """The ``nbest`` best hypotheses of each line and their scores, in input order, best first.

    The beam search keeps the K = ``beam_size`` best finished hypotheses of each input, so 1 <= nbest <= K
    (a ValueError naming ``nbest`` otherwise). A score is log P(Y|X) / lp(|Y|), lp(n) = ((5 + n) / 6)^α
    (GNMT), |Y| counting the subwords and EOS; ``kt-score`` computes the same number for a given translation.
    An empty n-best slot (a search that stopped with fewer than K finished hypotheses returns an empty string
    scored NEG_INF = -1e9 there) is left out, so a line may get fewer than ``nbest`` hypotheses; a real
    empty translation (EOS first) has a finite score and is kept. None options take the recipe's §6.1 values.
    """
    options = _resolve_options(translator, beam_size, alpha, extra_length)
    if not 1 <= nbest <= options[0]:
        raise ValueError(f"nbest: must be between 1 and the beam size K = {options[0]}, got {nbest}")
    translations: List[List[str]] = [[] for _ in lines]
    scores: List[List[float]] = [[] for _ in lines]
    for batch, out in _batches(translator, lines, batch_size, options):
        texts = out["nbest_translations"].numpy()[:, :nbest]  # [B, n]
        values = out["nbest_scores"].numpy()[:, :nbest]  # [B, n]
        for i, row_texts, row_scores in zip(batch, texts, values):
            kept = [(_one_line(t), float(v)) for t, v in zip(row_texts, row_scores) if v > EMPTY_SLOT_SCORE]
            translations[i], scores[i] = [t for t, _ in kept], [v for _, v in kept]
    return NBest(translations, scores)


def format_nbest(result: NBest) -> List[str]:
    """The Moses/Marian n-best format: ``i ||| translation ||| score`` per hypothesis, i the 0-based input line,
    the hypotheses of a line together and best first; scores with 6 decimals."""
    return [f"{i} ||| {text} ||| {score:.6f}"
            for i, (texts, scores) in enumerate(zip(result.translations, result.scores))
            for text, score in zip(texts, scores)]


def format_scored(translations: Sequence[str], scores: Sequence[float]) -> List[str]:
    """``score<TAB>translation`` per line (kt-translate --with_scores); scores with 6 decimals."""
    return [f"{float(score):.6f}\t{text}" for text, score in zip(translations, scores)]


def check_output(path) -> None:
    """Raise ValueError when ``path`` ('-': stdout) cannot take output: stdout closed, a directory, a parent that is
    a file. Called before the work whose result goes there, so that no translation is done for nothing."""
    if str(path) == "-":
        if sys.stdout is None:
            raise ValueError("stdout is closed; give a file with --output=FILE")
        return
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a directory; give a file name")
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise ValueError(f"{path}: {parent} is not a directory")


def write_lines(path, lines: Sequence[str]) -> None:
    """One line each, UTF-8, final newline; '-' is stdout.

    A file is written whole or not at all: into ``<path>.partial-<pid>`` beside it, then renamed over ``path``,
    so a full disk or a kill never leaves half an output or destroys an older file of that name. OSError
    (naming the file) when it cannot be written.
    """
    text = "".join(f"{line}\n" for line in lines)
    if str(path) == "-":
        check_output(path)
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.partial-{os.getpid()}")
    try:
        with open(partial, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(partial, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise OSError(e.errno, e.strerror, str(path)) from None  # named by the file asked for, not the partial one


def read_input(path) -> List[str]:
    """Lines of a plain/.gz file, or of stdin for '-'. ValueError (naming stdin or the file, and the line) when
    stdin is closed or the text cannot be read."""
    if str(path) == "-":
        if sys.stdin is None:
            raise ValueError("stdin is closed; give a file with --input=FILE")
        raw = sys.stdin.buffer.read()
        try:
            data = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            line = raw.count(b"\n", 0, e.start) + 1
            raise ValueError(f"stdin: invalid UTF-8 on line {line} (byte {e.start})") from None
        lines = data.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return [line[:-1] if line.endswith("\r") else line for line in lines]
    return evaluation.read_text(path)
