"""A translator as a ``tf.Module``, exported as a SavedModel (text in -> text out) for TF Serving.

    Translator(model, tokenizer, recipe)   the module; also used directly for checkpoint inference
    export(model, tokenizer, recipe, export_dir, with_text=True, info=None) -> export_dir
    load_saved_model(export_dir) -> the loaded SavedModel (a damaged one: a ValueError naming it)
    load_exported(export_dir) -> (model, recipe, tokenizer)   the Keras model back from an export
    variable_names(model) -> [name of each of model.variables]   the names an export gives them
    assign_exported(model, loaded, export_dir)   a loaded export's variables into a model, by name

Signatures (TF signatures cannot have optional inputs, so the decoding
options come in two flavours: fixed at the recipe's §6.1 values — beam 4,
α = 0.6, max output = source length + 50 — or given as scalar tensors):

    serving_default             inputs [B] string
        -> translations [B] string (best hypothesis, detokenized), scores [B] float32,
           nbest_translations [B, K] string, nbest_scores [B, K] float32 (best first)
    translate_with_options      inputs [B] string, beam_size [] int32, alpha [] float32, extra_length [] int32
        -> the same outputs
    translate_ids               source_ids [B, S] int32 -> sequences [B, K, T] int32, scores [B, K] float32
    translate_ids_with_options  source_ids, beam_size, alpha, extra_length -> the same outputs

``source_ids`` are what the model reads: subword ids, then EOS, PAD (0) after.
``sequences`` hold no BOS, include EOS and are PAD after it. Scores are
log P(Y|X) / lp(Y) (``keras_transformer.decoding``).

Every signature checks its inputs in the graph and refuses a bad request with
an InvalidArgumentError naming the input and its rule: the rank of each input
(inputs [B], source_ids [B, S], scalar options; the signatures declare them of
unknown shape so that the check is not folded away), ids in [0, V), and the
options' rules of ``config.DECODE_OPTIONS`` (beam_size >= 1, alpha finite and
>= 0, extra_length >= 0), which kt-translate's flags and DecodeConfig follow too.

The K n-best slots are full: the search goes on until each input has K
finished hypotheses that no unfinished one can beat (which never changes the
best). Only an input that reaches its maximum output length (source + 50)
with fewer than K finished ones has empty slots, after them: an empty string
with score -1e9; an input with none finished gets its K unfinished
hypotheses instead, scored at that length.

A batch is dealt to ``parallel_searches`` beam searches (2 unless ``kt-export
--parallel_searches`` says otherwise; recorded in export.json) that run at once
on TensorFlow's inter-op threads (``decoding.parallel``). Serve with intra-op
parallelism 1 and inter-op parallelism of at least that number (TF Serving:
``--tensorflow_intra_op_parallelism=1 --tensorflow_inter_op_parallelism=2``).
An input's translation does not depend on the number; its score may differ in
the last bits, as it does from one batch to another (the matmuls round by the
batch's row count).

An export computes in float32, or in bfloat16 (``kt-export
--precision=bfloat16``, ``with_precision``: weights and activations in
bfloat16, the attention and output softmaxes in float32): half the size, and
faster where the CPU multiplies bfloat16 matrices (AMX); its translations may
differ from float32's (README, "Decoding against the engines").

Long inputs are truncated, never rejected: a source longer than
``max_source_length = min(recipe.data.max_length, recipe.model.max_length)``
tokens (EOS included; the longest source seen in training) keeps its first
``max_source_length - 1`` subwords followed by EOS. The output may then be
up to ``max_source_length + extra_length`` tokens (at most model.max_length).
Empty and whitespace-only inputs become the source [EOS].

The SentencePiece model runs in the graph (tensorflow-text). Its op takes the
model bytes as an attribute, so they are embedded in ``saved_model.pb``; the
same file is also written to ``assets/`` (with ``export.json``: recipe,
checkpoint, max_source_length, decoding defaults, precision, and under
``tokenizers`` the asset of each role: "shared", or "source" and "target" for
separate vocabularies) so that the directory describes itself. The ``translate_ids*`` graphs hold no tensorflow-text op,
but loading a SavedModel registers every function in it, so a server without
tensorflow-text needs an export made with ``with_text=False``
(``kt-export --ids_only``), which has only those two signatures.

The model's variables are exported under their checkpoint paths
(``variable_names``): ``model/encoder/layer_0/self_attention/query_dense/_kernel``
is the query projection W^Q of the first encoder layer, named as a checkpoint
of ``tf.train.Checkpoint(model=model)`` stores it, so an export can be read or
converted by name, never by the order the variables were created in.
"""

