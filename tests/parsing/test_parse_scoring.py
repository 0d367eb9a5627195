"""EVALB (COLLINS.prm) scoring through PYEVALB, cross-checked on hand-made trees with known precision and recall."""

import pytest
from PYEVALB import parser as pyevalb_parser
from PYEVALB import scorer as pyevalb_scorer

from keras_transformer.tasks.parsing import metric as parse_scoring
from keras_transformer.tasks.parsing import trees


def tree(text):
    (parsed,) = trees.read_trees(text)
    return trees.clean(parsed)


def scores(gold, test):
    return parse_scoring.score([tree(gold)], [tree(test)])


GOLD = "(S (NP (DT the) (NN dog)) (VP (VBD barked)) (. .))"


def test_identical_trees_score_100():
    result = scores(GOLD, GOLD)
    assert (result["precision"], result["recall"], result["f1"], result["exact_match"]) == (100, 100, 100, 100)
    assert result["gold_brackets"] == 3  # S, NP, VP; POS tags and punctuation are not scored


def test_known_precision_and_recall():
    # gold S(0,3) NP(0,2) VP(2,3); test S(0,3) NP(0,1) VP(1,3): only S matches.
    result = scores(GOLD, "(S (NP (XX the)) (VP (XX dog) (XX barked)) (XX .))")
    assert result["matched"] == 1 and result["precision"] == pytest.approx(100 / 3)
    assert result["recall"] == pytest.approx(100 / 3) and result["f1"] == pytest.approx(100 / 3)
    assert result["exact_match"] == 0


def test_fewer_test_brackets_give_full_precision_half_recall():
    gold = "(S (NP (NP (DT the) (NN man)) (PP (IN in) (NP (NN black)))) (VP (VBD left)))"  # S NP NP PP NP VP
    test = "(S (NP (XX the) (XX man) (XX in) (XX black)) (VP (XX left)))"  # S, NP(0,4), VP
    result = scores(gold, test)
    assert (result["matched"], result["gold_brackets"], result["test_brackets"]) == (3, 6, 3)
    assert result["precision"] == 100 and result["recall"] == 50
    assert result["f1"] == pytest.approx(2 * 100 * 50 / 150)


def test_punctuation_is_ignored():
    # The period sits under VP in the test tree and under S in the gold: with punctuation removed, spans agree.
    result = scores("(S (NP (NNP John)) (VP (VBD ran)) (. .))", "(S (NP (XX John)) (VP (XX ran) (XX .)))")
    assert result["f1"] == 100
    # The test tree's tags are ignored: punctuation is found by the gold tags.
    result = scores("(S (NP (NNP John)) (VP (VBD ran)) (, ,) (`` ``))", "(S (NP (XX John)) (VP (XX ran) (XX ,)) "
                                                                       "(XX ``))")
    assert result["f1"] == 100


def test_function_tags_and_advp_prt():
    gold = "(S (NP-SBJ (PRP He)) (VP (VBD gave) (PRT (RP up))))"
    assert scores(gold, "(S (NP (XX He)) (VP (XX gave) (ADVP (XX up))))")["f1"] == 100  # EQ_LABEL ADVP PRT
    assert scores(gold, "(S (NP (XX He)) (VP (XX gave) (PP (XX up))))")["matched"] == 3


def test_duplicate_brackets_match_as_a_multiset():
    # With the comma gone, NP(0,2) appears twice: EVALB matches both; PYEVALB's set intersection matches one.
    gold = "(S (NP (NP (DT the) (NN man)) (, ,)) (VP (VBD left)))"
    prepared = parse_scoring.prepare(tree(gold))
    bracketed = pyevalb_parser.create_from_bracket_string(trees.to_string(prepared))
    raw = pyevalb_scorer.Scorer().score_trees(bracketed, bracketed)
    assert (raw.matched_brackets, raw.gold_brackets) == (3, 4)  # PYEVALB alone: recall 75% of a tree against itself
    result = scores(gold, gold)
    assert (result["matched"], result["gold_brackets"], result["recall"]) == (4, 4, 100)
    # A test tree with the NP once matches one of the two.
    once = scores(gold, "(S (NP (XX the) (XX man) (XX ,)) (VP (XX left)))")
    assert (once["matched"], once["gold_brackets"], once["test_brackets"]) == (3, 4, 3)


def test_corpus_scores_sum_brackets():
    gold = [tree(GOLD), tree("(S (NP (NNP John)) (VP (VBD ran)))")]
    test = [tree(GOLD), tree("(S (VP (XX John) (XX ran)))")]  # 3/3, then S only: 1 of 3 gold, 1 of 2 test
    result = parse_scoring.score(gold, test)
    assert result["precision"] == pytest.approx(100 * 4 / 5) and result["recall"] == pytest.approx(100 * 4 / 6)
    assert result["exact_match"] == 50 and result["sentences"] == 2


def test_words_must_match():
    with pytest.raises(ValueError, match="tree 0: the test tree's words differ"):
        scores(GOLD, "(S (NP (XX a) (XX dog)) (VP (XX barked)) (XX .))")


def test_a_sentence_of_punctuation_is_skipped():
    result = parse_scoring.score([tree("(S (. .))"), tree(GOLD)], [tree("(S (XX .))"), tree(GOLD)])
    assert result["skipped"] == 1 and result["sentences"] == 1 and result["f1"] == 100


def test_every_sample_tree_scores_100_against_itself(sample_splits):
    split = sample_splits["dev"]
    result = parse_scoring.score(split.trees, split.trees)
    assert result["f1"] == 100 and result["exact_match"] == 100 and result["sentences"] == 127
    # The parser's own trees carry XX tags; scored against gold they lose nothing.
    placeholder = [trees.delinearize(t, s.split()) for t, s in zip(split.targets, split.sources)]
    assert parse_scoring.score(split.trees, placeholder)["f1"] == 100
