"""bench/parser_nbest.py: the spans a linearized tree holds, and what each rule picks among K trees."""

import collections

from bench import parser_nbest

FLAT = "(S @DT @NN @VBZ )"  # 1 span
NESTED = "(S (NP @DT @NN ) (VP @VBZ ) )"  # 3 spans


def test_labeled_spans_are_label_first_word_end():
    assert parser_nbest.labeled_spans(NESTED) == collections.Counter(
        {("S", 0, 3): 1, ("NP", 0, 2): 1, ("VP", 2, 3): 1})
    assert parser_nbest.labeled_spans("(S (S @DT ) )") == collections.Counter({("S", 0, 1): 2})  # a multiset


def test_f1_of_spans():
    flat, nested = (parser_nbest.labeled_spans(t) for t in (FLAT, NESTED))
    assert parser_nbest.f1(flat, nested) == 2 * 1 / (1 + 3)
    assert parser_nbest.f1(nested, nested) == 1.0


def test_each_rule_picks_by_its_formula():
    spans = [parser_nbest.labeled_spans(t) for t in (FLAT, NESTED)]
    scores = [-1.0, -2.0]  # the flat tree is the search's best
    assert parser_nbest.pick("best", 0.0, 1.0, scores, spans) == 0
    assert parser_nbest.pick("bonus", 0.4, 1.0, scores, spans) == 0  # -1 + 0.4 > -2 + 1.2
    assert parser_nbest.pick("bonus", 0.6, 1.0, scores, spans) == 1  # -1 + 0.6 < -2 + 1.8
    # p = (0.731, 0.269): expected F1 of the flat tree 0.731 + 0.269 * 0.5, of the nested one 0.731 * 0.5 + 0.269
    assert parser_nbest.pick("expected F1", 0.0, 1.0, scores, spans) == 0
    # P(S 0 3) = 1, P(NP), P(VP) = 0.269: above γ 0.2 the two spans add to the nested tree, below γ 0.3 they cost
    assert parser_nbest.pick("posterior", 0.2, 1.0, scores, spans) == 1
    assert parser_nbest.pick("posterior", 0.3, 1.0, scores, spans) == 0
