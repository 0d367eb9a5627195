"""Lexical constraints through the translator: the export's translate_with_constraints signature, a work directory,
kt-translate --constraints (a file or tab columns), and the refusals."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import inference
from keras_transformer.tasks.translation import lines as translation_lines
from tests.conftest import REPO_ROOT
from tests.inference.support import run_cli

SHIPPED = os.path.join(REPO_ROOT, "saved_models", "multi30k_en_de")  # exported before translate_with_constraints

LINES = ["A man rides a red bike on the street .", "", "two dogs play in the snow .", "A girl ."]
CONSTRAINTS = ["Fahrrad\tein Mann", "Hund", "", "\tMädchen\t "]  # the blank line's is not used; blank phrases drop


def _options(**options):
    return {"beam_size": tf.constant(4), "alpha": tf.constant(0.6), "extra_length": tf.constant(20), **options}


def _phrases(constraints):
    return translation_lines.constraint_phrases(constraints)


def test_every_hypothesis_holds_its_constraints_and_none_is_the_plain_search(exported):
    loaded = tf.saved_model.load(str(exported))
    out = loaded.signatures["translate_with_constraints"](inputs=tf.constant(LINES),
                                                          constraints=tf.constant(CONSTRAINTS), **_options())
    free = loaded.signatures["translate_with_options"](inputs=tf.constant(LINES), **_options())
    texts = [[t.decode() for t in row] for row in out["nbest_translations"].numpy()]
    for i in (0, 3):
        assert all(p in t for t in texts[i] for p in _phrases(CONSTRAINTS[i])), texts[i]
    assert texts[1] == ["", "", "", ""] and out["nbest_scores"][1].numpy().tolist() == [0.0, -1e9, -1e9, -1e9]
    for name in ("nbest_translations", "nbest_scores"):  # no constraint: the plain search
        np.testing.assert_array_equal(out[name][2], free[name][2])
    with pytest.raises(tf.errors.InvalidArgumentError, match="constraints: must hold one string per input"):
        loaded.signatures["translate_with_constraints"](inputs=tf.constant(LINES), constraints=tf.constant(["a"]),
                                                        **_options())
    with pytest.raises(tf.errors.InvalidArgumentError, match="constraints: too long for the output"):
        loaded.signatures["translate_with_constraints"](inputs=tf.constant(["A girl ."]),
                                                        constraints=tf.constant(["ein kleines Mädchen spielt"]),
                                                        **_options(extra_length=tf.constant(0)))


def test_a_work_directory_and_its_export_give_the_same_constrained_translations(exported, trained_workdir):
    results = [translation_lines.translate_nbest(inference.load(m), LINES, 4, batch_size=2, alpha=0.6,
                                                 extra_length=20, constraints=CONSTRAINTS)
               for m in (exported, trained_workdir)]
    assert results[0].translations == results[1].translations
    np.testing.assert_allclose(np.concatenate(results[0].scores), np.concatenate(results[1].scores), rtol=1e-5)
    best, _ = translation_lines.translate_lines(inference.load(exported), LINES, alpha=0.6, extra_length=20,
                                                constraints=CONSTRAINTS)
    assert best == [t[0] for t in results[0].translations]


def test_kt_translate_reads_constraints_from_a_file_or_tab_columns_and_names_a_bad_one(exported, tmp_path):
    stdin = "".join(f"{line}\n" for line in LINES)
    (tmp_path / "terms.de").write_text("".join(f"{c}\n" for c in CONSTRAINTS), encoding="utf-8")
    flags = [f"--model={exported}", "--extra_length=20"]
    from_file = run_cli("translate", *flags, f"--constraints={tmp_path / 'terms.de'}", stdin=stdin).stdout
    tabbed = "".join(f"{line}\t{c}\n" for line, c in zip(LINES, CONSTRAINTS))
    from_columns = run_cli("translate", *flags, "--constraints=tab", stdin=tabbed).stdout
    assert from_file == from_columns and len(from_file.splitlines()) == 4
    for line, constraints in zip(from_file.splitlines(), CONSTRAINTS[:1] + [""] * 2 + CONSTRAINTS[3:]):
        assert all(p in line for p in _phrases(constraints))
    nbest = run_cli("translate", *flags, "--nbest=2", "--constraints=tab", stdin=tabbed).stdout.splitlines()
    assert nbest[0].split(" ||| ")[1] == from_file.splitlines()[0]

    (tmp_path / "short.de").write_text("Fahrrad\n", encoding="utf-8")
    long_terms = "".join(f"{line}\t{'ein Mann ' * 10 if i == 3 else ''}\n" for i, line in enumerate(LINES))
    for args, text, message in (
            ([f"--constraints={tmp_path / 'short.de'}"], stdin, "has 1 lines, fewer than the input"),
            (["--constraints=tab", "--extra_length=0"], long_terms, "--constraints: line 4: "),
            (["--constraints=tab", "--sampling"], tabbed, "--constraints: not with --sampling"),
            (["--constraints=tab", "--target_prefix=tab"], tabbed, "--constraints: not with --target_prefix")):
        result = run_cli("translate", f"--model={exported}", *args, stdin=text, check=False)
        assert result.returncode == 2 and message in result.stderr, result.stderr
    old = run_cli("translate", f"--model={SHIPPED}", "--constraints=tab", stdin=tabbed, check=False)
    assert old.returncode == 2 and "re-export it with kt-export" in old.stderr
