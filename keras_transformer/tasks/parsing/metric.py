"""Labeled bracket precision, recall and F1 under EVALB's COLLINS.prm conventions, scored by PYEVALB (§6.3, Table 4).

    score(gold_trees, test_trees) -> {"precision", "recall", "f1", "exact_match" (0-100), "sentences", ...}
    score_pair(gold, test)        -> PYEVALB Result of one sentence (matched, gold and test brackets)
    prepare(tree, gold_tags)      -> the tree as COLLINS.prm scores it

The WSJ results the paper compares with (Table 4) are EVALB's with
COLLINS.prm, whose settings are:

    LABELED 1                      a bracket matches only with its label and span
    DELETE_LABEL TOP, -NONE-       the outer bracket and empty elements are not scored
    DELETE_LABEL , : `` '' .       punctuation is ignored: its words are removed before spans are counted
    EQ_LABEL ADVP PRT              ADVP and PRT are one label

and function tags are stripped (NP-SBJ is NP). POS-tag (preterminal) brackets
are not scored. PYEVALB (PyPI) does the comparison but reads no parameter
file, so :func:`prepare` applies these settings to both trees first. The
parser predicts brackets, not POS tags: a predicted tree takes the gold tags
of its words, by which the punctuation is found (EVALB finds it by the tags
in each file; parsers are scored with gold or tagger tags).

One departure of PYEVALB from EVALB is corrected: PYEVALB intersects the two
bracket lists as *sets*, so two identical brackets (a unary chain X -> X over
the same words, common once punctuation is gone, e.g. (NP (NP the man) ,))
match once while counting twice in ``gold``/``test``, and identical trees
score below 100. EVALB matches a multiset (each gold bracket at most once);
:func:`score_pair` recounts ``matched_brackets`` that way over PYEVALB's own
brackets. Both figures are checked on hand-made trees in tests/parsing.

Corpus figures sum the sentences' brackets (EVALB's "Bracketing Recall/Precision");
F1 = 2PR / (P + R); exact match is EVALB's "Complete match" (matched = gold = test).
"""

from __future__ import annotations

import collections
import contextlib
import sys
from typing import Dict, Optional, Sequence, Tuple

from PYEVALB import parser as pyevalb_parser
from PYEVALB import scorer as pyevalb_scorer

from keras_transformer.tasks.parsing import trees as trees_lib
from keras_transformer.tasks.parsing.trees import Tree

PUNCTUATION_TAGS = (",", ":", "``", "''", ".")  # COLLINS.prm DELETE_LABEL (the words under these tags)
EQUIVALENT_LABELS = {"PRT": "ADVP"}  # COLLINS.prm EQ_LABEL ADVP PRT
DELETED_LABELS = ("TOP", "-NONE-")  # COLLINS.prm DELETE_LABEL (brackets)


def _prepare_node(node: Tree, children) -> Optional[Tree]:
    children = tuple(c for c in children if c is not None)
    if not children:
        return None
    label = trees_lib.strip_function_tags(node.label)
    label = EQUIVALENT_LABELS.get(label, label)
    if label in DELETED_LABELS and len(children) == 1 and not children[0].is_preterminal:
        return children[0]
    return Tree(label, children)


def prepare(tree: Tree, gold_tags: Optional[Sequence[str]] = None) -> Optional[Tree]:
    """``tree`` as COLLINS.prm scores it (module docstring), its words under ``gold_tags`` (default: its own tags);
    None when no word is left (a sentence of punctuation)."""
    tags = list(trees_lib.tags(tree) if gold_tags is None else gold_tags)
    if len(tags) != len(trees_lib.words(tree)):
        raise ValueError(f"gold_tags: {len(tags)} tags for {len(trees_lib.words(tree))} words")
    remaining = iter(tags)

    def leaf(node: Tree) -> Optional[Tree]:
        tag = next(remaining)
        return None if tag in PUNCTUATION_TAGS or tag in DELETED_LABELS else Tree(tag, node.children)

    return trees_lib.fold(tree, leaf, _prepare_node)


