"""What every config module shares: the tasks and their corpora, the strategies, the field check, field help.

    field_help(config_class) -> {field: its docstring}   the help text of each field, as its flag shows it
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
from typing import Dict

# The paper's two tasks (``tasks/``) and the corpora each reads (``DataConfig.corpus``): a recipe names its task;
# one written before recipes named it gets the task of its corpus.
TASK_CORPORA = {
    "translation": ("multi30k", "wmt14", "wmt_t2t", "text"),  # §6.1-6.2
    "parsing": ("ptb",),  # English constituency parsing, §6.3
}
CORPORA = tuple(c for corpora in TASK_CORPORA.values() for c in corpora)
# Fields that only one task reads ("treebank") or requires as given ("shared_vocabulary": one vocabulary).
TASK_FIELDS = {"parsing": ("treebank", "tree_leaves", "shared_vocabulary", "align_words", "chart_labels")}

# The tf.distribute strategies ``training.make_strategy`` builds (``--strategy``); the first is the default.
STRATEGIES = ("mirrored", "one_device", "multi_worker", "tpu")


def _require(condition: bool, field: str, message: str) -> None:
    if not condition:
        raise ValueError(f"{field}: {message}")


@functools.lru_cache(maxsize=None)
def field_help(config_class) -> Dict[str, str]:
    """{field: the string literal written right after it in the class body} (an attribute docstring, as Sphinx
    reads them): the one text that documents a field and is its flag's help (``cli/common.py``)."""
    tree = ast.parse(inspect.getsource(sys.modules[config_class.__module__]))
    body = next(node.body for node in ast.walk(tree)
                if isinstance(node, ast.ClassDef) and node.name == config_class.__name__)
    found = {}
    for node, after in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            found[node.target.id] = " ".join(after.value.value.split())
    return found
