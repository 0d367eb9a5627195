"""Target prefixes through the translator: the export's translate_with_prefix and sample_with_prefix signatures, a
work directory, kt-translate --target_prefix (a file or a tab column), and the refusals."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import inference, scoring
from keras_transformer.serving import loading
from keras_transformer.tasks.translation.module import Translator
from keras_transformer.tasks.translation import lines as translation_lines
from tests.conftest import REPO_ROOT
from tests.inference.support import run_cli

SHIPPED = os.path.join(REPO_ROOT, "saved_models", "multi30k_en_de")  # exported before translate_with_prefix

LINES = ["A man rides a red bike on the street .", "", "two dogs play in the snow .", "A girl ."]
PREFIXES = ["Ein Mann", "Zwei", "", "Ein kleines Mädchen"]  # the blank line's is not used


def _options(**options):
    return {"beam_size": tf.constant(4), "alpha": tf.constant(0.6), "extra_length": tf.constant(20), **options}


def test_every_hypothesis_starts_with_its_prefix_and_an_empty_prefix_forces_nothing(exported):
    loaded = tf.saved_model.load(str(exported))
    out = loaded.signatures["translate_with_prefix"](inputs=tf.constant(LINES), target_prefix=tf.constant(PREFIXES),
                                                     **_options())
    free = loaded.signatures["translate_with_options"](inputs=tf.constant(LINES), **_options())
    texts = [[t.decode() for t in row] for row in out["nbest_translations"].numpy()]
    for i in (0, 2, 3):
        assert all(t.startswith(PREFIXES[i]) for t in texts[i]), texts[i]
    assert texts[1] == ["", "", "", ""] and out["nbest_scores"][1].numpy().tolist() == [0.0, -1e9, -1e9, -1e9]
    for name in ("nbest_translations", "nbest_scores"):  # an empty prefix forces nothing
        np.testing.assert_array_equal(out[name][2], free[name][2])


@pytest.mark.slow
def test_kt_score_gives_the_prefixed_hypotheses_their_scores():
    """The shipped model (its weights in a fresh translator: its export predates the signature), whose outputs are
    SentencePiece's own segmentation of their text (the tiny model's are not): forced decoding of each n-best
    hypothesis, prefix included, gives its score."""
    model, recipe, tokenizer = loading.load_exported(SHIPPED)
    translator = Translator(model, tokenizer, recipe)
    sources = ["A man rides a red bike on the street.", "Two dogs play in the snow.", "A girl is reading a book."]
    prefixes = ["Ein Mann", "Zwei kleine", ""]
    out = translator.translate_with_prefix(tf.constant(sources), tf.constant(prefixes), *_options().values())
    texts = [[t.decode() for t in row] for row in out["nbest_translations"].numpy()]
    assert all(t.startswith(p) for row, p in zip(texts, prefixes) for t in row)
    pairs = [(s, t) for s, row in zip(sources, texts) for t in row]
    forced = scoring.score_lines(model, recipe, tokenizer, [s for s, _ in pairs], [t for _, t in pairs], alpha=0.6)
    np.testing.assert_allclose(forced.scores, out["nbest_scores"].numpy().ravel(), rtol=1e-4)


def test_every_draw_starts_with_its_prefix_and_one_prefix_per_input_is_required(exported):
    loaded = tf.saved_model.load(str(exported))
    sampling = {"num_samples": tf.constant(3), "top_k": tf.constant(0), "top_p": tf.constant(1.0),
                "temperature": tf.constant(1.0), "seed": tf.constant(5), "alpha": tf.constant(0.6),
                "extra_length": tf.constant(20)}
    out = loaded.signatures["sample_with_prefix"](inputs=tf.constant(LINES), target_prefix=tf.constant(PREFIXES),
                                                  **sampling)
    for i in (0, 2, 3):
        assert all(t.decode().startswith(PREFIXES[i]) for t in out["nbest_translations"].numpy()[i])
    with pytest.raises(tf.errors.InvalidArgumentError, match="target_prefix: must hold one string per input"):
        loaded.signatures["translate_with_prefix"](inputs=tf.constant(LINES), target_prefix=tf.constant(["a"]),
                                                   **_options())
    with pytest.raises(tf.errors.InvalidArgumentError, match="target_prefix: must be shorter than the output"):
        loaded.signatures["translate_with_prefix"](inputs=tf.constant(["A girl ."]),
                                                   target_prefix=tf.constant(["Ein kleines Mädchen spielt"]),
                                                   **_options(extra_length=tf.constant(0)))


def test_a_work_directory_and_its_export_give_the_same_prefixed_translations(exported, trained_workdir):
    results = [translation_lines.translate_nbest(inference.load(m), LINES, 4, batch_size=2, alpha=0.6,
                                                 extra_length=20, prefixes=PREFIXES)
               for m in (exported, trained_workdir)]
    assert results[0].translations == results[1].translations
    np.testing.assert_allclose(np.concatenate(results[0].scores), np.concatenate(results[1].scores), rtol=1e-5)
    best, _ = translation_lines.translate_lines(inference.load(exported), LINES, alpha=0.6, extra_length=20,
                                                prefixes=PREFIXES)
    assert best == [t[0] for t in results[0].translations]


def test_kt_translate_reads_prefixes_from_a_file_or_a_tab_column_and_names_a_bad_one(exported, tmp_path):
    stdin = "".join(f"{line}\n" for line in LINES)
    (tmp_path / "prefix.de").write_text("".join(f"{p}\n" for p in PREFIXES), encoding="utf-8")
    flags = [f"--model={exported}", "--extra_length=20", "--with_scores"]
    from_file = run_cli("translate", *flags, f"--target_prefix={tmp_path / 'prefix.de'}", stdin=stdin).stdout
    tabbed = "".join(f"{line}\t{p}\n" for line, p in zip(LINES, PREFIXES))
    from_column = run_cli("translate", *flags, "--target_prefix=tab", stdin=tabbed).stdout
    assert from_file == from_column and len(from_file.splitlines()) == 4
    for line, prefix in zip(from_file.splitlines(), PREFIXES):
        assert line.split("\t")[1].startswith(prefix) or line == "0.000000\t"  # the blank line
    nbest = run_cli("translate", *flags, "--nbest=2", "--target_prefix=tab", stdin=tabbed).stdout.splitlines()
    assert [n.split(" ||| ")[1] for n in nbest[::2]][:1] == [from_file.splitlines()[0].split("\t")[1]]
    drawn = run_cli("translate", *flags, "--sampling", "--target_prefix=tab", stdin=tabbed).stdout.splitlines()
    assert drawn[0].split("\t")[1].startswith("Ein Mann")

    (tmp_path / "short.de").write_text("Ein Mann\n", encoding="utf-8")
    long_prefix = "".join(f"{line}\t{'Ein Mann ' * 10 if i == 3 else ''}\n" for i, line in enumerate(LINES))
    for args, text, message in (
            ([f"--target_prefix={tmp_path / 'short.de'}"], stdin, "has 1 lines, fewer than the input"),
            (["--target_prefix=tab", "--extra_length=0"], long_prefix, "--target_prefix: line 4: "),
            ([f"--target_prefix={tmp_path / 'missing.de'}"], stdin, "--target_prefix: ")):
        result = run_cli("translate", f"--model={exported}", *args, stdin=text, check=False)
        assert result.returncode == 2 and message in result.stderr, result.stderr
    old = run_cli("translate", f"--model={SHIPPED}", "--target_prefix=tab", stdin=tabbed, check=False)
    assert old.returncode == 2 and "re-export it with kt-export" in old.stderr
