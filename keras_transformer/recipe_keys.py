"""The keys a recipe JSON file may hold, and the types of their values: every key must be a field this version
knows, every value of its field's type.

A recipe file (``Recipe.to_json``) has top-level keys ``name``, ``description`` and one section per config
(``model``, ``data``, ``train``, ``decode``), each section one key per field of its frozen config. A key this
version does not know is a typo (``"d_modle"``), a key in the wrong section (``model.warmup_steps``) or a field
of a newer version; silently dropping it would train something other than what the file says, so
:func:`check_recipe_keys` refuses it with a ValueError that names the key, its section and the closest valid
name::

    model.d_modle: unknown key; did you mean d_model?
    model.warmup_steps: unknown key; it belongs in train (train.warmup_steps)

A value of the wrong type (``"d_model": "64"``) is refused by :func:`check_recipe_types` before any config is
built, naming the field and what it wants::

    model.d_model: expected an integer, got the string "64"

The exceptions keep old work directories, exports and recipe files loading: keys older versions of this project
wrote and no longer use (``LEGACY_KEYS``, found with ``git log -p keras_transformer/config``) are dropped, keys
that moved to another section (``MOVED_KEYS``) are read from the old one, and a section added later
(``NEW_SECTIONS``) takes its defaults when a file has none.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import typing
from typing import Dict, FrozenSet, Mapping

# Fields older versions wrote into recipe files and this one no longer has: dropped on reading, never an error.
LEGACY_KEYS: Dict[str, FrozenSet[str]] = {
    "train": frozenset({"steps_per_epoch"}),  # TrainConfig.steps_per_epoch, removed in 5f785cf (= checkpoint_every)
}
# Fields that moved to another section: {old section: {field: new section}}.
MOVED_KEYS: Dict[str, Dict[str, str]] = {
    "model": {name: "parsing" for name in ("align_words", "word_span", "bracket_depth", "tag_loss")},  # §6.3's
}
NEW_SECTIONS = frozenset({"parsing"})  # ParsingConfig: the parser's additions, once ModelConfig fields


def _move_keys(d: Mapping) -> dict:
    """``d`` with each ``MOVED_KEYS`` field of a section in its new section (where that does not set it)."""
    d = dict(d)
    for old, moves in MOVED_KEYS.items():
        if not isinstance(d.get(old), Mapping) or not moves.keys() & d[old].keys():
            continue
        d[old] = dict(d[old])
        for name in [name for name in d[old] if name in moves and isinstance(d.get(moves[name], {}), Mapping)]:
            d[moves[name]] = {name: d[old].pop(name), **d.get(moves[name], {})}
    return d


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
    d = _move_keys(d)
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


_KINDS = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def _describe(value) -> str:
    """A JSON value as a reader names it: the string "64", the number 6.5, true, null, a list, an object."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, str):
        return f"the string {json.dumps(value, ensure_ascii=False)}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    return "a list" if isinstance(value, list) else "an object" if isinstance(value, Mapping) else repr(value)


def _is(value, kind) -> bool:
    """Whether a JSON value fits the plain type ``kind``: an int (never a bool) is a float too, never the reverse."""
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def type_error(value, hint) -> str:
    """Why ``value`` (as JSON holds it) is not of the type ``hint`` (int, float, bool, str, Optional[...],
    Tuple[X, ...]): "expected an integer, got the string \"64\"", or "" when it is."""
    optional = type(None) in typing.get_args(hint)
    if optional:
        if value is None:
            return ""
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    if typing.get_origin(hint) is tuple:
        item = typing.get_args(hint)[0]
        wanted = f"a list of {_KINDS[item].split(' ', 1)[1]}s"
        if not isinstance(value, (list, tuple)):
            return f"expected {wanted}{' or null' * optional}, got {_describe(value)}"
        bad = next((v for v in value if not _is(v, item)), _OK)
        return "" if bad is _OK else f"expected {wanted}, got a list holding {_describe(bad)}"
    if _is(value, hint):
        return ""
    return f"expected {_KINDS[hint]}{' or null' * optional}, got {_describe(value)}"


_OK = object()


def check_recipe_types(d: Mapping, recipe_cls) -> Mapping:
    """``d`` (its keys checked by ``check_recipe_keys``) when every config section is there and every value is of
    its field's type; else a ValueError naming the first that is not: ``<section>: missing section``,
    ``<section>.<field>: expected ..., got ...`` (``name``, ``description``, ``task`` at the top)."""
    for name, hint in typing.get_type_hints(recipe_cls).items():
        if name not in d:
            if dataclasses.is_dataclass(hint) and name not in NEW_SECTIONS:
                raise ValueError(f"{name}: missing section")
            continue
        if dataclasses.is_dataclass(hint):
            for field, field_hint in typing.get_type_hints(hint).items():
                if field in d[name]:
                    problem = type_error(d[name][field], field_hint)
                    if problem:
                        raise ValueError(f"{name}.{field}: {problem}")
            continue
        problem = type_error(d[name], hint)
        if problem:
            raise ValueError(f"{name}: {problem}")
    return d
