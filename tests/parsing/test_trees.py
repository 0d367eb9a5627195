"""Reading, cleaning and linearizing trees; tree -> sequence -> tree on every tree of the WSJ sample."""

import pytest

from keras_transformer.tasks.parsing import trees
from keras_transformer.tasks.parsing.trees import Tree

WSJ_0001 = """
( (S
    (NP-SBJ
      (NP (NNP Pierre) (NNP Vinken) )
      (, ,)
      (ADJP
        (NP (CD 61) (NNS years) )
        (JJ old) )
      (, ,) )
    (VP (MD will)
      (VP (VB join)
        (NP (DT the) (NN board) )
        (PP-CLR (IN as)
          (NP (DT a) (JJ nonexecutive) (NN director) ))
        (NP-TMP (NNP Nov.) (CD 29) )))
    (. .) ))
"""

WITH_EMPTY = "( (S (NP-SBJ-1 (-NONE- *) ) (VP (VBD said) (SBAR (-NONE- 0) (S (-NONE- *T*-1) ))) (. .) ))"


def test_read_and_clean_wsj_0001():
    (tree,) = trees.read_trees(WSJ_0001)
    assert tree.label == "" and len(tree.children) == 1  # the treebank's unlabelled outer bracket
    cleaned = trees.clean(tree)
    assert trees.to_string(cleaned) == (
        "(S (NP (NP (NNP Pierre) (NNP Vinken)) (, ,) (ADJP (NP (CD 61) (NNS years)) (JJ old)) (, ,)) "
        "(VP (MD will) (VP (VB join) (NP (DT the) (NN board)) (PP (IN as) (NP (DT a) (JJ nonexecutive) "
        "(NN director))) (NP (NNP Nov.) (CD 29)))) (. .))")
    assert trees.linearize(cleaned) == (
        "(S (NP (NP XX XX ) XX (ADJP (NP XX XX ) XX ) XX ) (VP XX (VP XX (NP XX XX ) (PP XX (NP XX XX XX ) ) "
        "(NP XX XX ) ) ) XX )")
    assert trees.words(cleaned)[:4] == ["Pierre", "Vinken", ",", "61"] and len(trees.words(cleaned)) == 18
    assert trees.tags(cleaned)[:4] == ["NNP", "NNP", ",", "CD"]


def test_clean_removes_empty_elements_and_the_constituents_they_empty():
    (tree,) = trees.read_trees(WITH_EMPTY)
    assert trees.to_string(trees.clean(tree)) == "(S (VP (VBD said)) (. .))"
    assert trees.clean(trees.read_trees("( (S (NP-SBJ (-NONE- *) )))")[0]) is None  # no word left


@pytest.mark.parametrize("label, stripped", [("NP-SBJ-1", "NP"), ("PP-LOC=2", "PP"), ("ADVP|PRT", "ADVP"),
                                             ("S-TPC-1", "S"), ("-NONE-", "-NONE-"), ("-LRB-", "-LRB-"),
                                             ("WHNP", "WHNP")])
def test_strip_function_tags(label, stripped):
    assert trees.strip_function_tags(label) == stripped


def test_one_word_tree_gets_a_constituent():
    assert trees.to_string(trees.clean(trees.read_trees("( (NN Yes) )")[0])) == "(S (NN Yes))"


@pytest.mark.parametrize("text, message", [
    ("(S (NP (DT the) (NN dog))", "bracket (S ...) is never closed"),
    ("(S (NN dog)))", "')' closes no bracket"),
    ("(S (NN big dog))", "must hold one word or subtrees"),
    ("dog (S (NN dog))", "'dog' outside any bracket"),
])
def test_read_errors_name_file_and_line(text, message):
    with pytest.raises(ValueError, match=rf"^wsj_0042.mrg:1: .*{message.replace('(', '[(]').replace(')', '[)]')}"):
        trees.read_trees(text, "wsj_0042.mrg")


def test_error_line_numbers():
    with pytest.raises(ValueError, match=r"^f.mrg:3: "):
        trees.read_trees("(S (NN a))\n(S (NN b))\n(S (NN big dog))", "f.mrg")


def test_delinearize_takes_tags_or_the_placeholder():
    tree = trees.delinearize("(S (NP XX XX ) (VP XX ) XX )", ["Ms.", "Haag", "plays", "."])
    assert trees.to_string(tree) == "(S (NP (XX Ms.) (XX Haag)) (VP (XX plays)) (XX .))"
    with pytest.raises(ValueError, match="more slots"):
        trees.delinearize("(S XX XX )", ["one"])
    with pytest.raises(ValueError, match="repair it"):
        trees.delinearize("(S XX", ["one"])


def test_tag_leaves_carry_the_pos_tags_both_ways():
    tree = trees.clean(trees.read_trees("( (S (NP-SBJ (NNP Ms.) (NNP Haag)) (VP (VBZ plays)) (. .)) )")[0])
    assert trees.linearize(tree, tag_leaves=True) == "(S (NP @NNP @NNP ) (VP @VBZ ) @. )"
    assert trees.delinearize("(S (NP @NNP @NNP ) (VP @VBZ ) @. )", trees.words(tree)) == tree  # its own tags
    assert trees.to_string(trees.delinearize("(S @DT XX )", ["a", "b"])) == "(S (DT a) (XX b))"
    assert [trees.is_leaf(t) for t in ("XX", "@NN", "@,", "@", "(NP", ")")] == [True, True, True, False, False, False]


def test_words_with_brackets_are_escaped_in_strings():
    assert trees.to_string(Tree("S", (Tree("XX", ("(",)), Tree("XX", (")",))))) == "(S (XX -LRB-) (XX -RRB-))"


def test_round_trip_on_every_sample_tree(sample_splits):
    count = 0
    for split in sample_splits.values():
        for tree, source, target in zip(split.trees, split.sources, split.targets):
            assert source == " ".join(trees.words(tree))
            assert target == trees.linearize(tree)
            assert trees.delinearize(trees.linearize(tree, tag_leaves=True), source.split()) == tree
            assert trees.delinearize(target, source.split(), trees.tags(tree)) == tree  # tree -> sequence -> tree
            assert trees.read_trees(trees.to_string(tree)) == [tree]  # and through its one-line string
            assert trees.repair(target, len(source.split())) == trees.Repaired(target, ())  # nothing to repair
            count += 1
    assert count == 3914  # every sentence of the sample (SOURCE.md)