from __future__ import annotations

import collections
import contextlib
import glob
import json
import os
import shutil
import tempfile
import types
from typing import List, Optional, Tuple

import keras
import tensorflow as tf

from keras_transformer import EOS_ID, PAD_ID
from keras_transformer.config import DECODE_OPTIONS, PARALLEL_SEARCHES, PRECISIONS, Recipe
from keras_transformer.data.tokenizer import Tokenizer, TokenizerPair, Tokenizers, append_eos
from keras_transformer.decoding import translate_ids as beam_translate_ids
from keras_transformer.decoding.model_step import source_lengths

TEXT_SIGNATURES = ("serving_default", "translate_with_options")
IDS_SIGNATURES = ("translate_ids", "translate_ids_with_options")
EXPORT_INFO = "export.json"

# Every input is declared of unknown shape and its rank checked in the graph: with a declared shape the check
# would be folded away at trace time, yet a server (TF Serving, a loaded signature) feeds a tensor of any shape.
_STRINGS = tf.TensorSpec(None, tf.string, name="inputs")  # [B]
_IDS = tf.TensorSpec(None, tf.int32, name="source_ids")  # [B, S]
_OPTIONS = (tf.TensorSpec(None, tf.int32, name="beam_size"), tf.TensorSpec(None, tf.float32, name="alpha"),
            tf.TensorSpec(None, tf.int32, name="extra_length"))  # scalars
_RANKS = {"inputs": (1, "a vector [B] of strings"), "source_ids": (2, "a matrix [B, S] of subword ids"),
          "beam_size": (0, "a scalar"), "alpha": (0, "a scalar"), "extra_length": (0, "a scalar")}


def max_source_length(recipe: Recipe) -> int:
    """Longest source (EOS included) the translator feeds the model: the training filter's limit."""
    return min(recipe.data.max_length, recipe.model.max_length)


def truncate_source(source_ids, max_length: int):
    """source_ids [B, S] (ids, EOS, PAD) -> [B, min(S, max_length)]: rows too long keep max_length - 1 ids + EOS."""
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    lengths = source_lengths(source_ids)  # [B]
    cut = source_ids[:, :max_length]  # [B, S']
    at_last = tf.equal(tf.range(tf.shape(cut)[1]), max_length - 1)[None, :]  # [1, S']
    return tf.where(at_last & (lengths > max_length)[:, None], EOS_ID, cut)  # [B, S']


def _after(check, value):
    """``value`` once ``check`` (an assert) has passed: nothing reads it before."""
    with tf.control_dependencies([check]):
        return tf.identity(value)


def checked_rank(value, name: str):
    """``value`` with its rank asserted (``_RANKS[name]``): InvalidArgumentError "[name: must be ..., got rank] [r]".

    The value passes on through a reshape to its own leading dimensions, not an identity: Grappler's shape
    inference would carry the rank that later ops require (the tokenizer's [B]) back through an identity to
    the input and fold this check away as always true.
    """
    rank, what = _RANKS[name]
    check = tf.debugging.Assert(tf.equal(tf.rank(value), rank), [f"{name}: must be {what}, got rank", tf.rank(value)])
    with tf.control_dependencies([check]):
        value = tf.reshape(value, tf.shape(value)[:rank])
    value.set_shape([None] * rank)
    return value


