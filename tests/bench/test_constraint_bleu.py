"""bench/constraint_bleu.py: the reference words drawn as constraints, and the check that an output holds them."""

import random

from bench import constraint_bleu


def test_reference_words_are_distinct_words_of_four_letters_or_more_in_reference_order():
    reference = "Ein Mann, der einen Hund hält, und ein Hund."
    # the candidates: Mann, einen, Hund, hält (punctuation stripped, "Hund" once); 3 drawn, kept in reference order
    assert constraint_bleu.reference_words(reference, 3, random.Random(0)) == ["Mann", "einen", "hält"]
    assert constraint_bleu.reference_words("Ein Hund.", 2, random.Random(0)) == ["Hund"]  # fewer words than asked
    assert constraint_bleu.reference_words(reference, 2, random.Random(5)) == constraint_bleu.reference_words(
        reference, 2, random.Random(5))


def test_an_output_holds_its_phrases_as_written():
    assert constraint_bleu.holds("Ein Mann hält einen Hund.", ["Mann", "einen Hund"])
    assert not constraint_bleu.holds("Ein Mann hält einen Hund.", ["Mann", "Katze"])
