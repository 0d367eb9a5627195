"""What a ``--model`` is, and the Keras model, recipe and tokenizer it holds.

    kind(model_arg) -> "saved_model" | "ctranslate2" | "workdir"   (a ValueError when it is none of them)
    find_tokenizer(workdir, recipe, data_dir=None, corpus=TEXT) -> the work directory's Tokenizer(s)
    load_model(model_arg, checkpoint="latest", data_dir=None, corpus=TEXT) -> (model, recipe, tokenizer)
    Loaded(fn, defaults, recipe, description, owner, unconstrained, best, source_pieces, max_source_pieces, sample,
           prefixed, sample_prefixed, target_pieces, align, constrained)
        a model ready to decode (``inference.load``)

A ``--model`` is a training work directory (``checkpoint`` picks its weights), a SavedModel written by
``kt-export`` (``serving/``), or a CTranslate2 directory (``kt-export --format=ctranslate2``, ``engines/``).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Callable, NamedTuple, Optional, Tuple, Union

from absl import logging

from keras_transformer import engines
from keras_transformer.checkpoints.state import resolve_checkpoint, restore_weights
from keras_transformer.config import Recipe
from keras_transformer.data import corpora
from keras_transformer.data import tokenizer as tokenizer_lib
from keras_transformer.model import Transformer, build_model
from keras_transformer.serving import loading
from keras_transformer.workdir import WorkDir


class Loaded(NamedTuple):
    """A model ready to decode lines, whatever its kind: its signature with options as a function."""

    fn: Callable  # (inputs [B] string, beam_size, alpha, extra_length) -> {output name: [B] ...}
    defaults: Tuple[int, float, int]  # the recipe's (beam_size, alpha, extra_length)
    recipe: Optional[Recipe]  # what it was trained with (None: a CTranslate2 directory)
    description: str  # what was loaded, for logs
    owner: object  # the loaded SavedModel, module or engine: keeps the function's variables alive
    unconstrained: Optional[Callable] = None  # a parser's free beam search (work directories only)
    best: Optional[Callable] = None  # as fn, the best hypothesis alone: its search may stop sooner (None: fn's)
    source_pieces: Optional[Callable] = None  # [N] lines -> [N] subwords each (no EOS), as the model's tokenizer
    max_source_pieces: int = 0  # the most subwords of an input the model reads; the rest are cut (EOS aside)
    sample: Optional[Callable] = None  # (inputs, num_samples, top_k, top_p, temperature, seed, alpha,
    # extra_length) -> fn's n-best outputs, the draws in the slots (a translator's sample_with_options; None: none)
    prefixed: Optional[Callable] = None  # (inputs, target_prefix [B] string, beam_size, alpha, extra_length) ->
    # fn's outputs, each hypothesis starting with its prefix (translate_with_prefix; None: none)
    sample_prefixed: Optional[Callable] = None  # (inputs, target_prefix, then sample's options) -> sample's outputs
    target_pieces: Optional[Callable] = None  # [N] lines -> [N] target subwords each, as a prefix is tokenized
    align: Optional[Callable] = None  # (inputs, translations [B] string, alignment_layer, alignment_head) ->
    # {"alignment": [B] Pharaoh string} (a translator's align signature; None: none)
    constrained: Optional[Callable] = None  # (inputs, constraints [B] string (tab-separated), beam_size, alpha,
    # extra_length) -> fn's outputs, each hypothesis holding its constraints (translate_with_constraints; None: none)


def kind(model_arg) -> str:
    """"saved_model", "ctranslate2" or "workdir"; a FileNotFoundError naming ``model_arg`` when it is none."""
    path = Path(model_arg)
    if loading.is_saved_model(path):
        return "saved_model"
    if engines.is_ctranslate2_model(path):
        return "ctranslate2"
    if path.is_dir():
        return "workdir"
    raise FileNotFoundError(f"--model: {path} is neither a SavedModel nor a training work directory")


def find_tokenizer(workdir: Union[str, os.PathLike], recipe: Recipe, data_dir=None,
                   corpus: corpora.Corpus = corpora.TEXT) -> tokenizer_lib.Tokenizers:
    """The work directory's own SentencePiece model(s) (never retrained here): a ``Tokenizer``, or a
    ``TokenizerPair`` for separate vocabularies.

    A model whose name (the cache key up to its hash) is the only one of its kind in
    ``<workdir>/tokenizer`` is used as is; with several, the one named by the recipe's
    whole cache key (which needs the training corpus under ``data_dir``, read by ``corpus``, to compute).
    """
    directory = WorkDir(workdir).tokenizer
    models = sorted(directory.glob("*.model")) if directory.is_dir() else []
    if not models:
        raise FileNotFoundError(f"{directory}: no tokenizer (*.model); the work directory is incomplete")

    def find(side):
        kind = tokenizer_lib.cache_key(recipe, side=side, digest=False)
        candidates = [p for p in models if p.name.rsplit("_", 1)[0] == kind]
        if len(candidates) == 1 or (len(models) == 1 and side is None):  # an --init_from copy keeps its name
            return tokenizer_lib.Tokenizer((candidates or models)[0])
        path = directory / f"{tokenizer_lib.cache_key(recipe, data_dir, side, corpus=corpus)}.model"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: not found among {len(models)} tokenizers in {directory}")
        return tokenizer_lib.Tokenizer(path)

    if recipe.model.shared_vocabulary:
        return find(None)
    return tokenizer_lib.TokenizerPair(*(find(side) for side in tokenizer_lib.SIDES))


def load_model(model_arg: Union[str, os.PathLike], checkpoint: str = "latest", data_dir=None,
               corpus: corpora.Corpus = corpora.TEXT) -> Tuple[Transformer, Recipe, tokenizer_lib.Tokenizers]:
    """(model with restored weights, recipe, tokenizer) of a training work directory or an exported SavedModel.

    ``checkpoint``: "latest" (newest training checkpoint), "averaged" (newest
    ``kt-average`` output), "best" (``keep_best_by``) or a checkpoint prefix path. The model is built
    from ``recipe.json`` in float32 (a mixed-precision run's variables are
    float32 anyway); dropout is off at inference. The average kt-pipeline evaluated gets the α it chose on dev
    as its default, as its export does (``WorkDir.chosen_decode``).
    """
    workdir = Path(model_arg)
    if (workdir / "saved_model.pb").is_file():
        if checkpoint != "latest":
            raise ValueError(f"--checkpoint: {workdir} is an exported SavedModel; checkpoints apply to work "
                             "directories")
        return loading.load_exported(workdir)
    recipe = WorkDir(workdir).read_recipe()
    path = resolve_checkpoint(workdir, checkpoint)
    chosen = WorkDir(workdir).chosen_decode(path)  # kt-pipeline's average decodes as its export: α chosen on dev
    if chosen:
        recipe = dataclasses.replace(recipe, decode=dataclasses.replace(recipe.decode, **chosen))
    tok = find_tokenizer(workdir, recipe, data_dir, corpus)
    for model_tokenizer in tok.models.values():
        if model_tokenizer.vocab_size != recipe.model.vocab_size:
            raise ValueError(f"{model_tokenizer.model_path}: {model_tokenizer.vocab_size} pieces, but the recipe's "
                             f"vocab_size is {recipe.model.vocab_size}")
    model = build_model(recipe)
    restore_weights(model, path)
    logging.info("restored %s", path)
    return model, recipe, tok
