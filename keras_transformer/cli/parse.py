"""kt-parse: constituency trees of sentences with a parser (§6.3: beam 21, α 0.3, output up to input + 300).

    echo "Ms. Haag plays Elianti ." | kt-parse --model=saved_models/ptb_sample
    kt-parse --model=runs/ptb_sample --checkpoint=averaged --input=sentences.txt --output=trees.mrg
    kt-parse --model=runs/chart1,runs/chart2 --checkpoint=averaged < sentences.txt   # chart parsers ensembled

--model is a parser SavedModel (kt-export of a corpus-ptb run) or its work
directory. Input: one sentence per line, words separated by spaces, Penn
Treebank tokens ("does n't", "-LRB-" for "("). Output: one tree per line,
"(S (NP (XX Ms.) (XX Haag)) (VP (XX plays) (NP (XX Elianti))) (XX .))" (the
parser brackets; POS tags are the placeholder XX); --linearized writes the
decoder's sequence "(S (NP XX XX ) (VP XX (NP XX ) ) XX )" instead. The
search is constrained to well-formed trees; --noconstrained (work
directories) decodes freely and repairs in Python. The number of outputs
that needed repair goes to stderr. A blank line gets an empty line, no tree;
stdin on a terminal or a pipe is parsed as it arrives; a sentence longer than
the model reads is reported on stderr (see kt-translate, --max_input_length).
"""

from __future__ import annotations

import sys
import time

from absl import flags

from keras_transformer.cli import common, decode_flags, parser_flags

decode_flags.define_model_flags(ensemble=True)
decode_flags.define_decode_flags()
parser_flags.define_constrained_flag()
flags.DEFINE_string("input", "-", "Sentences, one per line, words separated by spaces (plain or .gz); '-' is stdin.")
flags.DEFINE_string("output", "-", "Where the trees go, one per line; '-' is stdout.")
flags.DEFINE_boolean("linearized", False, "Write the decoder's linearized trees, slots XX in place of words.")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    decode_flags.check_decode_flags()
    common.check_output_flag("output")
    chunks = decode_flags.input_chunks()
    parser = parser_flags.load_parser()
    repaired = 0

    def parse(lines, before):
        nonlocal repaired
        parses = parser_flags.parse(parser, lines)
        repaired += parses.repaired
        return parses.linearized if FLAGS.linearized else parses.trees

    start = time.time()
    count, cut = decode_flags.decode_input(parser, chunks, parse, "parsed")
    seconds = time.time() - start
    cut_summary = decode_flags.long_lines_summary(cut, parser.max_source_pieces)
    print(f"parsed {count} lines in {seconds:.1f} s ({count / max(seconds, 1e-9):.1f} lines/s) with "
          f"{parser.description}; {repaired} outputs repaired{cut_summary}", file=sys.stderr)


def run():
    common.run(main, decoding=True)


if __name__ == "__main__":
    run()
