"""Parsing many sentences (§6.3), each output checked to be one tree over the sentence's words, and scored.

    parse_lines(parser, sentences, batch_size=32, beam_size=None, alpha=None, extra_length=None, constrained=True)
        -> Parses(trees, linearized, scores, repaired, problems)
    evaluate(parser, gold_trees, ...) -> metric.score's dict + repaired, seconds, decoding options

``parser`` is an ``artifacts.Loaded`` parser (``inference.load``): a SavedModel's ``parse_with_options`` or a
``Parser`` module's, given length-sorted batches one at a time (``decoding.lines.run_batches``: two in flight
gained nothing at beam 21 on the 2-core benchmark machine, where two searches per batch keep both cores
busy). ``parse_lines`` checks every tree in Python (one tree over exactly the input's words) and repairs any
that is not (``trees.repair``), counting them: 0 with the constraint, by construction.
``constrained=False`` (work directories only) decodes with the plain beam search and repairs in Python, which
measures how often a free decoder's output is not a tree.
"""

from __future__ import annotations

import collections
import time
from typing import List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from keras_transformer.decoding.lines import run_batches
from keras_transformer.tasks.base import resolve_options
from keras_transformer.tasks.parsing import metric
from keras_transformer.tasks.parsing import trees as trees_lib
from keras_transformer.tasks.parsing.module import split_words


class Parses(NamedTuple):
    trees: List[str]  # one line of PTB brackets per sentence, words in place, POS tags XX
    linearized: List[str]  # the decoder's best sequence, as it came
    scores: np.ndarray  # [N] log P / lp of the best sequence
    repaired: int  # outputs that were not one tree over exactly the sentence's words
    problems: collections.Counter  # what repair fixed, by kind


def _checked(tree: str, words: List[str]) -> bool:
    try:
        found = trees_lib.read_trees(tree)
    except ValueError:
        return False
    return len(found) == 1 and trees_lib.words(found[0]) == [trees_lib.escape_word(w) for w in words]


def parse_lines(parser, sentences: Sequence[str], batch_size: int = 32,
                beam_size: Optional[int] = None, alpha: Optional[float] = None,
                extra_length: Optional[int] = None, constrained: bool = True) -> Parses:
    """Trees of ``sentences`` (space-separated words), in input order; None options take the recipe's."""
    if not constrained and parser.unconstrained is None:
        raise ValueError("constrained: unconstrained decoding needs a work directory, not a SavedModel")
    options = resolve_options(parser, beam_size, alpha, extra_length)
    n = len(sentences)
    trees, linearized, scores = [""] * n, [""] * n, np.zeros([n], np.float32)
    repaired, problems = 0, collections.Counter()
    fn = parser.fn if constrained else parser.unconstrained
    for batch, out in run_batches(fn, list(sentences), batch_size, options):
        made = out["trees"].numpy() if constrained else [b""] * len(batch)
        for i, tree, sequence, score in zip(batch, made, out["linearized"].numpy(), out["scores"].numpy()):
            words = split_words(sentences[i])
            tree, sequence = tree.decode("utf-8"), sequence.decode("utf-8")
            if not (constrained and (_checked(tree, words) if words else not tree)):
                fixed = trees_lib.repair(sequence, len(words))
                if fixed.repaired or constrained:
                    repaired += 1
                    problems.update(fixed.problems or ("tree does not hold the sentence's words",))
                tree = trees_lib.to_string(trees_lib.delinearize(fixed.sequence, words)) if words else ""
            trees[i], linearized[i], scores[i] = tree, sequence, score
    return Parses(trees, linearized, scores, repaired, problems)


def evaluate(parser, gold_trees: Sequence[trees_lib.Tree], batch_size: int = 32,
             beam_size: Optional[int] = None, alpha: Optional[float] = None, extra_length: Optional[int] = None,
             constrained: bool = True) -> Tuple[dict, Parses]:
    """Parses the gold trees' sentences and scores them (``metric.score``, EVALB COLLINS.prm).

    Returns (scores + {"repaired", "constrained", "seconds", "beam_size", "alpha", "extra_length"}, the parses).
    """
    sentences = [" ".join(trees_lib.words(tree)) for tree in gold_trees]
    start = time.time()
    parses = parse_lines(parser, sentences, batch_size, beam_size, alpha, extra_length, constrained)
    seconds = time.time() - start
    test = [trees_lib.read_trees(tree)[0] for tree in parses.trees]
    scores = metric.score(gold_trees, test)
    options = dict(zip(("beam_size", "alpha", "extra_length"), resolve_options(parser, beam_size, alpha,
                                                                               extra_length)))
    return dict(scores, repaired=parses.repaired, repair_problems=dict(parses.problems), constrained=constrained,
                seconds=round(seconds, 2), **options), parses
