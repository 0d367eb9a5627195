"""The base of every exported model: a ``tf.Module`` over one Keras model and its tokenizer, text in -> text out.

    ServingModule(model, tokenizer, recipe, with_text=True, parallel_searches=2)

A task's module (``tasks/translation/module.py``'s ``Translator``, ``tasks/parsing/module.py``'s ``Parser``)
names its signature with options (``OPTIONS_SIGNATURE``) and writes ``_decode_text(inputs, beam_size,
alpha, extra_length, nbest) -> {output: [B] ...}``; this base gives both text signatures, each checking its
inputs in the graph first (``serving/checks.py``):

    serving_default        inputs [B] string -> the task's outputs for the best hypothesis, decoded with the
                           recipe's defaults (nbest False: the search may stop once the best is settled)
    <OPTIONS_SIGNATURE>    inputs [B] string, beam_size [] int32, alpha [] float32, extra_length [] int32
                           -> the same outputs, and n-best lists where the task has them (nbest True)

A blank input (empty or whitespace only, ``checks.blank``) is not decoded: its outputs are empty text, score 0,
and in an n-best list that one hypothesis, the other slots empty ("" scored NEG_INF, as the search leaves them).
Every text signature also returns ``truncated`` [B] bool: True where the input had more subwords than the model
reads (``checks.max_source_length``, EOS included), so that it was decoded from its first ones.

The module tracks the ``tf.Variable`` inside each Keras variable (``model_variables``), not the Keras model:
tracking the model saves each weight twice and leaves the handles the functions read uninitialised under
TF1-style loaders (saved_model_cli run, TF Serving). The model itself is held out of the trackable graph.
"""

from __future__ import annotations

import functools
import types
from typing import Tuple

import tensorflow as tf

from keras_transformer import PAD_ID
from keras_transformer.checkpoints.names import variable_names
from keras_transformer.decoding import NEG_INF
from keras_transformer.decoding.ensemble import Ensemble
from keras_transformer.config import PARALLEL_SEARCHES, Recipe
from keras_transformer.data.tokenizer import append_eos
from keras_transformer.serving import checks


