"""The shipped model as CTranslate2 (float32 and int8) against its SavedModel on 200 test_2016_flickr sentences.

Through our search (``ctranslate2_search="gnmt"``) float32 translates at least 95% of them identically, scores
within 0.1% (measured on the d_model-128 model: all 200 identical, scores within 2e-6 at the median and 5.5e-4
relative at most, 2.5e-3 on one 5-word sentence; 1e-4 at most on the d_model-256 model shipped before it);
int8's BLEU is within 1.0 of float32's (0.56 below it on an AVX2-only CPU, whose int8 kernels are not
AVX-512 VNNI's; 200 sentences).
CTranslate2's own search (the default) scores within 1.5 BLEU of ours.
About 45 s on 2 CPU cores, most of it the SavedModel's own beam search.
"""

import os

import numpy as np
import pytest

from keras_transformer import inference
from keras_transformer.tasks.translation import metric
from keras_transformer.data import corpora
from tests.conftest import REPO_ROOT

pytest.importorskip("ctranslate2")

from keras_transformer.engines import ctranslate2_convert  # noqa: E402
from keras_transformer.tasks.translation import lines as translation_lines
from keras_transformer import artifacts

pytestmark = pytest.mark.slow

SHIPPED = os.path.join(REPO_ROOT, "saved_models", "multi30k_en_de")
SENTENCES = 200


@pytest.fixture(scope="module")
def test_set(real_multi30k_dir):
    """(sources, references): the first 200 pairs of test_2016_flickr."""
    if not os.path.isfile(os.path.join(SHIPPED, "saved_model.pb")):
        pytest.skip(f"{SHIPPED} is absent")
    path = real_multi30k_dir
    return (corpora.read_lines(path / "test_2016_flickr.en.gz")[:SENTENCES],
            corpora.read_lines(path / "test_2016_flickr.de.gz")[:SENTENCES])


def test_float32_translates_as_the_saved_model_and_int8_keeps_its_bleu(test_set, tmp_path):
    sources, references = test_set
    model, recipe, tok = artifacts.load_model(SHIPPED)
    float32 = ctranslate2_convert.convert(model, tok, recipe, tmp_path / "float32", "float32")
    int8 = ctranslate2_convert.convert(model, tok, recipe, tmp_path / "int8", "int8")

    expected, expected_scores = translation_lines.translate_lines(inference.load(SHIPPED), sources)
    got, scores = translation_lines.translate_lines(inference.load(float32, ctranslate2_search="gnmt"), sources)
    same = [a == b for a, b in zip(got, expected)]
    assert sum(same) >= 0.95 * SENTENCES, f"{sum(same)} of {SENTENCES} identical"
    np.testing.assert_allclose(scores[same], expected_scores[same], rtol=1e-3, atol=1e-4)

    quantized, _ = translation_lines.translate_lines(inference.load(int8, ctranslate2_search="gnmt"), sources)
    native, _ = translation_lines.translate_lines(inference.load(float32), sources)
    bleu32, bleu8, bleu_native = (metric.score(h, references)["bleu"] for h in (got, quantized, native))
    assert abs(bleu8 - bleu32) <= 1.0, f"int8 BLEU {bleu8:.2f}, float32 {bleu32:.2f}"
    assert abs(bleu_native - bleu32) <= 1.5, f"native search BLEU {bleu_native:.2f}, ours {bleu32:.2f}"