def checked_options(beam_size, alpha, extra_length):
    """The decoding options, each asserted in the graph to follow its rule in ``config.DECODE_OPTIONS`` (the rules
    kt-translate's flags follow), e.g. InvalidArgumentError "[alpha: must be a finite number >= 0, got] [nan]"."""
    checked = []
    for name, value in zip(("beam_size", "alpha", "extra_length"), (beam_size, alpha, extra_length)):
        value = checked_rank(value, name)
        least, rule = DECODE_OPTIONS[name]
        as_float = tf.cast(value, tf.float32)  # NaN fails the comparison, ±inf the finiteness
        valid = tf.logical_and(as_float >= least, tf.math.is_finite(as_float))
        checked.append(_after(tf.debugging.Assert(valid, [f"{name}: {rule}, got", value]), value))
    return tuple(checked)


def checked_source_ids(source_ids, vocab_size: int):
    """source_ids [B, S] with its rank and its ids (0 <= id < V) asserted in the graph."""
    source_ids = checked_rank(source_ids, "source_ids")
    valid = tf.logical_and(tf.reduce_all(source_ids >= 0), tf.reduce_all(source_ids < vocab_size))
    return _after(tf.debugging.Assert(valid, [f"source_ids: every id must be in [0, {vocab_size}), got min",
                                              tf.reduce_min(source_ids), "max", tf.reduce_max(source_ids)]),
                  source_ids)


def variable_names(model) -> List[str]:
    """The name of each of ``model.variables`` (same order): its path in ``tf.train.Checkpoint(model=model)``.

    That is the chain of layer attributes by which a checkpoint of the model stores and restores the weight
    (shortest first, as TensorFlow's checkpoint writer walks the object graph, breadth first; the optimizer a
    compiled model also tracks is not followed), e.g. ``model/decoder/layer_5/cross_attention/key_dense/_kernel``
    (W^K of the sixth decoder layer's encoder-decoder attention) or ``model/embedding/embeddings`` (E, shared
    with the pre-softmax projection, §3.4). A dropout layer's random-seed state, which no checkpoint holds, is
    named after the layer that holds it: ``model/encoder/layer_0/ffn_residual/dropout/seed_generator/state``.
    """
    view = tf.train.TrackableView(model)
    paths, queue = {id(model): "model"}, collections.deque([model])
    while queue:
        layer = queue.popleft()
        children = list(view.children(layer).items()) + [
            (f"{attr}/state", value.state) for attr, value in vars(layer).items()
            if isinstance(value, keras.random.SeedGenerator)]
        for name, child in children:
            if isinstance(child, (keras.layers.Layer, keras.Variable)) and id(child) not in paths:
                paths[id(child)] = f"{paths[id(layer)]}/{name}"
                if isinstance(child, keras.layers.Layer):
                    queue.append(child)
    missing = [v.path for v in model.variables if id(v) not in paths]
    if missing:
        raise ValueError(f"model: no checkpoint path for {len(missing)} variables, e.g. {missing[0]}")
    return [paths[id(v)] for v in model.variables]


@contextlib.contextmanager
def _named(variables, names):
    """``variables`` (tf.Variable) named ``names`` inside the block, as ``tf.saved_model.save`` writes them.

    TensorFlow names a variable once, when it is created, and Keras creates each stack's weights under the
    stack's scope, so every kernel of every encoder layer is ``transformer/encoder/kernel``. A variable's name
    has no public setter; it is read from its handle name, which is set here and restored afterwards.
    """
    before = [v._handle_name for v in variables]
    try:
        for variable, name in zip(variables, names):
            variable._handle_name = f"{name}:0"
        yield
    finally:
        for variable, name in zip(variables, before):
            variable._handle_name = name


