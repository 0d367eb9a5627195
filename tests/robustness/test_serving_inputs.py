"""Hostile serving requests: the exported signatures check their inputs in the graph, by the CLI's rules.

Each refused request is an InvalidArgumentError whose message names the input and the rule; the rules are
``config.DECODE_OPTIONS``, which DecodeConfig and kt-translate's flags check too.
"""

import math

import pytest
import tensorflow as tf

from keras_transformer.config import DECODE_OPTIONS, DecodeConfig
from tests.robustness.support import assert_one_error_line, run_cli

VALID = {"beam_size": 2, "alpha": 0.6, "extra_length": 3}
BAD_OPTIONS = [  # (option, value, the message's rule)
    ("alpha", math.nan, "alpha: must be a finite number >= 0"),
    ("alpha", math.inf, "alpha: must be a finite number >= 0"),
    ("alpha", -0.5, "alpha: must be a finite number >= 0"),
    ("extra_length", -5, "extra_length: must be >= 0"),
    ("beam_size", 0, "beam_size: must be >= 1"),
    ("beam_size", -1, "beam_size: must be >= 1"),
]
DTYPES = {"beam_size": tf.int32, "alpha": tf.float32, "extra_length": tf.int32}


@pytest.fixture(scope="module")
def loaded(exported):
    import tensorflow_text  # noqa: F401  (the text signatures' ops)

    return tf.saved_model.load(str(exported))


def _options(**changes):
    values = dict(VALID, **changes)
    return {name: tf.constant(value, DTYPES[name]) for name, value in values.items()}


def _refused(call, message):
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        call()
    assert message in str(caught.value), str(caught.value)[-1500:]


@pytest.mark.parametrize("name,value,message", BAD_OPTIONS)
def test_options_outside_their_rule_are_refused_by_both_option_signatures(loaded, name, value, message):
    text = loaded.signatures["translate_with_options"]
    ids = loaded.signatures["translate_ids_with_options"]
    _refused(lambda: text(inputs=tf.constant(["A dog runs."]), **_options(**{name: value})), message)
    _refused(lambda: ids(source_ids=tf.constant([[5, 6, 1]]), **_options(**{name: value})), message)


@pytest.mark.parametrize("name,value,message", BAD_OPTIONS)
def test_the_same_values_are_refused_by_the_config_and_the_flags(name, value, message):
    with pytest.raises(ValueError, match=f"^{message}"):
        DecodeConfig(**{name: value})
    assert set(DECODE_OPTIONS) == {"beam_size", "alpha", "extra_length"}


@pytest.mark.parametrize("flag", ["--alpha=nan", "--alpha=inf", "--beam_size=0"])
def test_kt_translate_refuses_the_option_before_loading_anything(tmp_path, flag):
    result = run_cli("translate", f"--model={tmp_path / 'no_model'}", flag, stdin="A dog.\n")  # never reached
    assert_one_error_line(result, flag.split("=")[0] + ": must be")


def test_valid_options_at_their_least_values_translate(loaded):
    out = loaded.signatures["translate_with_options"](inputs=tf.constant(["A dog runs."]),
                                                      **_options(beam_size=1, alpha=0.0, extra_length=0))
    assert out["translations"].shape == [1] and math.isfinite(float(out["scores"][0]))


@pytest.mark.parametrize("signature,inputs,message", [
    ("serving_default", [["A dog.", "A cat."], ["Two men.", "A bird."]], "inputs: must be a vector [B] of strings, "
     "got rank] [2]"),
    ("serving_default", "A dog.", "inputs: must be a vector [B] of strings, got rank] [0]"),
    ("translate_ids", [5, 6, 1], "source_ids: must be a matrix [B, S] of subword ids, got rank] [1]"),
    ("translate_ids", [[[5, 6, 1]]], "source_ids: must be a matrix [B, S] of subword ids, got rank] [3]"),
    ("translate_ids", [[5, 400, 1]], "source_ids: every id must be in [0, 400), got min] [1] [max] [400]"),
    ("translate_ids", [[-3, 1]], "source_ids: every id must be in [0, 400), got min] [-3]"),
])
def test_inputs_of_the_wrong_rank_or_range_are_refused(loaded, signature, inputs, message):
    name = "inputs" if signature == "serving_default" else "source_ids"
    _refused(lambda: loaded.signatures[signature](**{name: tf.constant(inputs)}), message)


def test_an_option_of_rank_one_is_refused(loaded):
    options = dict(_options(), beam_size=tf.constant([2, 2]))
    _refused(lambda: loaded.signatures["translate_with_options"](inputs=tf.constant(["A dog."]), **options),
             "beam_size: must be a scalar, got rank] [1]")
