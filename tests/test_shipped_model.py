"""The shipped model, saved_models/multi30k_en_de: it loads out of the box with kt-translate, translates
held sentences sensibly, and kt-evaluate reproduces the scores stored in its metadata.json."""

import json
import os

import pytest

from keras_transformer import recipes
from keras_transformer.config import Recipe
from tests.conftest import REPO_ROOT
from tests.support import run_cli

SHIPPED = os.path.join(REPO_ROOT, "saved_models", "multi30k_en_de")

# Held sentences (not in Multi30k) and German words a sensible translation contains.
HELD = {
    "A dog is running on the beach.": ("Hund", "Strand"),
    "Two men are playing soccer in the park.": ("Männer", "Fußball", "Park"),
    "A little girl in a red dress is eating an apple.": ("Mädchen", "rot", "Kleid", "Apfel"),
    "An old woman is sitting on a bench.": ("Frau", "Bank"),
    "A man rides a bicycle down the street.": ("Mann", "Fahrrad", "Straße"),
}


@pytest.fixture(scope="module")
def metadata():
    with open(os.path.join(SHIPPED, "metadata.json"), encoding="utf-8") as f:
        return json.load(f)


def test_shipped_model_is_small_and_records_what_reproduces_it(metadata):
    # The export is the multi30k recipe as it stands: kt-pipeline --recipe=multi30k reproduces it.
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(SHIPPED) for f in files)
    assert size <= 50 * 2**20
    assert metadata["recipe"] == "multi30k"
    # Fields added since take their defaults, the behaviour the run had (e.g. bpe_dropout 0).
    assert Recipe.from_dict(metadata["recipe_config"]) == recipes.get("multi30k")
    assert metadata["test_split"] == "test_2016_flickr" and metadata["test_sentences"] == 1000
    assert metadata["train_seconds"] <= 2 * 3600
    assert metadata["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|")
    assert metadata["bleu"] >= 38.0
    decode = metadata["decode"]
    assert (decode["beam_size"], decode["extra_length"]) == (4, 50)
    # α was chosen on val (§6.1): the best of the recipe's grid, and the export's default.
    val_bleu = decode["alpha_val_bleu"]
    assert [float(alpha) for alpha in val_bleu] == list(recipes.get("multi30k").decode.alpha_grid)
    assert val_bleu[f"{decode['alpha']:g}"] == max(val_bleu.values())
    with open(os.path.join(SHIPPED, "assets", "export.json"), encoding="utf-8") as f:
        assert json.load(f)["decode"]["alpha"] == decode["alpha"]


def test_translates_held_sentences_sensibly():
    sources = list(HELD)
    result = run_cli("translate", f"--model={SHIPPED}", stdin="".join(f"{s}\n" for s in sources))
    translations = result.stdout.splitlines()
    assert len(translations) == len(sources)
    for source, translation in zip(sources, translations):
        missing = [w for w in HELD[source] if w.lower() not in translation.lower()]
        assert not missing, f"{source!r} -> {translation!r}: no {missing}"


@pytest.mark.slow
def test_kt_evaluate_reproduces_the_stored_scores(metadata, tmp_path, real_multi30k_dir):
    real_data_dir = real_multi30k_dir.parent
    hypotheses = tmp_path / "test_2016_flickr.hyp.de"
    result = run_cli("evaluate", f"--model={SHIPPED}", "--split=test_2016_flickr", f"--hypotheses={hypotheses}",
                     "--json", f"--data_dir={real_data_dir}", timeout=900)
    cased = json.loads(result.stdout.strip().splitlines()[-1])
    assert (round(cased["bleu"], 2), round(cased["chrf"], 2), cased["signature"]) == (
        metadata["bleu"], metadata["chrf"], metadata["signature"])
    result = run_cli("evaluate", f"--hypothesis_file={hypotheses}", "--split=test_2016_flickr", "--tokenized_bleu",
                     "--json", f"--data_dir={real_data_dir}")
    tokenized = json.loads(result.stdout.strip().splitlines()[-1])
    assert (round(tokenized["bleu"], 2), tokenized["signature"]) == (
        metadata["bleu_tokenized_lowercase"], metadata["signature_tokenized_lowercase"])
