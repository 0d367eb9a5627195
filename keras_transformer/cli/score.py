"""kt-score: forced decoding, the model's score of given translations (keras_transformer.scoring).

    kt-score --model=saved_models/multi30k_en_de --source=test.en --target=hyp.de > scores.tsv
    kt-score --model=runs/multi30k --checkpoint=averaged --source=test.en.gz --target=test.de.gz --json

One output line per (source, target) pair, in order, tab-separated:

    log P(Y|X)    |Y|    log P(Y|X) / lp(|Y|)

|Y| counts the target's subwords and EOS; lp(n) = ((5 + n) / 6)^α is the
beam search's GNMT length penalty, so the third column is on kt-translate's
scale (--with_scores, --nbest): scoring a translation the beam search found
gives back its score. With --json each line is an object with log_prob,
tokens and score. A target longer than the model's max_length tokens is
refused (exit 2, naming the line); a source longer than the model reads is
cut as kt-translate cuts it, with a line on stderr. A blank source and target
score 0 (kt-translate's score of a blank line); a blank source with a target
is scored, with a line on stderr.
"""

from __future__ import annotations

import sys
import time

from absl import flags

from keras_transformer.cli import common, decode_flags

decode_flags.define_model_flags()
flags.DEFINE_string("source", None, "Source sentences, one per line (plain or .gz).")
flags.DEFINE_string("target", None, "Translations to score, aligned with --source (plain or .gz).")
flags.DEFINE_float("alpha", None, "Length penalty α of lp(|Y|) (default: the recipe's, 0.6 as in §6.1).")
flags.DEFINE_integer("batch_size", 64, "Pairs per batch (batches are formed by length; order is kept).")
flags.DEFINE_string("output", "-", "Where the scores go, one line per pair; '-' is stdout.")
decode_flags.define_max_input_length_flag()
flags.DEFINE_boolean("json", False, "Write one JSON object per line (log_prob, tokens, score) instead of TSV.")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    decode_flags.check_decode_option("alpha")
    decode_flags.check_max_input_length()
    if FLAGS.batch_size < 1:
        common.fail(f"--batch_size: must be >= 1, got {FLAGS.batch_size}")
    if not FLAGS.model:
        common.fail("--model: required (a SavedModel directory or a training work directory)")
    common.check_output_flag("output")
    sources, targets = common.read_text_flag("source"), common.read_text_flag("target")
    if len(sources) != len(targets):
        common.fail(f"--source/--target: {FLAGS.source} has {len(sources)} lines, {FLAGS.target} has "
                    f"{len(targets)}; they must be aligned")
    from keras_transformer import artifacts, scoring

    try:
        model, recipe, tokenizer = artifacts.load_model(FLAGS.model, FLAGS.checkpoint, FLAGS.data_dir)
    except (ValueError, FileNotFoundError) as e:
        common.fail(str(e) if str(e).startswith("--") else f"--model: {e}")
    from keras_transformer.decoding.lines import is_blank
    from keras_transformer.serving.checks import max_source_length

    decode_flags.report_long_lines(sources, tokenizer.source.piece_counts(sources), max_source_length(recipe) - 1,
                                   verb="scored the target after")
    for i, (source, target) in enumerate(zip(sources, targets)):
        if is_blank(source) and not is_blank(target):
            print(f"line {i + 1:,}: the source is blank (kt-translate gives it the empty translation); its target "
                  "is scored after an empty source", file=sys.stderr)
    start = time.time()
    try:
        result = scoring.score_lines(model, recipe, tokenizer, sources, targets, FLAGS.alpha, FLAGS.batch_size)
    except ValueError as e:
        common.fail(f"--target: {FLAGS.target}: {e}")
    common.write_output_flag("output", scoring.format_scores(result, FLAGS.json))
    seconds = time.time() - start
    tokens = int(result.lengths.sum())
    print(f"scored {len(targets)} pairs ({tokens} target tokens, {float(result.log_probs.sum()) / max(tokens, 1):.4f}"
          f" log-prob per token) in {seconds:.1f} s with {FLAGS.model}", file=sys.stderr)


def run():
    common.run(main)


if __name__ == "__main__":
    run()
