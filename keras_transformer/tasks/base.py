"""The task interface: what differs between the paper's two tasks, and nothing else.

A task (``translation/``, ``parsing/``) owns its corpus reader, the module its exports serve, how its outputs
are decoded from many lines and scored, the dev-set callback of training, and its sample inputs. Training,
checkpoints, averaging, choosing α on dev, export, loading and the pipeline are shared and call a task
through this interface only (as fairseq's ``FairseqTask``, or OpenNMT-tf's one model class per task).
"""

from __future__ import annotations

import time
from typing import List, NamedTuple, Optional, Sequence, Tuple

from keras_transformer.config import PARALLEL_SEARCHES, Recipe, XlaBuckets
from keras_transformer.data import corpora


class Decoded(NamedTuple):
    """A task's outputs for many lines, in input order."""

    outputs: List[str]  # one line each: a translation, a tree
    scores: List[float]  # log P(Y|X) / lp(|Y|) of each
    repaired: int = 0  # outputs that post-processing had to repair (a parser's trees)
    problems: Optional[dict] = None  # what repair fixed, by kind


class Task:
    """One of the paper's tasks; subclasses set the attributes and write the methods that raise here."""

    name = ""  # Recipe.task
    metric = ""  # the score that ranks outputs on the dev set ("bleu", "f1"); a key of score()'s dict
    corpus: corpora.Corpus = corpora.TEXT  # reads the task's corpora (data/corpora.py)
    module_class = None  # the serving.module.ServingModule subclass its exports are
    sample_sentences: Tuple[str, ...] = ()  # what kt-pipeline's last stage decodes with the export
    nbest = False  # whether its exports return n-best lists (kt-translate --nbest)
    xla_search = False  # whether its exports can compile their search with XLA (kt-export --jit_compile)
    stop_rules: Tuple[str, ...] = ("exact",)  # the DecodeConfig.stop_rule values its search takes

    def module(self, model, tokenizer, recipe: Recipe, with_text: bool = True,
               parallel_searches: int = PARALLEL_SEARCHES, xla=None):
        """The exported module over ``model`` (a ``serving.module.ServingModule``); ``xla``: ``XlaBuckets`` for an
        XLA-compiled search (kt-export --jit_compile) or ``StepCompile`` for its step compiled (--step_compile),
        where the task has them (``xla_search``)."""
        if recipe.decode.stop_rule not in self.stop_rules:
            raise ValueError(f"--stop_rule: a {self.name} model's search takes {', '.join(self.stop_rules)} only, "
                             f"not {recipe.decode.stop_rule}")
        if xla is not None and not self.xla_search:
            flag = "--jit_compile" if isinstance(xla, XlaBuckets) else "--step_compile"
            raise ValueError(f"{flag}: a {self.name} model has no XLA-compiled search (translation only)")
        return self.make_module(model, tokenizer, recipe, with_text=with_text, parallel_searches=parallel_searches,
                                **({} if xla is None else {"xla": xla}))

    def make_module(self, model, tokenizer, recipe: Recipe, **kwargs):
        """``module_class(model, tokenizer, recipe, **kwargs)``; a task whose models differ in kind picks here."""
        return self.module_class(model, tokenizer, recipe, **kwargs)

    def ensemble_module(self, models, tokenizer, recipe: Recipe, weights=None, **kwargs):
        """The exported module over an ensemble of ``models`` of one tokenizer (kt-export --model=a,b), the first
        one's ``recipe``; a ValueError where the task's models do not ensemble."""
        raise ValueError(f"--model: {self.name} models do not ensemble")

    def prepare_model(self, model, tokenizer) -> None:
        """Fills what a new model takes from the tokenizer rather than from training (nothing, unless a task
        says so); called before a training run restores or starts its weights."""

    def read_split(self, recipe: Recipe, split: str, data_dir) -> Tuple[List[str], list]:
        """(inputs, references) of one of the recipe's splits: what ``decode`` reads and ``score`` compares."""
        raise NotImplementedError

    def decode(self, loaded, lines: Sequence[str], batch_size: int = 32, beam_size: Optional[int] = None,
               alpha: Optional[float] = None, extra_length: Optional[int] = None) -> Decoded:
        """The outputs of ``loaded`` (``artifacts.Loaded``) for ``lines``; None options take the recipe's."""
        raise NotImplementedError

    def score(self, outputs: Sequence[str], references: Sequence) -> dict:
        """Corpus-level scores of ``outputs`` against ``references``, ``metric`` among them."""
        raise NotImplementedError

    def format_scores(self, scores: dict) -> str:
        """One line of the scores, as the task's tools print them."""
        raise NotImplementedError

    def results(self, scores: dict) -> dict:
        """What an export's metadata.json records of the test split's scores."""
        raise NotImplementedError

    def dev_callback(self, recipe: Recipe, tokenizer, logdir: str, num_samples: int, data_dir=None):
        """The Keras callback that decodes ``num_samples`` dev inputs at each checkpoint and logs ``val_<metric>``."""
        raise NotImplementedError

    def evaluate(self, loaded, inputs: Sequence[str], references: Sequence, **options) -> Tuple[dict, Decoded]:
        """Decode ``inputs`` and score them: (scores + {"seconds", "repaired"}, the decoded outputs)."""
        start = time.time()
        decoded = self.decode(loaded, inputs, **options)
        seconds = time.time() - start
        return dict(self.score(decoded.outputs, references), seconds=round(seconds, 2),
                    repaired=decoded.repaired), decoded


def resolve_options(loaded, beam_size, alpha, extra_length) -> Tuple[int, float, int]:
    """(beam_size, alpha, extra_length) with None options taken from the loaded model's recipe (§6.1 values)."""
    return tuple(d if v is None else v for v, d in zip((beam_size, alpha, extra_length), loaded.defaults))