class Translator(tf.Module):
    """Beam-search translation of raw strings or ids with one model and its tokenizer (§6.1)."""

    def __init__(self, model, tokenizer, recipe: Recipe, with_text: bool = True, name: str = "translator",
                 parallel_searches: int = PARALLEL_SEARCHES):
        super().__init__(name=name)
        # The SavedModel tracks the tf.Variables inside the Keras 3 variables, not the Keras model: tracking the
        # model saves each weight twice and leaves the handles the functions read uninitialised under TF1-style
        # loaders (saved_model_cli run, TF Serving). The model itself is held out of the trackable graph.
        self._untracked = types.SimpleNamespace(model=model)
        self.model_variables = [v.value for v in model.variables]
        if not all(isinstance(v, tf.Variable) for v in self.model_variables):
            raise TypeError("model: expected Keras variables backed by tf.Variable (the TensorFlow backend)")
        self._tokenizer = tokenizer if with_text else None
        self._max_source_length = max_source_length(recipe)
        self._defaults = (recipe.decode.beam_size, recipe.decode.alpha, recipe.decode.extra_length)
        self._vocab_size = recipe.model.vocab_size
        self.parallel_searches = parallel_searches
        self.translate_ids_with_options = tf.function(self._ids_with_options, input_signature=[_IDS, *_OPTIONS])
        self.translate_ids = tf.function(self._ids_with_defaults, input_signature=[_IDS])
        if with_text:
            self.translate_with_options = tf.function(self._text_with_options, input_signature=[_STRINGS, *_OPTIONS])
            self.serving_default = tf.function(self._text_with_defaults, input_signature=[_STRINGS])

    # The signatures: each checks its inputs in the graph (rank, ids, the options' rules), then translates.
    def _ids_with_options(self, source_ids, beam_size, alpha, extra_length):
        return self._translate_ids(checked_source_ids(source_ids, self._vocab_size),
                                   *checked_options(beam_size, alpha, extra_length))

    def _ids_with_defaults(self, source_ids):
        return self._translate_ids(checked_source_ids(source_ids, self._vocab_size), *self._defaults)

    def _text_with_options(self, inputs, beam_size, alpha, extra_length):
        return self._translate_text(checked_rank(inputs, "inputs"), *checked_options(beam_size, alpha, extra_length))

    def _text_with_defaults(self, inputs):
        return self._translate_text(checked_rank(inputs, "inputs"), *self._defaults)

    @property
    def model(self):
        return self._untracked.model

    @property
    def max_source_length(self) -> int:
        return self._max_source_length

    def encode(self, inputs):
        """inputs [B] string -> source_ids [B, S] int32: subwords + EOS, PAD after (not yet truncated)."""
        return append_eos(self._tokenizer.source.tokenize(inputs)).to_tensor(PAD_ID)  # [B, S]

    def _translate_ids(self, source_ids, beam_size, alpha, extra_length):
        source_ids = truncate_source(source_ids, self._max_source_length)  # [B, S]
        sequences, scores = beam_translate_ids(self.model, source_ids, beam_size, alpha, extra_length,
                                               self.parallel_searches)
        return {"sequences": sequences, "scores": scores}  # [B, K, T], [B, K]

    def _translate_text(self, inputs, beam_size, alpha, extra_length):
        result = self._translate_ids(self.encode(inputs), beam_size, alpha, extra_length)
        sequences, scores = result["sequences"], result["scores"]  # [B, K, T], [B, K]
        shape = tf.shape(sequences)
        flat = tf.reshape(sequences, [shape[0] * shape[1], shape[2]])  # [B*K, T]
        nbest = tf.reshape(self._tokenizer.target.detokenize(flat), shape[:2])  # [B, K]
        return {"translations": nbest[:, 0], "scores": scores[:, 0], "nbest_translations": nbest,
                "nbest_scores": scores}

    def signatures(self) -> dict:
        """{name: tf.function with an input signature}; traced by ``tf.saved_model.save`` (it retraces anyway)."""
        names = (TEXT_SIGNATURES if self._tokenizer is not None else ()) + IDS_SIGNATURES
        return {name: getattr(self, name) for name in names}


