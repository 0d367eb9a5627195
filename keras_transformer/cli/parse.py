"""kt-parse: constituency trees of sentences with a parser (§6.3: beam 21, α 0.3, output up to input + 300).

    echo "Ms. Haag plays Elianti ." | kt-parse --model=saved_models/ptb_sample
    kt-parse --model=runs/ptb_sample --checkpoint=averaged --input=sentences.txt --output=trees.mrg

--model is a parser SavedModel (kt-export of a corpus-ptb run) or its work
directory. Input: one sentence per line, words separated by spaces, Penn
Treebank tokens ("does n't", "-LRB-" for "("). Output: one tree per line,
"(S (NP (XX Ms.) (XX Haag)) (VP (XX plays) (NP (XX Elianti))) (XX .))" (the
parser brackets; POS tags are the placeholder XX); --linearized writes the
decoder's sequence "(S (NP XX XX ) (VP XX (NP XX ) ) XX )" instead. The
search is constrained to well-formed trees; --noconstrained (work
directories) decodes freely and repairs in Python. The number of outputs
that needed repair goes to stderr.
"""

from __future__ import annotations

import sys
import time

from absl import flags

from keras_transformer.cli import common, decode_flags, parser_flags

decode_flags.define_model_flags()
decode_flags.define_decode_flags()
parser_flags.define_constrained_flag()
flags.DEFINE_string("input", "-", "Sentences, one per line, words separated by spaces (plain or .gz); '-' is stdin.")
flags.DEFINE_string("output", "-", "Where the trees go, one per line; '-' is stdout.")
flags.DEFINE_boolean("linearized", False, "Write the decoder's linearized trees, slots XX in place of words.")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    decode_flags.check_decode_flags()
    from keras_transformer.data import files

    common.check_output_flag("output")
    try:
        lines = files.read_input(FLAGS.input)
    except (ValueError, FileNotFoundError) as e:
        common.fail(f"--input: {e}")
    parser = parser_flags.load_parser()
    start = time.time()
    parses = parser_flags.parse(parser, lines)
    common.write_output_flag("output", parses.linearized if FLAGS.linearized else parses.trees)
    seconds = time.time() - start
    print(f"parsed {len(lines)} lines in {seconds:.1f} s ({len(lines) / max(seconds, 1e-9):.1f} lines/s) with "
          f"{parser.description}; {parses.repaired} outputs repaired", file=sys.stderr)


def run():
    common.run(main, decoding=True)


if __name__ == "__main__":
    run()
