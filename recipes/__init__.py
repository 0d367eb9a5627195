"""Named recipes: one small file each, looked up by name.

``recipes.get("base")`` returns a frozen :class:`keras_transformer.config.Recipe`.
Table 3 variants are one-line ``dataclasses.replace`` calls in ``table3.py``.
"""

from __future__ import annotations

from typing import Dict

from keras_transformer.config import Recipe
from recipes import base, big, multi30k, table3, tiny

_RECIPES: Dict[str, Recipe] = {
    r.name: r for r in (tiny.RECIPE, base.RECIPE, big.RECIPE, multi30k.RECIPE, *table3.VARIANTS)
}


def names() -> list:
    return sorted(_RECIPES)


def get(name: str) -> Recipe:
    try:
        return _RECIPES[name]
    except KeyError:
        raise ValueError(f"--recipe: unknown recipe {name!r}; known: {', '.join(names())}") from None
