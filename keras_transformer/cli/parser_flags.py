"""Flags and helpers shared by the parsing entry points (kt-parse, kt-evaluate-parser)."""

from __future__ import annotations

from absl import flags

from keras_transformer.cli import common, decode_flags

FLAGS = flags.FLAGS


def define_constrained_flag() -> None:
    flags.DEFINE_boolean("constrained", True, "Constrain the beam search to well-formed trees (default). "
                         "--noconstrained (work directories only) decodes freely and repairs the output in Python.")


def load_parser():
    """The parser named by --model/--checkpoint, or exit with one line naming the problem."""
    parser = decode_flags.load_model("parsing")
    if not FLAGS.constrained and parser.unconstrained is None:
        common.fail(f"--constrained: unconstrained decoding needs a work directory; {FLAGS.model} is a SavedModel")
    return parser


def parse(parser, sentences):
    """``Parses`` of sentences with the decoding flags."""
    from keras_transformer.tasks.parsing import lines

    return lines.parse_lines(parser, sentences, FLAGS.batch_size, FLAGS.beam_size, FLAGS.alpha,
                             FLAGS.extra_length, FLAGS.constrained)
