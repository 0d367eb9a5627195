"""kt-evaluate and keras_transformer.tasks.translation.metric agree with the sacrebleu command line."""

import gzip
import json
import subprocess
import sys

import pytest

from keras_transformer.tasks.translation import metric
from keras_transformer.config import DataConfig
from keras_transformer.data import files
from tests.inference.support import run_cli

SACREBLEU = f"{sys.prefix}/bin/sacrebleu"


def _sacrebleu(reference, hypotheses, *options):
    """{metric name: (score, signature)} from the sacrebleu command line, 4 decimals."""
    out = subprocess.run([SACREBLEU, str(reference), "-i", str(hypotheses), "-m", "bleu", "chrf", "--format", "json",
                          "-w", "4", *options], capture_output=True, text=True, timeout=60, check=True)
    return {m["name"]: (m["score"], m["signature"]) for m in json.loads(out.stdout)}


@pytest.fixture(scope="module")
def test_set(multi30k_text, tmp_path_factory):
    """Six English/German pairs: source as .gz, reference plain."""
    english, german = multi30k_text
    directory = tmp_path_factory.mktemp("test_set")
    with gzip.open(directory / "source.en.gz", "wt", encoding="utf-8") as f:
        f.write("".join(f"{x}\n" for x in english[:6]))
    (directory / "reference.de").write_text("".join(f"{x}\n" for x in german[:6]), encoding="utf-8")
    return directory


def test_reference_against_itself_is_100(test_set):
    result = run_cli("evaluate", f"--hypothesis_file={test_set / 'reference.de'}",
                     f"--reference={test_set / 'reference.de'}", "--json")
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert " = 100.00 " in lines[0]
    assert lines[1].startswith("chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:")
    last = json.loads(lines[-1])
    assert last["bleu"] == pytest.approx(100.0) and last["chrf"] == pytest.approx(100.0)
    assert last["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")


def test_model_scores_match_the_sacrebleu_command_line(exported, test_set, tmp_path):
    hypotheses = tmp_path / "hypotheses.de"
    result = run_cli("evaluate", f"--model={exported}", f"--source={test_set / 'source.en.gz'}",
                     f"--reference={test_set / 'reference.de'}", f"--hypotheses={hypotheses}", "--json")
    ours = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(hypotheses.read_text(encoding="utf-8").splitlines()) == 6
    theirs = _sacrebleu(test_set / "reference.de", hypotheses)
    assert (round(ours["bleu"], 4), ours["signature"]) == theirs["BLEU"]
    assert (round(ours["chrf"], 4), ours["chrf_signature"]) == theirs["chrF2"]


@pytest.mark.parametrize("lowercase_tokenized,options", [(False, ()),
                                                         (True, ("--tokenize", "intl", "--lowercase",
                                                                 "--chrf-lowercase"))])
def test_both_variants_match_sacrebleu_on_a_partial_match(test_set, tmp_path, lowercase_tokenized, options):
    references = files.read_text(test_set / "reference.de")
    # Drop every third word, lower-case the first letter, split a hyphen: BLEU strictly between 0 and 100.
    hypotheses = [" ".join(w for i, w in enumerate(r.split()) if i % 3 != 2) for r in references]
    hypotheses = [h[:1].lower() + h[1:].replace("-", " - ") for h in hypotheses]
    (tmp_path / "hyp.de").write_text("".join(f"{h}\n" for h in hypotheses), encoding="utf-8")
    ours = metric.score(hypotheses, references, lowercase_tokenized=lowercase_tokenized)
    theirs = _sacrebleu(test_set / "reference.de", tmp_path / "hyp.de", *options)
    assert 0 < ours["bleu"] < 100
    assert (round(ours["bleu"], 4), ours["signature"]) == theirs["BLEU"]
    assert (round(ours["chrf"], 4), ours["chrf_signature"]) == theirs["chrF2"]
    assert ("case:lc|eff:no|tok:intl" in ours["signature"]) == lowercase_tokenized


def test_mismatched_lengths_are_an_error():
    with pytest.raises(ValueError, match="hypotheses: 1 lines but references have 2"):
        metric.score(["a"], ["a", "b"])


def test_split_names_the_test_set_in_the_data_directory(tmp_path):
    from keras_transformer.data import corpora

    _, reference = corpora.split_files(DataConfig(), "test_2016_flickr", corpora.resolve_data_dir(None))
    with gzip.open(reference, "rt", encoding="utf-8") as f:
        (tmp_path / "hyp.de").write_text(f.read(), encoding="utf-8")
    result = run_cli("evaluate", f"--hypothesis_file={tmp_path / 'hyp.de'}", "--split=test_2016_flickr", "--json")
    assert json.loads(result.stdout.strip().splitlines()[-1])["bleu"] == pytest.approx(100.0)
    result = run_cli("evaluate", "--hypothesis_file=x", "--split=no_such_split", check=False)
    assert result.returncode == 2 and "--split: " in result.stderr and "no_such_split" in result.stderr
    result = run_cli("evaluate", "--hypothesis_file=x", "--split=val", "--reference=y", check=False)
    assert result.returncode == 2 and "--split: " in result.stderr
