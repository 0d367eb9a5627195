"""The paper's two tasks behind one interface (``base.Task``): translation and constituency parsing (§6.3).

    get(recipe_or_name) -> Task   the task a recipe names (``Recipe.task``)
    export(model, tokenizer, recipe, export_dir, with_text=True, info=None) -> export_dir   its task's SavedModel
"""

from __future__ import annotations

from typing import Union

from keras_transformer.config import PARALLEL_SEARCHES, Recipe
from keras_transformer.serving import writer
from keras_transformer.tasks.base import Task
from keras_transformer.tasks.parsing import ParsingTask
from keras_transformer.tasks.translation import TranslationTask

TASKS = {task.name: task for task in (TranslationTask(), ParsingTask())}


def get(recipe_or_name: Union[Recipe, str]) -> Task:
    """The task of a recipe (its ``task`` field) or of a task name; a ValueError naming it when unknown."""
    name = recipe_or_name.task if isinstance(recipe_or_name, Recipe) else recipe_or_name
    if name not in TASKS:
        raise ValueError(f"task: unknown task {name!r}; expected {', '.join(TASKS)}")
    return TASKS[name]


def export(model, tokenizer, recipe: Recipe, export_dir, with_text: bool = True, info=None,
           parallel_searches: int = PARALLEL_SEARCHES, xla=None) -> str:
    """Write ``model`` as the SavedModel of its recipe's task (a translator, a parser) to ``export_dir``
    (``serving.writer.write``: whole or not at all); returns it. ``xla``: ``XlaBuckets`` for an XLA-compiled
    search (translation)."""
    module = get(recipe).module(model, tokenizer, recipe, with_text=with_text, parallel_searches=parallel_searches,
                                xla=xla)
    return writer.write(module, export_dir, info=info)


__all__ = ["TASKS", "Task", "export", "get"]
