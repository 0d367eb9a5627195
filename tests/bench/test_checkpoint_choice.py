"""bench/checkpoint_choice.py: per-tree counts sum to metric.score's F1, and the split-half comparison."""

import pytest

from bench import checkpoint_choice
from keras_transformer.tasks.parsing import metric, trees

GOLD = trees.read_trees("(S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))\n"
                        "(S (NP (PRP It)) (VP (VBD ran) (ADVP (RB away))))")
FLAT = trees.read_trees("(S (DT The) (NN dog) (VBZ barks) (. .))\n"
                        "(S (PRP It) (VBD ran) (RB away))")


def test_tree_counts_sum_to_the_corpus_score():
    counts = checkpoint_choice.tree_counts(GOLD, FLAT)
    scores = metric.score(GOLD, FLAT)
    assert counts == [(1, 3, 1), (1, 4, 1)]
    assert checkpoint_choice.f1(counts, [0, 1]) == pytest.approx(scores["f1"], abs=1e-9)
    assert checkpoint_choice.f1(checkpoint_choice.tree_counts(GOLD, GOLD), [0, 1]) == 100.0
    with pytest.raises(ValueError, match="1 parses for 2 gold trees"):
        checkpoint_choice.tree_counts(GOLD, FLAT[:1])


def test_split_half_scores_the_pick_on_the_other_half():
    perfect, half_right = [(2, 2, 2)] * 10, [(1, 2, 2)] * 10  # F1 100 and 50 on any trees
    result = checkpoint_choice.split_half({"a": half_right, "b": perfect}, half_right, rounds=5)
    assert result["gain"] == 50.0 and result["wins"] == 100.0  # b is picked on every half, 100 against 50
    assert result["full"] == {"a": 50.0, "b": 100.0} and result["average"] == 50.0
    # a candidate that is perfect on trees 0-4 and empty on 5-9 is picked where the cut favours it; held out
    # it scores below one that is 75 everywhere, so the best single checkpoint loses to the average on average
    lucky = [(2, 2, 2)] * 5 + [(0, 2, 2)] * 5
    steady = [(3, 4, 4)] * 10
    result = checkpoint_choice.split_half({"lucky": lucky, "steady": steady}, steady, rounds=200, seed=1)
    assert result["full"]["lucky"] == 50.0 and result["gain"] < 0
