"""bench/alignment_layers.py: sure links from the dictionary, and recall, precision and AER counted by hand."""

import pytest

from bench import alignment_layers


def test_sure_links_need_a_word_once_in_the_source_and_one_match_in_the_reference():
    links = alignment_layers.sure_links("A man and a dog, a dog.", "Ein Mann und ein Hund, ein Hund.")
    assert links == {(1, 1)}  # "dog" occurs twice: no link; "a" is not in the dictionary
    assert alignment_layers.sure_links("Two red cars", "Zwei rote Autos") == {(0, 0), (1, 1)}


def test_scores_count_only_the_target_words_the_sure_links_cover():
    gold = [{(0, 0), (1, 1)}]
    # word 0 aligned to 0 (sure) and 2; word 1 to 0 (wrong); word 2 has no sure link and is not counted
    result = alignment_layers.score(["0-0 2-0 0-1 1-2"], gold)
    assert result["recall"] == 0.5 and result["precision"] == pytest.approx(1 / 3, abs=1e-4)
    assert result["aer"] == pytest.approx(1 - 2 * 1 / (3 + 2), abs=1e-4) and result["sure_links"] == 2