def export(model, tokenizer, recipe: Recipe, export_dir, with_text: bool = True, info: Optional[dict] = None,
           parallel_searches: int = PARALLEL_SEARCHES) -> str:
    """Write the translator SavedModel (see the module docstring) to ``export_dir``; returns it.

    ``info`` (e.g. {"checkpoint": path}) is added to ``assets/export.json``. ``parallel_searches``: the beam
    searches a batch is dealt to (``decoding.parallel``; a translator's or a parser's).

    ``export_dir`` must not exist or be an empty directory (FileExistsError otherwise: an export is never
    written over another). The SavedModel is written whole or not at all: into a hidden folder beside
    ``export_dir``, renamed into place at the end; a failure (a full disk, a read-only directory) is an
    OSError naming ``export_dir`` and leaves nothing there.
    """
    export_dir = str(export_dir)
    if os.path.exists(export_dir) and not (os.path.isdir(export_dir) and not os.listdir(export_dir)):
        raise FileExistsError(f"{export_dir}: exists and is not an empty directory; an export is never written over "
                              "another (remove it or choose another)")
    if recipe.data.corpus == "ptb":  # a constituency parser (§6.3): sentences in, trees out (parsing.py)
        from keras_transformer.parsing import Parser

        if not with_text:
            raise ValueError("ids_only: a parser's export is text in, trees out; it has no ids-only form")
        translator = Parser(model, tokenizer, recipe, parallel_searches=parallel_searches)
    else:
        translator = Translator(model, tokenizer, recipe, with_text=with_text, parallel_searches=parallel_searches)
    decode = dict(beam_size=recipe.decode.beam_size, alpha=recipe.decode.alpha, extra_length=recipe.decode.extra_length,
                  parallel_searches=parallel_searches)
    models = tokenizer.models if with_text else {}  # {role: Tokenizer}
    description = dict(info or {}, recipe=recipe.to_dict(), max_source_length=translator.max_source_length,
                       tokenizers={role: os.path.basename(t.model_path) for role, t in models.items()},
                       decode=decode, precision=model.dtype_policy.name,
                       signatures=list(translator.signatures()),
                       truncation="sources longer than max_source_length tokens (EOS included) keep their first "
                                  "max_source_length - 1 subwords, then EOS")
    parent = os.path.dirname(os.path.abspath(export_dir))
    partial = None
    try:
        os.makedirs(parent, exist_ok=True)
        partial = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(export_dir))}.partial-", dir=parent)
        with tempfile.TemporaryDirectory() as staging:
            info_path = os.path.join(staging, EXPORT_INFO)
            with open(info_path, "w") as f:
                json.dump(description, f, indent=2, sort_keys=True)
            translator.export_info = tf.saved_model.Asset(info_path)
            for role, model_tokenizer in models.items():  # attributes tokenizer_model, source_tokenizer_model ...
                spm_path = os.path.join(staging, os.path.basename(model_tokenizer.model_path))
                shutil.copyfile(model_tokenizer.model_path, spm_path)
                prefix = "" if role == "shared" else f"{role}_"
                setattr(translator, f"{prefix}tokenizer_model", tf.saved_model.Asset(spm_path))
            with _named(translator.model_variables, variable_names(model)):  # model.variables order
                tf.saved_model.save(translator, partial, signatures=translator.signatures())
        if os.path.isdir(export_dir):
            os.rmdir(export_dir)  # empty (checked above)
        os.replace(partial, export_dir)
    except (tf.errors.OpError, OSError) as e:
        if partial is not None:
            shutil.rmtree(partial, ignore_errors=True)
        from keras_transformer.checkpoint_health import reason

        where = f": {e.filename}" if getattr(e, "filename", None) else ""
        raise OSError(f"{export_dir}: could not write the SavedModel ({reason(e)}{where}); nothing was left "
                      "there") from None
    return export_dir


def with_precision(model, precision: str):
    """The model in ``precision`` (of ``PRECISIONS``): itself when it already computes in it, else a copy built
    under that dtype policy with its weights cast (bfloat16 keeps 8 bits of mantissa)."""
    from keras_transformer.model import build_model

    if precision not in PRECISIONS:
        raise ValueError(f"precision: {precision!r}; expected one of {', '.join(PRECISIONS)}")
    if model.dtype_policy.name == precision:
        return model
    copy = build_model(model.config, dtype_policy=precision)
    for target, source in zip(copy.variables, model.variables):
        target.assign(tf.cast(source, target.dtype))
    return copy


