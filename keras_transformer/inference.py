"""Translating many lines with either kind of model: an exported SavedModel or a training work directory.

    load_translator(model_arg, checkpoint="latest", data_dir=None) -> LoadedTranslator
    translate_lines(translator, lines, batch_size=32, beam_size=None, alpha=None, extra_length=None)
        -> (translations [N] list of str, scores [N] float32)

Both kinds run the same ``export.Translator`` graph: a SavedModel through its
``translate_with_options`` signature, a work directory through a fresh
``Translator`` over the restored checkpoint. Lines are translated in batches of
similar length (sorted by length, so short lines are not padded to long ones)
and returned in their original order. A newline the model might emit (a byte
piece) is replaced by a space, so output line i is always the translation of
input line i.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from keras_transformer import evaluation, export


class LoadedTranslator(NamedTuple):
    fn: Callable  # (inputs [B] string, beam_size, alpha, extra_length) -> {"translations", "scores", ...}
    defaults: Tuple[int, float, int]  # the recipe's (beam_size, alpha, extra_length)
    description: str  # what was loaded, for logs
    owner: object  # the loaded SavedModel or the Translator: keeps the function's variables alive


def is_saved_model(path) -> bool:
    return Path(path, "saved_model.pb").is_file()


def load_translator(model_arg, checkpoint: str = "latest", data_dir=None) -> LoadedTranslator:
    """A SavedModel directory (from ``kt-export``) or a training work directory (``checkpoint`` picks the weights)."""
    path = Path(model_arg)
    if is_saved_model(path):
        if checkpoint != "latest":
            raise ValueError(f"--checkpoint: {path} is an exported SavedModel; checkpoints apply to work directories")
        import tensorflow_text  # noqa: F401  (registers the SentencePiece ops the text signatures use)

        loaded = tf.saved_model.load(str(path))
        if "translate_with_options" not in loaded.signatures:
            raise ValueError(f"--model: {path} has no text signature (exported with --ids_only?)")
        info = json.loads(Path(path, "assets", export.EXPORT_INFO).read_text())
        decode = info["decode"]
        signature = loaded.signatures["translate_with_options"]

        def call(inputs, beam_size, alpha, extra_length):  # signatures take keyword arguments only
            return signature(inputs=inputs, beam_size=beam_size, alpha=alpha, extra_length=extra_length)

        defaults = (decode["beam_size"], decode["alpha"], decode["extra_length"])
        return LoadedTranslator(call, defaults, str(path), loaded)
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


def translate_lines(translator: LoadedTranslator, lines: Sequence[str], batch_size: int = 32,
                    beam_size: Optional[int] = None, alpha: Optional[float] = None,
                    extra_length: Optional[int] = None) -> Tuple[List[str], np.ndarray]:
    """Translations and scores of ``lines``, in input order. None options take the recipe's §6.1 values."""
    beam_size, alpha, extra_length = (d if v is None else v for v, d in zip((beam_size, alpha, extra_length),
                                                                            translator.defaults))
    options = (tf.constant(beam_size, tf.int32), tf.constant(alpha, tf.float32), tf.constant(extra_length, tf.int32))
    translations: List[Optional[str]] = [None] * len(lines)
    scores = np.zeros([len(lines)], np.float32)
    for batch in length_batches(lines, batch_size):
        out = translator.fn(tf.constant([lines[i] for i in batch], tf.string), *options)
        for i, text, score in zip(batch, out["translations"].numpy(), out["scores"].numpy()):
            translations[i] = text.decode("utf-8", errors="replace").replace("\r", " ").replace("\n", " ")
            scores[i] = score
    return translations, scores


def write_lines(path, lines: Sequence[str]) -> None:
    """One line each, UTF-8, final newline; '-' is stdout."""
    text = "".join(f"{line}\n" for line in lines)
    if str(path) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def read_input(path) -> List[str]:
    """Lines of a plain/.gz file, or of stdin for '-'."""
    if str(path) == "-":
        data = sys.stdin.buffer.read().decode("utf-8")
        lines = data.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return [line[:-1] if line.endswith("\r") else line for line in lines]
    return evaluation.read_text(path)
