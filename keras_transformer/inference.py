"""One loader for every kind of ``--model``, of every task: a model ready to decode lines.

    load(model_arg, checkpoint="latest", data_dir=None, ctranslate2_search=None, ensemble_weights=None)
        -> artifacts.Loaded   (model_arg "a,b,...": an ensemble of models of one task and one tokenizer,
        its task's ``ensemble_module``; ``ensemble_parts`` loads its models)
    from_module(module, tokenizer, description) -> artifacts.Loaded   a task's module built here
    task_of(loaded) -> the tasks.base.Task that decodes and scores its outputs

A SavedModel (``kt-export``) runs through its task's signature with options (``translate_with_options``,
``parse_with_options``); a training work directory through a fresh module of its task over the restored
checkpoint (the same graph an export holds); a CTranslate2 directory (``kt-export --format=ctranslate2``,
translation) through ``engines.ctranslate2_translate`` with the same inputs and outputs. What the outputs
are, and how many lines are decoded at once, is the task's (``tasks/``).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from keras_transformer import artifacts, tasks
from keras_transformer.artifacts import Loaded
from keras_transformer.checkpoints.state import resolve_checkpoint
from keras_transformer.config import Recipe
from keras_transformer.data.tokenizer import Tokenizer
from keras_transformer.serving import loading
from keras_transformer.serving.checks import max_source_length
from keras_transformer.tasks.translation.module import (ALIGNMENT_SIGNATURES, CONSTRAINT_SIGNATURE,
                                                        PREFIX_SIGNATURES, SAMPLE_SIGNATURE as SAMPLE)
from keras_transformer.workdir import WorkDir

ALIGN = ALIGNMENT_SIGNATURES[1]  # "align": a given pair's word alignment


def load(model_arg, checkpoint: str = "latest", data_dir=None, ctranslate2_search: Optional[str] = None,
         ensemble_weights: Optional[Sequence[float]] = None) -> Loaded:
    """A SavedModel directory, a CTranslate2 directory or a training work directory (``checkpoint`` picks the
    weights: "latest", "averaged", "best" or a prefix; ``ctranslate2_search`` a CTranslate2 directory's search,
    "native" by default, or "gnmt": ``engines.ctranslate2_translate``); "a,b,...": an ensemble, weighted by
    ``ensemble_weights`` (default equal); errors name the flag (--model, --checkpoint, --ctranslate2_search,
    --ensemble_weights)."""
    if "," in str(model_arg):
        models, recipe, tokenizer = ensemble_parts(str(model_arg).split(","), checkpoint, data_dir)
        try:
            module = tasks.get(recipe).ensemble_module(models, tokenizer, recipe, ensemble_weights)
        except ValueError as e:  # "ensemble weights: one weight >= 0 per model ...", or models that cannot join
            flag = "--ensemble_weights" if str(e).startswith("ensemble weights") else "--model"
            raise ValueError(f"{flag}: {str(e).partition(': ')[2]}") from None
        return from_module(module, tokenizer, f"ensemble of {model_arg}")
    if ensemble_weights is not None:
        raise ValueError(f"--ensemble_weights: {model_arg} is one model; weights apply to an ensemble, --model=a,b")
    kind = artifacts.kind(model_arg)
    if kind != "workdir" and checkpoint != "latest":
        what = "an exported SavedModel" if kind == "saved_model" else "a CTranslate2 export"
        raise ValueError(f"--checkpoint: {model_arg} is {what}; checkpoints apply to work directories")
    if kind != "ctranslate2" and ctranslate2_search is not None:
        raise ValueError(f"--ctranslate2_search: {model_arg} is not a CTranslate2 directory")
    if kind == "saved_model":
        return _load_saved_model(model_arg)
    if kind == "ctranslate2":
        try:
            from keras_transformer.engines import ctranslate2_translate

            engine = ctranslate2_translate.load(model_arg, search=ctranslate2_search or "native")
        except ImportError as e:
            raise ValueError(f"{model_arg} is a CTranslate2 export, but {e}") from None
        return Loaded(engine.translate_with_options, engine.defaults, None, engine.description, engine,
                      source_pieces=engine.source_pieces, max_source_pieces=engine.max_source_length - 1,
                      prefixed=engine.translate_with_prefix if engine.search == "native" else None,
                      target_pieces=engine.target_pieces)
    task = tasks.get(WorkDir(model_arg).read_recipe())
    model, recipe, tokenizer = artifacts.load_model(model_arg, checkpoint, data_dir, task.corpus)
    return from_module(task.module(model, tokenizer, recipe), tokenizer,
                       f"{model_arg} ({resolve_checkpoint(model_arg, checkpoint)})")


def ensemble_parts(model_args, checkpoint="latest", data_dir=None):
    """(models, the first one's recipe, the shared tokenizer) of work directories or SavedModels of one task and
    one tokenizer, for the task's ``ensemble_module`` (the first recipe gives its decoding defaults and limits);
    ``checkpoint`` applies to each work directory. A ValueError names a model that cannot join."""
    parts = []
    for model_arg in model_args:
        kind = artifacts.kind(model_arg)
        if kind == "ctranslate2":
            raise ValueError(f"--model: {model_arg} is a CTranslate2 directory; an ensemble takes work directories "
                             "and SavedModels")
        if kind == "workdir":  # its tokenizer is found by its task's corpus
            task = tasks.get(WorkDir(model_arg).read_recipe())
            part = artifacts.load_model(model_arg, checkpoint, data_dir, task.corpus)
        else:
            part = artifacts.load_model(model_arg)
        if parts and tasks.get(part[1]).name != tasks.get(parts[0][1]).name:
            raise ValueError(f"--model: {model_arg} is a {tasks.get(part[1]).name} model, {model_args[0]} a "
                             f"{tasks.get(parts[0][1]).name} one; the models of an ensemble do one task")
        parts.append(part)
    models, recipe, tokenizer = [m for m, _, _ in parts], parts[0][1], parts[0][2]

    def protos(t):  # the SentencePiece models themselves: one vocabulary is one tokenizer
        return {role: side.model_proto for role, side in t.models.items()}

    for model_arg, (_, _, other) in zip(model_args[1:], parts[1:]):
        if protos(other) != protos(tokenizer):
            raise ValueError(f"--model: {model_arg} has another vocabulary than {model_args[0]}; the models of an "
                             "ensemble share one tokenizer")
    return models, recipe, tokenizer


def from_module(module, tokenizer, description: str) -> Loaded:
    """A task's serving module (``module.recipe``; e.g. a ``Translator`` over restored weights) as ``Loaded``."""
    prefixed, sample_prefixed = (getattr(module, name, None) for name in PREFIX_SIGNATURES)
    return Loaded(getattr(module, module.OPTIONS_SIGNATURE), module.defaults, module.recipe, description, module,
                  getattr(module, "linearize_unconstrained", None), module.best_with_options(),
                  tokenizer.source.piece_counts, module.max_source_length - 1, getattr(module, SAMPLE, None),
                  prefixed, sample_prefixed, tokenizer.target.piece_counts, getattr(module, ALIGN, None),
                  getattr(module, CONSTRAINT_SIGNATURE, None))


def _load_saved_model(path) -> Loaded:
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops the text signatures use)

    loaded = loading.load_saved_model(path)
    info = loading.read_info(path)
    recipe = Recipe.from_dict(info["recipe"])
    name = tasks.get(recipe).module_class.OPTIONS_SIGNATURE
    if name not in loaded.signatures:
        raise ValueError(f"--model: {path} has no text signature {name} (exported with --ids_only?)")

    def keywords(signature_name, *keys):  # signatures take keyword arguments only; the module's positional ones
        signature = loaded.signatures.get(signature_name)
        return None if signature is None else lambda *args: signature(**dict(zip(keys, args)))

    options = ("beam_size", "alpha", "extra_length")
    sampling = ("num_samples", "top_k", "top_p", "temperature", "seed", "alpha", "extra_length")
    call = keywords(name, "inputs", *options)
    decode = info["decode"]
    defaults = (decode["beam_size"], decode["alpha"], decode["extra_length"])
    own_options = (np.int32(defaults[0]), np.float32(defaults[1]), np.int32(defaults[2]))  # as the tensors hold them

    def best(inputs, beam_size, alpha, extra_length):  # serving_default where the options are its own
        if (beam_size.numpy(), alpha.numpy(), extra_length.numpy()) == own_options:
            return loaded.signatures["serving_default"](inputs=inputs)
        return call(inputs, beam_size, alpha, extra_length)

    models = loading.tokenizer_models(path)
    source = Tokenizer(models["shared"] if "shared" in models else models["source"])
    target = Tokenizer(models["shared"] if "shared" in models else models["target"])
    return Loaded(call, defaults, recipe, str(path), loaded, best=best, source_pieces=source.piece_counts,
                  max_source_pieces=max_source_length(recipe) - 1, sample=keywords(SAMPLE, "inputs", *sampling),
                  prefixed=keywords(PREFIX_SIGNATURES[0], "inputs", "target_prefix", *options),
                  sample_prefixed=keywords(PREFIX_SIGNATURES[1], "inputs", "target_prefix", *sampling),
                  target_pieces=target.piece_counts,
                  align=keywords(ALIGN, "inputs", "translations", "alignment_layer", "alignment_head"),
                  constrained=keywords(CONSTRAINT_SIGNATURE, "inputs", "constraints", *options))


def task_of(loaded: Loaded) -> tasks.Task:
    """The task whose outputs ``loaded`` writes (a CTranslate2 directory: translation)."""
    return tasks.get(loaded.recipe if loaded.recipe is not None else "translation")