class ServingModule(tf.Module):
    """One model, its tokenizer and its recipe's decoding defaults, with the text signatures of the module doc."""

    OPTIONS_SIGNATURE = ""  # the task's signature with decoding options, e.g. "translate_with_options"

    def __init__(self, model, tokenizer, recipe: Recipe, with_text: bool = True, name: str = "module",
                 parallel_searches: int = PARALLEL_SEARCHES):
        super().__init__(name=name)
        self._untracked = types.SimpleNamespace(model=model)
        self.model_variables = [v.value for v in model.variables]
        if not all(isinstance(v, tf.Variable) for v in self.model_variables):
            raise TypeError("model: expected Keras variables backed by tf.Variable (the TensorFlow backend)")
        self._tokenizer = tokenizer if with_text else None
        self._recipe = recipe
        self._max_source_length = checks.max_source_length(recipe)
        self._defaults = (recipe.decode.beam_size, recipe.decode.alpha, recipe.decode.extra_length)
        self.parallel_searches = parallel_searches  # beam searches a batch is dealt to (decoding/parallel.py)
        if with_text:
            setattr(self, self.OPTIONS_SIGNATURE,
                    tf.function(self._text_with_options, input_signature=[checks.STRINGS, *checks.OPTIONS],
                                autograph=False))
            self.serving_default = tf.function(self._text_with_defaults, input_signature=[checks.STRINGS],
                                               autograph=False)

    @property
    def model(self):
        return self._untracked.model

    def variable_names(self):
        """The names ``model_variables`` are saved under (``checkpoints.names.variable_names``), in their order."""
        return variable_names(self.model)

    @property
    def tokenizer(self):
        """The tokenizer (a ``Tokenizer`` or ``TokenizerPair``), None for an ids-only module."""
        return self._tokenizer

    @property
    def recipe(self) -> Recipe:
        return self._recipe

    @property
    def defaults(self) -> Tuple[int, float, int]:
        """The recipe's (beam_size, alpha, extra_length): what ``serving_default`` decodes with."""
        return self._defaults

    @property
    def max_source_length(self) -> int:
        return self._max_source_length

    def text_signatures(self) -> Tuple[str, ...]:
        return ("serving_default", self.OPTIONS_SIGNATURE) if self._tokenizer is not None else ()

    def signatures(self) -> dict:
        """{name: tf.function with an input signature}; traced by ``tf.saved_model.save`` (it retraces anyway)."""
        return {name: getattr(self, name) for name in self.text_signatures()}

    def extra_info(self) -> dict:
        """What a task's module adds to export.json (e.g. an XLA export's buckets); {} by default."""
        return {}

    def warmup_requests(self) -> list:
        """[(signature name, {input name: numpy array})] for TF Serving to replay at load time; none by default."""
        return []

    def source_ids(self, inputs):
        """inputs [B] string -> source_ids [B, S] int32: subwords + EOS, PAD after, truncated as in training."""
        return self.encode(inputs)[0]

    def encode(self, inputs):
        """inputs [B] string -> (source_ids [B, S] as ``source_ids``, truncated [B] bool: the input was longer)."""
        ids = append_eos(self._tokenizer.source.tokenize(inputs))  # [B, (n + 1)]
        truncated = ids.row_lengths() > self._max_source_length  # [B]
        return checks.truncate_source(ids.to_tensor(PAD_ID), self._max_source_length), truncated  # [B, S], [B]

    def best_with_options(self):
        """A ``tf.function`` that decodes as <OPTIONS_SIGNATURE> but returns the best hypothesis alone, as
        ``serving_default`` does (nbest False: the search may stop sooner); not part of the export."""
        return tf.function(functools.partial(self._text_with_options, nbest=False),
                           input_signature=[checks.STRINGS, *checks.OPTIONS], autograph=False)

    def _text_with_options(self, inputs, beam_size, alpha, extra_length, nbest: bool = True):
        return self._decode_nonblank(checks.checked_rank(inputs, "inputs"),
                                     *checks.checked_options(beam_size, alpha, extra_length), nbest=nbest)

    def _text_with_defaults(self, inputs):
        return self._decode_nonblank(checks.checked_rank(inputs, "inputs"), *self._defaults, nbest=False)

    def _decode_nonblank(self, inputs, beam_size, alpha, extra_length, nbest: bool) -> dict:
        """``_decode_text`` of the inputs that are not blank; each blank one gets ``_blank_row`` of every output."""
        return self.nonblank(inputs, lambda kept: self._decode_text(kept, beam_size, alpha, extra_length, nbest))

    @staticmethod
    def nonblank(inputs, decode, *aligned) -> dict:
        """``decode(inputs that are not blank [B'], *their rows of aligned [B, ...])`` -> {name: [B', ...]}, each
        blank input given ``_blank_row`` of every output, in input order: {name: [B, ...]}."""
        blank = checks.blank(inputs)  # [B]
        kept = tf.where(~blank)[:, 0]  # [B'] int64
        out = decode(*(tf.gather(x, kept) for x in (inputs, *aligned)))  # {name: [B', ...]}
        row = tf.where(blank, tf.size(kept, tf.int64), tf.cumsum(tf.cast(~blank, tf.int64), exclusive=True))  # [B]
        return {name: tf.gather(tf.concat([value, _blank_row(value)], axis=0), row) for name, value in out.items()}

    def _decode_text(self, inputs, beam_size, alpha, extra_length, nbest: bool) -> dict:
        raise NotImplementedError


class EnsembleMembers:
    """What a module over several models of one vocabulary adds to its task's ``ServingModule`` (a base before it;
    ``hold_members`` after that module's ``__init__`` over the first model): every member's variables, saved under
    "member_m/"; the members and their weights in export.json."""

    def hold_members(self, models, weights=None) -> None:
        self._ensemble = Ensemble(models, weights)  # ValueError: fewer than 2, vocabularies or weights that differ
        self.model_variables = [v.value for m in models for v in m.variables]

    @property
    def weights(self):
        return self._ensemble.weights

    def variable_names(self):
        """Model m's variables under "member_m/": an export holds every model's (``loading`` reads one back)."""
        return [f"member_{m}/{name}" for m, model in enumerate(self._ensemble.models)
                for name in variable_names(model)]

    def extra_info(self) -> dict:
        return {"ensemble": {"members": len(self._ensemble.models), "weights": list(self._ensemble.weights)}}


def _blank_row(value):
    """value [B', ...] -> [1, ...]: a blank input's output: "" for text, 0 for a score or flag; an n-best score row
    [1, K] is 0 in its first slot and NEG_INF in the others, the search's empty slots."""
    shape = tf.concat([[1], tf.shape(value)[1:]], axis=0)
    if value.dtype == tf.string:
        return tf.fill(shape, "")
    if value.shape.rank == 2:
        first = tf.equal(tf.range(shape[1]), 0)[None, :]  # [1, K]
        return tf.where(first, tf.zeros(shape, value.dtype), tf.cast(NEG_INF, value.dtype))
    return tf.zeros(shape, value.dtype)