@contextlib.contextmanager
def _recursion_room(depth: int):
    """PYEVALB walks a tree recursively, a few frames a level: Python's recursion limit raised for ``depth``
    levels while it does (an unconstrained decoder's tree may nest hundreds deep), then put back."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * depth + 1000))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def score_pair(gold: Tree, test: Tree):
    """PYEVALB's Result for two prepared trees over the same words, ``matched_brackets`` counted as a multiset.

    Raises ValueError when the words differ (PYEVALB's LengthUnmatch/WordsUnmatch).
    """
    depth = max(trees_lib.fold(tree, lambda leaf: 1, lambda node, children: 1 + max(children))
                for tree in (gold, test))
    with _recursion_room(depth):
        gold_tree = pyevalb_parser.create_from_bracket_string(trees_lib.to_string(gold))
        test_tree = pyevalb_parser.create_from_bracket_string(trees_lib.to_string(test))
        try:
            result = pyevalb_scorer.Scorer().score_trees(gold_tree, test_tree)
        except (pyevalb_scorer.LengthUnmatch, pyevalb_scorer.WordsUnmatch) as e:
            raise ValueError(" ".join(e.details().split("\n")[:3])) from None
    # EVALB: each gold bracket matches at most one test bracket of the same label and span (a multiset).
    matched = collections.Counter(map(str, gold_tree.non_terminal_labels)) & collections.Counter(
        map(str, test_tree.non_terminal_labels))
    result.matched_brackets = sum(matched.values())
    result.recall = result.matched_brackets / result.gold_brackets
    result.prec = result.matched_brackets / result.test_brackets
    return result


def bracket_scores(matched: int, gold: int, test: int) -> Tuple[float, float, float]:
    """(labeled precision, recall, F1), 0-100, of ``matched`` brackets of ``gold`` gold and ``test`` test ones."""
    precision = 100.0 * matched / test if test else 0.0
    recall = 100.0 * matched / gold if gold else 0.0
    return precision, recall, 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def score(gold_trees: Sequence[Tree], test_trees: Sequence[Tree]) -> Dict:
    """Corpus labeled bracket scores of ``test_trees`` against ``gold_trees`` (same order, same words).

    Returns {"precision", "recall", "f1", "exact_match": float (0-100); "sentences": scored; "skipped": sentences
    with no word left after punctuation is removed; "matched", "gold_brackets", "test_brackets": int;
    "conventions": str}. A pair whose words differ is a ValueError naming its index.
    """
    if len(gold_trees) != len(test_trees):
        raise ValueError(f"test_trees: {len(test_trees)} trees for {len(gold_trees)} gold trees")
    if not gold_trees:
        raise ValueError("gold_trees: empty; nothing to score")
    matched = gold = test = exact = sentences = skipped = 0
    for index, (gold_tree, test_tree) in enumerate(zip(gold_trees, test_trees)):
        gold_tags = trees_lib.tags(gold_tree)
        if trees_lib.words(gold_tree) != trees_lib.words(test_tree):
            raise ValueError(f"tree {index}: the test tree's words differ from the gold tree's")
        prepared_gold, prepared_test = prepare(gold_tree), prepare(test_tree, gold_tags)
        if prepared_gold is None:
            skipped += 1
            continue
        result = score_pair(prepared_gold, prepared_test)
        sentences += 1
        matched += result.matched_brackets
        gold += result.gold_brackets
        test += result.test_brackets
        exact += result.matched_brackets == result.gold_brackets == result.test_brackets
    precision, recall, f1 = bracket_scores(matched, gold, test)
    return {"precision": precision, "recall": recall, "f1": f1,
            "exact_match": 100.0 * exact / sentences if sentences else 0.0,
            "sentences": sentences, "skipped": skipped, "matched": matched, "gold_brackets": gold,
            "test_brackets": test, "conventions": "EVALB COLLINS.prm (labeled; punctuation, -NONE-, TOP deleted; "
                                                  "function tags stripped; ADVP=PRT) via PYEVALB"}


def format_scores(scores: Dict) -> str:
    """One line: "LP 88.12  LR 87.40  F1 87.76  exact 31.36  (118 sentences; EVALB COLLINS.prm via PYEVALB)"."""
    return (f"LP {scores['precision']:.2f}  LR {scores['recall']:.2f}  F1 {scores['f1']:.2f}  "
            f"exact {scores['exact_match']:.2f}  ({scores['sentences']} sentences; {scores['conventions']})")
