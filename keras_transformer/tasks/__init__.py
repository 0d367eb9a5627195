"""The paper's two tasks behind one interface (``base.Task``): translation and constituency parsing (§6.3).

    get(recipe_or_name) -> Task   the task a recipe names (``Recipe.task``)
"""

from __future__ import annotations

from typing import Union

from keras_transformer.config import Recipe
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


__all__ = ["TASKS", "Task", "get"]
