"""The keys a recipe JSON file may hold: every one must be a field this version knows.

A recipe file (``Recipe.to_json``) has top-level keys ``name``, ``description`` and one section per config
(``model``, ``data``, ``train``, ``decode``), each section one key per field of its frozen config. A key this
version does not know is a typo (``"d_modle"``), a key in the wrong section (``model.warmup_steps``) or a field
of a newer version; silently dropping it would train something other than what the file says, so
:func:`check_recipe_keys` refuses it with a ValueError that names the key, its section and the closest valid
name::

    model.d_modle: unknown key; did you mean d_model?
    model.warmup_steps: unknown key; it belongs in train (train.warmup_steps)

The one exception is the short list of keys older versions of this project wrote and no longer use
(``LEGACY_KEYS``, found with ``git log -p keras_transformer/config.py``): they are dropped, so old work
directories, exports and recipe files still load.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Dict, FrozenSet, Mapping

# Fields older versions wrote into recipe files and this one no longer has: dropped on reading, never an error.
LEGACY_KEYS: Dict[str, FrozenSet[str]] = {
    "train": frozenset({"steps_per_epoch"}),  # TrainConfig.steps_per_epoch, removed in 5f785cf (= checkpoint_every)
}
def sections(recipe_cls) -> Dict[str, type]:
    """{section name: config class} of the Recipe's fields that are configs (model, data, train, decode)."""
    found = {}
    for field in dataclasses.fields(recipe_cls):
        if dataclasses.is_dataclass(field.default):
            found[field.name] = type(field.default)
    return found


def _suggestion(key: str, valid, where: Mapping[str, FrozenSet[str]], section: str) -> str:
    """"; did you mean X?", "; it belongs in S (S.key)", or the list of valid names."""
    homes = [name for name, keys in where.items() if key in keys and name != section]
    if homes:
        return f"; it belongs in {homes[0]} ({homes[0]}.{key})"
    close = difflib.get_close_matches(key, sorted(valid), n=1)
    if close:
        return f"; did you mean {close[0]}?"
    return f"; valid keys: {', '.join(sorted(valid))}"


def check_recipe_keys(d: Mapping, recipe_cls) -> dict:
    """``d`` (a recipe file's JSON object) without its ``LEGACY_KEYS``; ValueError naming the first unknown key.

    The error reads ``<section>.<key>: unknown key; did you mean <closest>?`` (``difflib.get_close_matches``),
    names the section a misplaced key belongs in, or ``<key>: unknown section; ...`` for a top-level object
    that is no section.
    """
    if not isinstance(d, Mapping):
        raise ValueError(f"a recipe file holds a JSON object of sections, got {type(d).__name__}")
    configs = sections(recipe_cls)
    fields = {name: frozenset(f.name for f in dataclasses.fields(cls)) for name, cls in configs.items()}
    top = frozenset(f.name for f in dataclasses.fields(recipe_cls))
    cleaned = {}
    for key, value in d.items():
        if key not in top:
            kind = "unknown section" if isinstance(value, Mapping) else "unknown key"
            raise ValueError(f"{key}: {kind}{_suggestion(key, top, fields, '')}")
        if key not in configs:
            cleaned[key] = value
            continue
        if not isinstance(value, Mapping):
            raise ValueError(f"{key}: expected an object of {key} settings, got {type(value).__name__}")
        legacy = LEGACY_KEYS.get(key, frozenset())
        for name in value:
            if name not in fields[key] and name not in legacy:
                raise ValueError(f"{key}.{name}: unknown key{_suggestion(name, fields[key], fields, key)}")
        cleaned[key] = {name: v for name, v in value.items() if name not in legacy}
    return cleaned
