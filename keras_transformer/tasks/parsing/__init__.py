"""English constituency parsing (§6.3) as translation: the task (``task.py``), the treebank corpus
(``treebank.py``), trees and their linearization (``trees.py``), the model's word features (``model.py``), the
constrained search (``constraint.py``), the exported ``Parser`` (``module.py``) and EVALB F1 (``metric.py``)."""

from keras_transformer.tasks.parsing.task import ParsingTask

__all__ = ["ParsingTask"]
