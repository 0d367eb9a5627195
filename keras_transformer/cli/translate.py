"""kt-translate: translate lines with beam search (§6.1: beam 4, α = 0.6, max length = input + 50).

    kt-translate --model=saved_models/multi30k_en_de < source.en > hypotheses.de
    kt-translate --model=runs/multi30k --checkpoint=averaged --input=test.en.gz --output=hyp.de

--model is an exported SavedModel or a training work directory. Lines are
batched by length for speed; output line i is the translation of input line i.
"""

from __future__ import annotations

import sys
import time

from absl import flags

from keras_transformer.cli import common, decode_flags

decode_flags.define_model_flags()
decode_flags.define_decode_flags()
flags.DEFINE_string("input", "-", "Source text, one sentence per line (plain or .gz); '-' is stdin.")
flags.DEFINE_string("output", "-", "Where translations go, one per line; '-' is stdout.")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    decode_flags.check_decode_flags()
    from keras_transformer import inference

    try:
        lines = inference.read_input(FLAGS.input)
    except (ValueError, FileNotFoundError) as e:
        common.fail(f"--input: {e}")
    translator = decode_flags.load_translator()
    start = time.time()
    translations, _ = decode_flags.translate(translator, lines)
    inference.write_lines(FLAGS.output, translations)
    seconds = time.time() - start
    print(f"translated {len(lines)} lines in {seconds:.1f} s ({len(lines) / max(seconds, 1e-9):.1f} lines/s) with "
          f"{translator.description}", file=sys.stderr)


def run():
    common.run(main)


if __name__ == "__main__":
    run()
