"""``--freeze``: weights that fine-tuning keeps bit-identical (OpenNMT-tf's ``freeze_layers``).

    frozen_paths(model, spec) -> the variable paths ``spec`` names (ValueError starting "freeze:" otherwise)
    freeze(model, spec)       -> marks them not trainable: no gradient, no Adam moments, never updated

``spec`` is a comma-separated list of names over the model's variable paths (``transformer/`` left out):

    embeddings       the shared embedding, which is also the pre-softmax projection (§3.4), the source
                     embedding of a model with two vocabularies, and learned positions (Table 3 (E))
    encoder          every encoder variable; likewise decoder
    encoder:0-1      layers 0 and 1 of the encoder (counted from the embeddings); decoder:3 one layer
    PATH             any prefix of a variable path, e.g. decoder/layer_0/cross_attention
"""

from __future__ import annotations

import re
from typing import List

_EMBEDDINGS = ("shared_embedding/", "source_embedding/", "positional/")
_LAYERS = re.compile(r"^(encoder|decoder):(\d+)(?:-(\d+))?$")


def _relative(path: str) -> str:
    return path.split("/", 1)[1] if "/" in path else path  # without the model's own name


def _prefixes(name: str, layers: dict) -> tuple:
    if name == "embeddings":
        return _EMBEDDINGS
    if name in ("encoder", "decoder"):
        return (f"{name}/",)
    match = _LAYERS.match(name)
    if match:
        stack, first, last = match.group(1), int(match.group(2)), int(match.group(3) or match.group(2))
        if not first <= last < layers[stack]:
            raise ValueError(f"freeze: {name}: the {stack} has layers 0-{layers[stack] - 1}")
        return tuple(f"{stack}/layer_{i}/" for i in range(first, last + 1))
    if ":" in name:
        raise ValueError(f"freeze: {name}: a stack's layers are encoder:I or encoder:I-J (likewise decoder)")
    return (name.strip("/"),)


def frozen_paths(model, spec: str) -> List[str]:
    """The paths of ``model``'s trainable variables that ``spec`` names, in model order; every name must match one."""
    paths = [_relative(v.path) for v in model.trainable_variables]
    layers = {"encoder": model.config.num_encoder_layers, "decoder": model.config.num_decoder_layers}
    chosen = set()
    for name in filter(None, (n.strip() for n in spec.split(","))):
        prefixes = [q if q.endswith("/") else q + "/" for q in _prefixes(name, layers)]  # whole path components
        found = [p for p in paths if any((p + "/").startswith(q) for q in prefixes)]
        if not found:
            raise ValueError(f"freeze: {name} names no trainable variable (names: embeddings, encoder, decoder, "
                             f"encoder:I-J, decoder:I-J, or a path prefix such as {paths[-1].rsplit('/', 1)[0]})")
        chosen.update(found)
    return [p for p in paths if p in chosen]


def freeze(model, spec: str) -> List[str]:
    """Mark the variables ``spec`` names not trainable (before the optimizer is built); returns their paths."""
    names = set(frozen_paths(model, spec)) if spec else set()
    for variable in model.trainable_variables:
        if _relative(variable.path) in names:
            variable.trainable = False
    return sorted(names)
