"""Sampling through the translator: the export's sample_with_options signature, a work directory, kt-translate."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import inference
from keras_transformer.tasks.translation import lines as translation_lines
from tests.conftest import REPO_ROOT
from tests.inference.support import run_cli

SHIPPED = os.path.join(REPO_ROOT, "saved_models", "multi30k_en_de")  # exported before sample_with_options

LINES = ["A man rides a red bike on the street .", "", "two dogs play in the snow ."]


def _sample(loaded, lines, **options):
    options = {"num_samples": 2, "top_k": 0, "top_p": 1.0, "temperature": 1.0, "seed": 3, "alpha": 0.6,
               "extra_length": 20, **options}
    dtypes = {"top_p": tf.float32, "temperature": tf.float32, "alpha": tf.float32}
    return loaded.signatures["sample_with_options"](
        inputs=tf.constant(lines), **{k: tf.constant(v, dtypes.get(k, tf.int32)) for k, v in options.items()})


def test_the_signature_at_top_k_one_gives_beam_one_and_a_blank_input_nothing(exported):
    loaded = tf.saved_model.load(str(exported))
    out = _sample(loaded, LINES, top_k=1)
    beam = loaded.signatures["translate_with_options"](inputs=tf.constant(LINES), beam_size=tf.constant(1),
                                                       alpha=tf.constant(0.6), extra_length=tf.constant(20))
    for k in range(2):  # each draw of the most probable token: the greedy translation, scored as it
        np.testing.assert_array_equal(tf.gather(out["nbest_translations"][:, k], [0, 2]),
                                      tf.gather(beam["translations"], [0, 2]))
        np.testing.assert_allclose(tf.gather(out["nbest_scores"][:, k], [0, 2]), tf.gather(beam["scores"], [0, 2]),
                                   rtol=1e-5)
    assert out["translations"][1] == b"" and out["nbest_scores"][1].numpy().tolist() == [0.0, -1e9]  # blank
    assert out["truncated"].numpy().tolist() == [False, False, False]
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"top_p: must be in \(0, 1\], got"):
        _sample(loaded, LINES, top_p=1.5)


def test_a_work_directory_and_its_export_draw_the_same_samples(exported, trained_workdir):
    from_export = translation_lines.sample_lines(inference.load(exported), LINES, 3, top_k=20, seed=9,
                                                 batch_size=2, alpha=0.6, extra_length=20)
    from_workdir = translation_lines.sample_lines(inference.load(trained_workdir), LINES, 3, top_k=20, seed=9,
                                                  batch_size=2, alpha=0.6, extra_length=20)
    assert from_export.translations == from_workdir.translations and len(from_export.translations[0]) == 3
    np.testing.assert_allclose(np.concatenate(from_export.scores), np.concatenate(from_workdir.scores), rtol=1e-5)
    assert from_export.translations[1] == [""]


def test_kt_translate_samples_and_names_a_bad_or_unsupported_sampling_flag(exported):
    stdin = "".join(f"{line}\n" for line in LINES)
    flags = ["--sampling", "--nbest=3", "--sampling_topp=0.9", "--seed=4", "--extra_length=20"]
    out = run_cli("translate", f"--model={exported}", *flags, stdin=stdin).stdout.splitlines()
    assert [line.split(" ||| ")[0] for line in out] == ["0"] * 3 + ["1"] + ["2"] * 3
    assert run_cli("translate", f"--model={exported}", *flags, stdin=stdin).stdout.splitlines() == out
    one = run_cli("translate", f"--model={exported}", "--sampling", "--seed=4", stdin=stdin).stdout
    assert len(one.splitlines()) == 3 and one.splitlines()[1] == ""
    for bad, message in ((["--sampling_topk=5"], "--sampling_topk: applies with --sampling only"),
                         (["--sampling", "--sampling_temperature=0"], "--sampling_temperature: must be > 0, got 0"),
                         (["--sampling", "--sampling_topk=-1"], "--sampling_topk: must be >= 0 (0: no cut), got -1")):
        result = run_cli("translate", f"--model={exported}", *bad, stdin=stdin, check=False)
        assert result.returncode == 2 and message in result.stderr
    old = run_cli("translate", f"--model={SHIPPED}", "--sampling", stdin=stdin, check=False)
    assert old.returncode == 2 and "--sampling: " in old.stderr and "re-export it with kt-export" in old.stderr
