"""The names of a model's weights: their paths in ``tf.train.Checkpoint(model=model)``.

    variable_names(model) -> [path of each of model.variables]
    named(variables, names)   a context in which the tf.Variables carry those names (what a SavedModel records)

A checkpoint, an average and an export all name a weight the same way, so one can be read into the other by
name, never by the order the variables were created in.
"""

from __future__ import annotations

import collections
import contextlib
from typing import List

import keras
import tensorflow as tf


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
def named(variables, names):
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
