"""Other inference engines for our trained models.

    ctranslate2_convert.convert(model, tokenizer, recipe, output_dir, quantization="float32") -> output_dir
    ctranslate2_translate.load(model_dir, device="cpu") -> CTranslate2Translator

A CTranslate2 directory (``kt-export --format=ctranslate2``) holds CTranslate2's
``model.bin``, ``config.json``, ``source_vocabulary.json`` and
``target_vocabulary.json``, the SentencePiece model (``SENTENCEPIECE``; with separate
vocabularies one per language, ``sentencepiece_file``) and
``INFO`` (the recipe, the decoding defaults, ``max_source_length``, the
quantization and the length-penalty formulas).
The ``ctranslate2`` package is optional (``pip install -e ".[ctranslate2]"``);
this module imports without it.
"""

from __future__ import annotations

from pathlib import Path

INFO = "keras_transformer.json"  # what the directory holds and how kt-translate decodes with it
SENTENCEPIECE = "sentencepiece.model"  # the shared source/target SentencePiece model (§5.1)


def sentencepiece_file(role: str) -> str:
    """The directory's SentencePiece file of a tokenizer role: "shared" (§5.1), or "source" / "target" for
    separate vocabularies (``source.sentencepiece.model`` ...)."""
    return SENTENCEPIECE if role == "shared" else f"{role}.{SENTENCEPIECE}"


INSTALL_HINT = 'pip install -e ".[ctranslate2]"'
# How the source vocabulary spells EOS (id 3): CTranslate2 returns an empty translation, without decoding, for a
# source made only of its BOS/EOS tokens, while ours decodes an empty input from the source [EOS].
SOURCE_EOS = "<source_eos>"

# Weight types CTranslate2 can store (ctranslate2.specs.model_spec.ACCEPTED_MODEL_TYPES). On a CPU, float32,
# int8 (= int8_float32: int8 matrices, float32 elsewhere) and int16 run natively; the float16/bfloat16 types
# suit GPUs (CTranslate2 converts at load time where the device lacks them).
QUANTIZATIONS = ("float32", "int8", "int8_float32", "int16", "float16", "bfloat16", "int8_float16", "int8_bfloat16")


def is_ctranslate2_model(path) -> bool:
    """True where ``path`` is a directory written by ``ctranslate2_convert.convert`` (CTranslate2's model.bin)."""
    return Path(path, "model.bin").is_file()


def import_ctranslate2():
    """The ``ctranslate2`` module, or ImportError with one line saying how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise ImportError(f"the ctranslate2 package is not installed; {INSTALL_HINT}") from None
    return ctranslate2
