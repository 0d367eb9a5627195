"""Everything needed to reproduce one experiment: ``Recipe(model, data, train, decode, parsing)``, and ``override``."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from keras_transformer.config.common import TASK_CORPORA, TASK_FIELDS, _require
from keras_transformer.config.data import DataConfig
from keras_transformer.config.decode import DecodeConfig
from keras_transformer.config.model import ModelConfig
from keras_transformer.config.parsing import ParsingConfig
from keras_transformer.config.train import TrainConfig


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Everything needed to reproduce one experiment."""

    name: str
    model: ModelConfig = ModelConfig()
    data: DataConfig = DataConfig()
    train: TrainConfig = TrainConfig()
    decode: DecodeConfig = DecodeConfig()
    parsing: ParsingConfig = ParsingConfig()  # the parsing task's additions to the model
    description: str = ""
    task: str = ""  # "translation" or "parsing" (TASK_CORPORA); "" -> the task of data.corpus

    def __post_init__(self):
        _require(bool(self.name), "name", "must be non-empty")
        if not self.task:
            object.__setattr__(self, "task", next(t for t, cs in TASK_CORPORA.items() if self.data.corpus in cs))
        _require(self.task in TASK_CORPORA, "task", f"unknown task {self.task!r}; expected {', '.join(TASK_CORPORA)}")
        _require(self.data.corpus in TASK_CORPORA[self.task], "corpus",
                 f"the {self.task} task reads {', '.join(TASK_CORPORA[self.task])}, not {self.data.corpus!r}")
        for name, unset in (("treebank", None), ("tree_leaves", "slot")):
            _require(getattr(self.data, name) == unset or name in TASK_FIELDS.get(self.task, ()), name,
                     f"applies to the parsing task only, not {self.task}")
        _require(self.model.shared_vocabulary or "shared_vocabulary" not in TASK_FIELDS.get(self.task, ()),
                 "shared_vocabulary", f"the {self.task} task reads and writes with one vocabulary; it cannot be False")
        _require(not self.parsing.align_words or "align_words" in TASK_FIELDS.get(self.task, ()), "align_words",
                 f"applies to the parsing task only (its leaves align to the input's words), not {self.task}")
        _require(not self.parsing.chart_labels or "chart_labels" in TASK_FIELDS.get(self.task, ()), "chart_labels",
                 f"applies to the parsing task only, not {self.task}")
        _require(not self.parsing.chart_labels or self.data.tree_leaves == "tag", "chart_labels",
                 f"needs tree_leaves='tag' (the chart parser tags the words it brackets), not "
                 f"{self.data.tree_leaves!r}")
        _require(not self.parsing.tag_loss or self.data.tree_leaves == "tag", "tag_loss",
                 f"needs tree_leaves='tag' (the leaves it predicts), not {self.data.tree_leaves!r}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> "Recipe":
        """Inverse of ``to_dict``. An unknown key or a value of the wrong type is a ValueError naming it, as
        ``section.field`` (``recipe_keys``), and so is a value its config refuses; keys older versions wrote and
        this one no longer uses are dropped."""
        from keras_transformer.recipe_keys import check_recipe_keys, check_recipe_types

        d = check_recipe_types(check_recipe_keys(d, cls), cls)  # every section there, each value of its type
        configs = {}
        for section, config_cls in (("model", ModelConfig), ("data", DataConfig), ("train", TrainConfig),
                                    ("decode", DecodeConfig), ("parsing", ParsingConfig)):
            values = {k: tuple(v) if isinstance(v, list) else v for k, v in d.get(section, {}).items()}  # JSON lists
            try:
                configs[section] = config_cls(**values)
            except ValueError as e:  # "d_model: must be ..." -> "model.d_model: must be ..."
                raise ValueError(f"{section}.{e}") from None
        return cls(
            name=d.get("name", ""),
            description=d.get("description", ""),
            task=d.get("task", ""),  # recipes written before tasks were named: the task of their corpus
            **configs,
        )


def override(config: Any, **changes: Any) -> Any:
    """``dataclasses.replace`` that drops ``None`` values (unset flags)."""
    changes = {k: v for k, v in changes.items() if v is not None}
    return dataclasses.replace(config, **changes) if changes else config
