"""Named recipes: one small file each, looked up by name.

``recipes.get("base")`` returns a frozen :class:`keras_transformer.config.Recipe`.
Table 3 variants are one-line ``dataclasses.replace`` calls in ``table3.py``;
the paper's En-Fr models (§5.1, §6.1) are in ``wmt14_enfr.py``; its constituency parsers (§6.3) in
``ptb_sample.py`` and ``wsj_paper.py``.
``recipes.load`` also reads a recipe JSON file, e.g. the ``recipe.json`` a training run writes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict

from keras_transformer.config import Recipe
from keras_transformer.workdir import RECIPE_FILE
from keras_transformer.recipes import base, big, multi30k, ptb_sample, table3, tiny, wmt14_enfr, wsj_paper


_RECIPES: Dict[str, Recipe] = {
    r.name: r
    for r in (tiny.RECIPE, base.RECIPE, big.RECIPE, multi30k.RECIPE, multi30k.EN_FR, multi30k.MULTI, multi30k.D256,
              multi30k.DEMO, *wmt14_enfr.RECIPES, *table3.VARIANTS, ptb_sample.RECIPE, ptb_sample.CHART,
              wsj_paper.RECIPE)
}


def names() -> list:
    return sorted(_RECIPES)


def get(name: str) -> Recipe:
    try:
        return _RECIPES[name]
    except KeyError:
        raise ValueError(f"--recipe: unknown recipe {name!r}; known: {', '.join(names())}") from None


def load(name_or_path: str) -> Recipe:
    """A recipe by name, else from a JSON file (``Recipe.to_json``) or a work directory holding ``recipe.json``.

    Raises ValueError starting "--recipe:" that lists the known names when ``name_or_path``
    is neither, or names the file when it is not a valid recipe.
    """
    if name_or_path in _RECIPES:
        return _RECIPES[name_or_path]
    path = Path(name_or_path).expanduser()
    if path.is_dir() and (path / RECIPE_FILE).is_file():
        path = path / RECIPE_FILE
    if not path.is_file():
        raise ValueError(f"--recipe: {name_or_path!r} is neither a known recipe nor a recipe JSON file; "
                         f"known: {', '.join(names())}")
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:  # not JSON, not UTF-8
        raise ValueError(f"--recipe: {path}: not a valid recipe JSON file ({e})") from None
    try:
        return Recipe.from_dict(d)
    except ValueError as e:  # an unknown key, a value of the wrong type or outside its rule: named section.field
        raise ValueError(f"--recipe: {path}: {e}") from None
    except (TypeError, AttributeError) as e:  # what the checks above do not foresee: still one line
        raise ValueError(f"--recipe: {path}: not a valid recipe JSON file ({type(e).__name__}: {e})") from None
