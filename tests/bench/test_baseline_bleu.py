"""bench/baseline_bleu.py scores as the published baseline did: its reference length and its tokens.
Skipped without sacremoses (a bench-only package)."""

import pytest

pytest.importorskip("sacremoses")

from bench import baseline_bleu  # noqa: E402
from keras_transformer.data.files import read_text  # noqa: E402


def test_lower_cases_and_splits_punctuation_but_not_hyphens():
    line = "Ein Boston Terrier läuft über saftig-grünes Gras vor einem weißen Zaun."
    expected = "ein boston terrier läuft über saftig-grünes gras vor einem weißen zaun ."
    assert baseline_bleu.moses_lowercase([line]) == [expected]


def test_case_and_tokenization_do_not_count():
    bleu = baseline_bleu.baseline_bleu(["Ein Hund, der rennt."], ["ein hund , der rennt ."])
    assert bleu.score == pytest.approx(100.0)


def test_reference_length_is_the_baseline_logs_12103_tokens(real_multi30k_dir):
    path = real_multi30k_dir / "test_2016_flickr.de.gz"
    references = read_text(path)
    bleu = baseline_bleu.baseline_bleu(references, references)
    assert (bleu.ref_len, bleu.score) == (12103, pytest.approx(100.0))
