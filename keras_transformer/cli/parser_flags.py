"""Flags and helpers shared by the parsing entry points (kt-parse, kt-evaluate-parser)."""

from __future__ import annotations

from absl import flags

from keras_transformer.cli import common

FLAGS = flags.FLAGS


def define_constrained_flag() -> None:
    flags.DEFINE_boolean("constrained", True, "Constrain the beam search to well-formed trees (default). "
                         "--noconstrained (work directories only) decodes freely and repairs the output in Python.")


def load_parser():
    """The parser named by --model/--checkpoint, or exit with one line naming the problem."""
    if not FLAGS.model:
        common.fail("--model: required (a parser SavedModel or a parser's training work directory)")
    from keras_transformer import parsing

    try:
        parser = parsing.load_parser(FLAGS.model, FLAGS.checkpoint, FLAGS.data_dir)
    except (ValueError, FileNotFoundError) as e:
        common.fail(str(e) if str(e).startswith("--") else f"--model: {e}")
    if not FLAGS.constrained and parser.unconstrained is None:
        common.fail(f"--constrained: unconstrained decoding needs a work directory; {FLAGS.model} is a SavedModel")
    return parser


def parse(parser, sentences):
    """``parsing.Parses`` of sentences with the decoding flags."""
    from keras_transformer import parsing

    return parsing.parse_lines(parser, sentences, FLAGS.batch_size, FLAGS.beam_size, FLAGS.alpha,
                               FLAGS.extra_length, FLAGS.constrained)
