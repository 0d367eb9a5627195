"""Writing an exported model (a ``serving.module.ServingModule``) as a SavedModel for TF Serving, whole or not at all.

    write(module, export_dir, info=None) -> export_dir
    with_precision(model, precision) -> the model in float32 or bfloat16

A batch is dealt to ``parallel_searches`` beam searches (2 unless ``kt-export
--parallel_searches`` says otherwise; recorded in export.json) that run at once
on TensorFlow's inter-op threads (``decoding.parallel``). Serve with intra-op
parallelism 1 and inter-op parallelism of at least that number (TF Serving:
``--tensorflow_intra_op_parallelism=1 --tensorflow_inter_op_parallelism=2``).
An input's output does not depend on the number; its score may differ in
the last bits, as it does from one batch to another (the matmuls round by the
batch's row count).

An export computes in float32, or in bfloat16 (``kt-export
--precision=bfloat16``, ``with_precision``: weights and activations in
bfloat16, the attention and output softmaxes in float32): half the size, and
faster where the CPU multiplies bfloat16 matrices (AMX); its outputs may
differ from float32's (docs/serving.md).

Long inputs are truncated, never rejected: a source longer than
``max_source_length = min(recipe.data.max_length, recipe.model.max_length)``
tokens (EOS included; the longest source seen in training) keeps its first
``max_source_length - 1`` subwords followed by EOS. The output may then be
up to ``max_source_length + extra_length`` tokens (at most model.max_length).
Empty and whitespace-only inputs become the source [EOS].

The SentencePiece model runs in the graph (tensorflow-text). Its op takes the
model bytes as an attribute, so they are embedded in ``saved_model.pb``; the
same file is also written to ``assets/`` (with ``export.json``: recipe,
checkpoint, max_source_length, decoding defaults, precision, under
``tokenizers`` the asset of each role: "shared", or "source" and "target" for
separate vocabularies, and what the task's module adds, e.g. an XLA export's
buckets) so that the directory describes itself. A module's warm-up requests
go to ``assets.extra/tf_serving_warmup_requests`` (``serving/warmup.py``). A translator's
``translate_ids*`` graphs hold no tensorflow-text op, but loading a SavedModel
registers every function in it, so a server without tensorflow-text needs an
export made with ``with_text=False`` (``kt-export --ids_only``).

The model's variables are exported under their checkpoint paths
(``checkpoints.names.variable_names``): ``model/encoder/layer_0/self_attention/query_dense/_kernel``
is the query projection W^Q of the first encoder layer, named as a checkpoint
of ``tf.train.Checkpoint(model=model)`` stores it, so an export can be read or
converted by name, never by the order the variables were created in.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Optional

import tensorflow as tf

from keras_transformer.checkpoints.health import reason
from keras_transformer.checkpoints.names import named
from keras_transformer.config import PRECISIONS
from keras_transformer.model import build_like
from keras_transformer.serving.loading import EXPORT_INFO
from keras_transformer.serving import warmup
from keras_transformer.serving.module import ServingModule


def write(module: ServingModule, export_dir, info: Optional[dict] = None) -> str:
    """Write ``module`` (a task's exported module: its model, tokenizer and recipe) as a SavedModel to
    ``export_dir``; returns it. ``info`` (e.g. {"checkpoint": path}) is added to ``assets/export.json``.

    ``export_dir`` must not exist or be an empty directory (FileExistsError otherwise: an export is never
    written over another). The SavedModel is written whole or not at all: into a hidden folder beside
    ``export_dir``, renamed into place at the end; a failure (a full disk, a read-only directory) is an
    OSError naming ``export_dir`` and leaves nothing there.
    """
    export_dir = str(export_dir)
    if os.path.exists(export_dir) and not (os.path.isdir(export_dir) and not os.listdir(export_dir)):
        raise FileExistsError(f"{export_dir}: exists and is not an empty directory; an export is never written over "
                              "another (remove it or choose another)")
    model, recipe = module.model, module.recipe
    decode = dict(beam_size=recipe.decode.beam_size, alpha=recipe.decode.alpha, extra_length=recipe.decode.extra_length,
                  parallel_searches=module.parallel_searches)
    models = module.tokenizer.models if module.tokenizer is not None else {}  # {role: Tokenizer}
    description = dict(info or {}, recipe=recipe.to_dict(), max_source_length=module.max_source_length,
                       tokenizers={role: os.path.basename(t.model_path) for role, t in models.items()},
                       decode=decode, precision=model.dtype_policy.name, **module.extra_info(),
                       signatures=list(module.signatures()),
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
            module.export_info = tf.saved_model.Asset(info_path)
            for role, model_tokenizer in models.items():  # attributes tokenizer_model, source_tokenizer_model ...
                spm_path = os.path.join(staging, os.path.basename(model_tokenizer.model_path))
                shutil.copyfile(model_tokenizer.model_path, spm_path)
                prefix = "" if role == "shared" else f"{role}_"
                setattr(module, f"{prefix}tokenizer_model", tf.saved_model.Asset(spm_path))
            with named(module.model_variables, module.variable_names()):  # model.variables order
                tf.saved_model.save(module, partial, signatures=module.signatures())
            requests = module.warmup_requests()
            if requests:
                warmup.write(partial, requests)
        if os.path.isdir(export_dir):
            os.rmdir(export_dir)  # empty (checked above)
        os.replace(partial, export_dir)
    except (tf.errors.OpError, OSError) as e:
        if partial is not None:
            shutil.rmtree(partial, ignore_errors=True)
        where = f": {e.filename}" if getattr(e, "filename", None) else ""
        raise OSError(f"{export_dir}: could not write the SavedModel ({reason(e)}{where}); nothing was left "
                      "there") from None
    return export_dir


def with_precision(model, precision: str):
    """The model in ``precision`` (of ``PRECISIONS``): itself when it already computes in it, else a copy built
    under that dtype policy with its weights cast (bfloat16 keeps 8 bits of mantissa)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision: {precision!r}; expected one of {', '.join(PRECISIONS)}")
    if model.dtype_policy.name == precision:
        return model
    copy = build_like(model, dtype_policy=precision)
    for target, source in zip(copy.variables, model.variables):
        target.assign(tf.cast(source, target.dtype))
    return copy


