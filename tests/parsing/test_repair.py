"""Bracket repair: every kind of malformed decoder output becomes one tree with one slot per word."""

import random
import sys

import pytest

from keras_transformer.tasks.parsing import metric, trees


@pytest.mark.parametrize("sequence, num_words, fixed, problems", [
    ("(S (NP XX XX ) (VP XX ) XX )", 4, "(S (NP XX XX ) (VP XX ) XX )", ()),  # well formed: unchanged
    ("(S XX ) )", 1, "(S XX )", ("unmatched )",)),
    ("(S (NP XX XX", 2, "(S (NP XX XX ) )", ("unclosed (", "unclosed (")),
    ("(S (NP ) XX )", 1, "(S XX )", ("empty constituent",)),
    ("(S (NP XX XX ) (VP XX XX ) )", 3, "(S (NP XX XX ) (VP XX ) )", ("too many slots",)),
    ("(S (NP XX XX ) (VP XX XX ) )", 2, "(S (NP XX XX ) )", ("too many slots",)),  # VP emptied: gone
    ("(S (NP XX ) )", 3, "(S (NP XX ) XX XX )", ("too few slots",)),  # missing slots go to the root
    ("(NP XX ) (VP XX )", 2, "(S (NP XX ) (VP XX ) )", ("no single root",)),
    ("XX XX", 2, "(S XX XX )", ("no single root",)),
    ("(S foo XX )", 1, "(S XX )", ("unknown token",)),
    ("", 3, "(S XX XX XX )", ("too few slots", "no tree")),
    (") ) (", 2, "(S XX XX )", ("unmatched )", "unmatched )", "unknown token", "too few slots",
                                "no tree")),
    ("(S XX )", 0, "", ("too many slots",)),
    ("", 0, "", ()),
    ("(S (NP @DT @NN ) (VP @VBZ @NN ) )", 3, "(S (NP @DT @NN ) (VP @VBZ ) )", ("too many slots",)),  # tag leaves
    ("(NP @DT ) @NN", 3, "(S (NP @DT ) @NN XX )", ("too few slots", "no single root")),
])
def test_repair_cases(sequence, num_words, fixed, problems):
    result = trees.repair(sequence, num_words)
    assert result.sequence == fixed
    assert result.problems == problems
    assert result.repaired == bool(problems)


def test_any_token_soup_becomes_a_tree_over_the_words():
    rng = random.Random(0)
    vocabulary = ["(S", "(NP", "(VP", "(PP", ")", ")", "XX", "XX", "XX", "junk", "("]
    for _ in range(2000):
        sequence = " ".join(rng.choice(vocabulary) for _ in range(rng.randrange(0, 30)))
        num_words = rng.randrange(0, 8)
        result = trees.repair(sequence, num_words)
        words = [f"w{i}" for i in range(num_words)]
        if num_words:
            tree = trees.delinearize(result.sequence, words)  # raises unless well formed with every word
            assert trees.words(tree) == words
            assert trees.repair(result.sequence, num_words).problems == ()  # a repaired tree needs no repair
        else:
            assert result.sequence == ""


def test_a_tree_thousands_of_brackets_deep_is_repaired_written_and_scored():
    """An unconstrained decoder may open hundreds of brackets; nothing recurses per level (trees.fold)."""
    depth = 5000  # Python's recursion limit is 1,000 frames
    sequence = " ".join(["(S"] * depth + ["@DT", "@NN", "@VBZ", "@NN"] + [")"] * (depth - 1))  # one left open
    fixed = trees.repair(sequence, 3)
    assert fixed.problems == ("unclosed (", "too many slots")
    assert fixed.sequence == " ".join(["(S"] * depth + ["@DT", "@NN", "@VBZ"] + [")"] * depth)
    tree = trees.delinearize(fixed.sequence, ["The", "dog", "barks"])
    written = trees.to_string(tree)
    assert written == "(S " * depth + "(DT The) (NN dog) (VBZ barks)" + ")" * depth
    assert trees.linearize(trees.read_trees(written)[0], tag_leaves=True) == fixed.sequence
    assert trees.labels(tree) == ["S"] * depth and trees.tags(tree) == ["DT", "NN", "VBZ"]
    gold = trees.read_trees("(S (NP (DT The) (NN dog)) (VP (VBZ barks)))")[0]
    limit = sys.getrecursionlimit()
    scores = metric.score([gold], [tree])  # the one (S 0 3) of the test's 5,000 matches the gold's
    assert (scores["matched"], scores["gold_brackets"], scores["test_brackets"]) == (1, 3, depth)
    assert sys.getrecursionlimit() == limit  # PYEVALB's room is given back
