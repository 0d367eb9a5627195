"""Typed, frozen configuration for every stage of the pipeline.

A recipe (``recipes/``) is one :class:`Recipe`; a variant is ``dataclasses.replace(base, ...)``. Every config
validates itself in ``__post_init__`` and names the offending field in its error. Each field of the configs is
documented by the string written after it, which is also its flag's help (``field_help``, ``cli/common.py``).

    model.py ModelConfig (§3)   data.py DataConfig (§5.1)   train.py TrainConfig (§5.3, §5.4)
    decode.py DecodeConfig (§6.1) and the decoding rules    parsing.py ParsingConfig (§6.3, the parser's additions)
    recipe.py Recipe, override    common.py the tasks
"""

from keras_transformer.config.common import (  # noqa: F401
    CORPORA, STRATEGIES, TASK_CORPORA, TASK_FIELDS, _require, field_help)
from keras_transformer.config.data import DataConfig  # noqa: F401
from keras_transformer.config.decode import (  # noqa: F401
    DECODE_OPTIONS, IN_FLIGHT_BATCHES, PARALLEL_SEARCHES, PRECISIONS, SAMPLING_OPTIONS, STOP_RULES, DecodeConfig,
    StepCompile, XlaBuckets, decode_option_error, sampling_option_error)
from keras_transformer.config.model import ModelConfig  # noqa: F401
from keras_transformer.config.parsing import ParsingConfig  # noqa: F401
from keras_transformer.config.recipe import Recipe, override  # noqa: F401
from keras_transformer.config.train import TrainConfig  # noqa: F401