def load_saved_model(export_dir):
    """``tf.saved_model.load``; a damaged SavedModel (a file cut short, removed or corrupt) is a ValueError naming
    the directory and what is wrong with it, not a reader's traceback."""
    try:
        return tf.saved_model.load(str(export_dir))
    except (tf.errors.OpError, IndexError, OSError) as e:
        from keras_transformer import checkpoint_health

        if not os.path.isfile(os.path.join(export_dir, "saved_model.pb")):
            raise FileNotFoundError(f"{export_dir}: no saved_model.pb; not a SavedModel") from None
        variables = os.path.join(str(export_dir), "variables", "variables")
        problem = checkpoint_health.problem(variables)
        reason = f"in variables/, {problem}" if problem else " ".join(str(e).split("\n")[0].split())
        raise ValueError(f"{export_dir} is a damaged SavedModel: {reason}; export it again (kt-export)") from None


def tokenizer_models(export_dir) -> dict:
    """{role: path} of a text export's SentencePiece models in ``assets/``: "shared", or "source" and "target"
    (``export.json``'s ``tokenizers``; an export from before that record has one model, the shared one)."""
    assets = os.path.join(str(export_dir), "assets")
    with open(os.path.join(assets, EXPORT_INFO)) as f:
        roles = json.load(f).get("tokenizers")
    if roles is None:
        found = sorted(glob.glob(os.path.join(assets, "*.model")))
        roles = {"shared": os.path.basename(found[0])} if len(found) == 1 else {}
    if not roles:
        raise FileNotFoundError(f"{assets}: no SentencePiece model (exported with --ids_only?)")
    return {role: os.path.join(assets, name) for role, name in roles.items()}


def load_exported(export_dir) -> Tuple[object, Recipe, Tokenizers]:
    """(Keras model, recipe, tokenizer) rebuilt from a text SavedModel written by ``export``.

    The model is built from ``assets/export.json``'s recipe and takes the SavedModel's ``model_variables``
    by name (``assign_exported``). This lets an export be re-exported with newer decoding code or converted to
    another engine without its work directory.
    """
    from keras_transformer.model import build_model

    info_path = os.path.join(export_dir, "assets", EXPORT_INFO)
    if not os.path.isfile(info_path):
        raise FileNotFoundError(f"{info_path}: not found; is {export_dir} a SavedModel written by kt-export?")
    with open(info_path) as f:
        recipe = Recipe.from_dict(json.load(f)["recipe"])
    models = {role: Tokenizer(path) for role, path in tokenizer_models(export_dir).items()}
    loaded = load_saved_model(export_dir)
    model = build_model(recipe.model)
    assign_exported(model, loaded, export_dir)
    return model, recipe, models["shared"] if "shared" in models else TokenizerPair(models["source"], models["target"])


def assign_exported(model, loaded, export_dir) -> None:
    """Set each of ``model.variables`` to the loaded export's variable of the same name (``variable_names``).

    ``loaded``: ``tf.saved_model.load`` of a directory ``export`` wrote. Every variable must be there with its
    shape (a ValueError naming the first that is not). An export written before variables were named by
    path (its names are those given at creation, e.g. ``transformer/encoder/kernel``, none of them a path)
    holds them in ``model.variables`` order and is read in that order.
    """
    saved = list(loaded.model_variables)
    names = variable_names(model)
    by_name = {v.name.rsplit(":", 1)[0]: v for v in saved}
    if len(saved) != len(names):
        raise ValueError(f"{export_dir}: {len(saved)} variables, but the model has {len(names)}")
    if by_name.keys().isdisjoint(names):
        values = saved  # an export from before the names: model.variables order
    else:
        missing = [name for name in names if name not in by_name]
        if missing:
            raise ValueError(f"{export_dir}: no variable {missing[0]} ({len(missing)} of the model's {len(names)} "
                             "missing); not an export of this recipe's model?")
        values = [by_name[name] for name in names]
    for variable, name, value in zip(model.variables, names, values):
        if tuple(variable.shape) != tuple(value.shape):
            raise ValueError(f"{export_dir}: variable {name} has shape {tuple(value.shape)} in the export, "
                             f"{tuple(variable.shape)} in the model")
        variable.assign(tf.cast(value, variable.dtype))  # a bfloat16 export's weights into a float32 model
