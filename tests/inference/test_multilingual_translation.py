"""A model of several target languages: its export's translate_to signature, kt-translate --target_lang, and the
refusals of a language it was not trained for."""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import training
from keras_transformer.checkpoints import CheckpointState
from keras_transformer.data.tokenizer import Tokenizer
from keras_transformer.workdir import WorkDir
from tests.inference.support import inference_recipe, run_cli

LINES = ["A man rides a red bike .", "", "two dogs play in the snow ."]


@pytest.fixture(scope="module")
def multi_workdir(tmp_path_factory, multi30k_text):
    """A work directory of a de+fr model (random weights) whose tokenizer holds the tags <2de> and <2fr>."""
    english, german = multi30k_text
    recipe = inference_recipe()
    recipe = dataclasses.replace(recipe, name="tiny_multi", data=dataclasses.replace(
        recipe.data, target_lang="de", target_langs=("de", "fr")))
    workdir = tmp_path_factory.mktemp("multi") / "run"
    Tokenizer.train(english + german, recipe.model.vocab_size, workdir / "tokenizer" / "tiny_multi",
                    sample_lines=2000, atomic_words=("<2de>", "<2fr>"))
    WorkDir(workdir).write_recipe(recipe)
    keras.utils.set_random_seed(0)
    model = training.compile_model(recipe)
    CheckpointState(model, str(workdir / "checkpoints")).save(1)
    return workdir


@pytest.fixture(scope="module")
def multi_export(multi_workdir, tmp_path_factory):
    export_dir = tmp_path_factory.mktemp("export") / "multi"
    run_cli("export", f"--model={multi_workdir}", f"--export_dir={export_dir}")
    return export_dir


def _options():
    return {"beam_size": tf.constant(2), "alpha": tf.constant(0.6), "extra_length": tf.constant(5)}


def test_translate_to_is_the_tagged_input_translated(multi_export):
    loaded = tf.saved_model.load(str(multi_export))
    out = loaded.signatures["translate_to"](inputs=tf.constant(LINES), target_lang=tf.constant(["fr", "de", "de"]),
                                            **_options())
    tagged = loaded.signatures["translate_with_options"](
        inputs=tf.constant(["<2fr> " + LINES[0], "", "<2de> " + LINES[2]]), **_options())
    for name in ("nbest_translations", "nbest_scores", "truncated"):
        np.testing.assert_array_equal(out[name], tagged[name])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"target_lang: each must be a target language of "
                                                             r"this model \(de, fr\), got\] \[fr cs de\]"):
        loaded.signatures["translate_to"](inputs=tf.constant(LINES), target_lang=tf.constant(["fr", "cs", "de"]),
                                          **_options())


def test_kt_translate_tags_each_line_and_refuses_an_unknown_language(multi_export, multi_workdir, exported):
    text = "\n".join(LINES) + "\n"
    for model in (multi_export, multi_workdir):
        ours = run_cli("translate", f"--model={model}", "--target_lang=fr", "--beam_size=2", "--extra_length=5",
                       stdin=text).stdout
        tagged = run_cli("translate", f"--model={model}", "--beam_size=2", "--extra_length=5",
                         stdin="\n".join("<2fr> " + line if line else line for line in LINES) + "\n").stdout
        assert ours == tagged and ours.splitlines()[1] == ""
    for model, flag, message in (
            (multi_export, "--target_lang=cs", "error: --target_lang: 'cs' is not one of this model's target "
                                               "languages (de, fr)"),
            (exported, "--target_lang=fr", "error: --target_lang: this model has one target language (trained "
                                           "without --target_langs)")):
        result = run_cli("translate", f"--model={model}", flag, stdin=text, check=False)
        assert result.returncode == 2 and result.stderr.strip().splitlines() == [message]
