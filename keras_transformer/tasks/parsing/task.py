"""The parsing task (§6.3): the ``tasks.base.Task`` the shared code calls for a parser: the treebank corpus,
``Parser`` exports, many sentences at once (``lines.py``), EVALB F1 (``metric.py``) and dev F1 (``dev.py``)."""

from __future__ import annotations

import numpy as np

from keras_transformer.config import Recipe
from keras_transformer.data import corpora
from keras_transformer.model import Transformer, register_task_model
from keras_transformer.tasks.base import Decoded, Task
from keras_transformer.tasks.parsing import constraint, metric, treebank
from keras_transformer.tasks.parsing import trees as trees_lib
from keras_transformer.tasks.parsing.dev import DevF1
from keras_transformer.tasks.parsing.lines import parse_lines
from keras_transformer.tasks.parsing.chart import ChartParser
from keras_transformer.tasks.parsing.model import ParsingTransformer
from keras_transformer.tasks.parsing.module import EnsembleChartParsing, Parser, parser_module


class ParsingTask(Task):
    name = "parsing"
    metric = "f1"  # EVALB COLLINS.prm labeled bracket F1
    corpus = treebank.TREEBANK
    module_class = Parser
    sample_sentences = (
        "Ms. Haag plays Elianti .",
        "The company said it expects to report a loss for the third quarter .",
        "Two young children are playing soccer on a field .",
    )

    def make_module(self, model, tokenizer, recipe, **kwargs):
        return parser_module(model, tokenizer, recipe, **kwargs)

    def ensemble_module(self, models, tokenizer, recipe, weights=None, **kwargs):
        return EnsembleChartParsing(models, tokenizer, recipe, weights, **kwargs)

    def prepare_model(self, model, tokenizer):
        if isinstance(model, ChartParser):  # which pieces open which label, which are which tag, which start a word
            model.set_tables(constraint.token_kinds(tokenizer))
        if isinstance(model, ParsingTransformer):  # which target pieces are leaves, which source pieces start a word
            tokens = constraint.token_kinds(tokenizer)
            kinds = np.asarray(tokens.kinds)
            depth_change = (np.equal(kinds, constraint.OPEN).astype(np.int32) - np.equal(kinds, constraint.CLOSE)
                            if model.parsing.bracket_depth else None)
            model.set_word_tables(np.equal(kinds, constraint.SLOT), np.asarray(tokens.word_starts), depth_change)

    def read_split(self, recipe, split, data_dir):
        gold = treebank.load(recipe.data, split, corpora.resolve_data_dir(data_dir)).trees
        return [" ".join(trees_lib.words(tree)) for tree in gold], list(gold)

    def decode(self, loaded, lines, batch_size=32, beam_size=None, alpha=None, extra_length=None):
        parses = parse_lines(loaded, lines, batch_size, beam_size, alpha, extra_length)
        return Decoded(parses.trees, [float(s) for s in parses.scores], parses.repaired, dict(parses.problems))

    def score(self, outputs, references):
        return metric.score(references, [trees_lib.read_trees(tree)[0] for tree in outputs])

    def format_scores(self, scores):
        return f"{metric.format_scores(scores)}; {scores.get('repaired', 0)} outputs repaired"

    def results(self, scores):
        return {**{key: round(scores[key], 2) for key in ("precision", "recall", "f1", "exact_match")},
                "repaired": scores["repaired"], "scoring": scores["conventions"]}

    def dev_callback(self, recipe, tokenizer, logdir, num_samples, data_dir=None):
        return DevF1.from_eval_split(recipe, tokenizer, logdir, num_samples, data_dir)


def model_class(recipe: Recipe) -> type:
    """A parsing recipe's model: ``chart.ChartParser`` with ``chart_labels``, ``model.ParsingTransformer`` with
    ``align_words``, else the paper's Transformer."""
    if recipe.parsing.chart_labels:
        return ChartParser
    return ParsingTransformer if recipe.parsing.align_words else Transformer


register_task_model("parsing", model_class)
