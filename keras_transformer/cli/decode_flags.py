"""Flags shared by the inference entry points (kt-translate, kt-evaluate): which model, how to decode."""

from __future__ import annotations

from absl import flags

from keras_transformer.cli import common

FLAGS = flags.FLAGS


def define_model_flags(required: bool = True) -> None:
    flags.DEFINE_string("model", None, "An exported SavedModel directory (kt-export) or a training work directory."
                        + ("" if required else " Not needed with --hypothesis_file."))
    flags.DEFINE_string("checkpoint", "latest", "For a work directory: 'latest', 'averaged' (kt-average), "
                        "'best' (--keep_best_by) or a "
                        "checkpoint path prefix.")
    common.define_data_dir_flag()


def define_decode_flags() -> None:
    flags.DEFINE_integer("beam_size", None, "Beam size K (default: the recipe's, 4 as in §6.1).")
    flags.DEFINE_float("alpha", None, "Length penalty α (default: the recipe's, 0.6 as in §6.1; for a CTranslate2 "
                      "directory's native search, CTranslate2's length penalty, as kt-export chose it).")
    flags.DEFINE_integer("extra_length", None, "Max output length = source length + this (default: 50, §6.1).")
    flags.DEFINE_integer("batch_size", 32, "Sentences per batch (batches are formed by length; order is kept).")
    flags.DEFINE_enum("ctranslate2_search", None, ["native", "gnmt"],
                      "For a CTranslate2 directory: native (the default; CTranslate2's own beam search, score "
                      "log P / |Y|^α, α its length penalty, by default the one kt-export chose on the eval split) "
                      "or gnmt (exactly the SavedModel's search and scores, about half as fast).")


def check_decode_flags() -> None:
    """Exit with one line naming the flag when a decoding option breaks its rule (config.DECODE_OPTIONS, the
    rules the exported signatures check in the graph)."""
    for name in ("beam_size", "alpha", "extra_length"):
        check_decode_option(name)
    if FLAGS.batch_size < 1:
        common.fail(f"--batch_size: must be >= 1, got {FLAGS.batch_size}")


def check_decode_option(name: str) -> None:
    """Exit naming --``name`` when the flag is set to a value config.DECODE_OPTIONS refuses (NaN, inf, < least)."""
    from keras_transformer.config import decode_option_error

    value = FLAGS[name].value
    problem = None if value is None else decode_option_error(name, value)
    if problem:
        common.fail(f"--{name}: {problem}")


def check_nbest(nbest: int, translator=None) -> None:
    """Exit naming --nbest unless 1 <= nbest <= K: K from --beam_size, else (given the loaded translator) the
    recipe's beam size."""
    if nbest < 1:
        common.fail(f"--nbest: must be >= 1, got {nbest}")
    beam_size, source = FLAGS.beam_size, "--beam_size"
    if beam_size is None and translator is not None:
        beam_size, source = translator.defaults[0], "the model's default"
    if beam_size is not None and nbest > beam_size:
        common.fail(f"--nbest: must be <= the beam size K = {beam_size} ({source}), got {nbest}")


def load_model(task: str = ""):
    """The model named by --model/--checkpoint (``inference.load``: a SavedModel, a CTranslate2 directory or a
    work directory, of either task), or exit with one line naming the problem. ``task``: the one task this tool
    serves ("" for any)."""
    if not FLAGS.model:
        common.fail("--model: required (a SavedModel directory or a training work directory)")
    from keras_transformer import inference

    try:
        loaded = inference.load(FLAGS.model, FLAGS.checkpoint, FLAGS.data_dir,
                                getattr(FLAGS, "ctranslate2_search", None))
    except (ValueError, FileNotFoundError) as e:
        common.fail(str(e) if str(e).startswith("--") else f"--model: {e}")
    found = inference.task_of(loaded).name
    if task and found != task:
        tools = {"translation": "kt-translate and kt-evaluate", "parsing": "kt-parse and kt-evaluate-parser"}
        common.fail(f"--model: {FLAGS.model} is a {found} model, not {task}; {tools[found]} serve it")
    return loaded


def decode(loaded, lines):
    """The task's ``Decoded`` outputs of lines (translations or trees) with the decoding flags."""
    from keras_transformer import inference

    return inference.task_of(loaded).decode(loaded, lines, FLAGS.batch_size, FLAGS.beam_size, FLAGS.alpha,
                                            FLAGS.extra_length)


def translate_nbest(loaded, lines, nbest: int):
    """``NBest`` of lines (the ``nbest`` best hypotheses of each, best first) with the decoding flags."""
    from keras_transformer.tasks.translation import lines as translation_lines

    return translation_lines.translate_nbest(loaded, lines, nbest, FLAGS.batch_size, FLAGS.beam_size, FLAGS.alpha,
                                             FLAGS.extra_length)
