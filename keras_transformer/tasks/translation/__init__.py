"""Translation (§6.1-6.2): the task (``task.py``), its exported ``Translator`` (``module.py``), many lines at
once with n-best lists (``lines.py``), BLEU and chrF (``metric.py``) and dev BLEU during training (``dev.py``)."""

from keras_transformer.tasks.translation.task import TranslationTask

__all__ = ["TranslationTask"]
