"""kt-evaluate-parser: parse gold trees' sentences and score the trees (labeled precision, recall, F1, exact match).

    kt-evaluate-parser --model=saved_models/ptb_sample                      # the recipe's test split
    kt-evaluate-parser --model=runs/ptb_sample --checkpoint=averaged --split=dev --json
    kt-evaluate-parser --model=runs/wsj --treebank=/data/treebank_3/parsed/mrg/wsj   # section 23 of the full WSJ
    kt-evaluate-parser --model=saved_models/ptb_sample --trees=gold.mrg     # any .mrg file, directory or zip
    kt-evaluate-parser --model=runs/ptb_sample --noconstrained              # the free beam search, repaired
    kt-evaluate-parser --model=runs/chart1,runs/chart2 --checkpoint=averaged --split=dev   # an ensemble

Scores are EVALB's with COLLINS.prm (labeled brackets; punctuation, empty
elements and the outer bracket not scored; function tags stripped; ADVP =
PRT), computed by PYEVALB (keras_transformer.tasks.parsing.metric). Also printed:
how many outputs needed repair to be a tree over the sentence's words (0
with the constrained search). With --json the last line is one JSON object.
"""

from __future__ import annotations

import dataclasses
import json

from absl import flags

from keras_transformer.cli import common, decode_flags, parser_flags

decode_flags.define_model_flags(ensemble=True)
decode_flags.define_decode_flags()
parser_flags.define_constrained_flag()
flags.DEFINE_string("split", None, "A split of the model's treebank: train, dev, test (default: the recipe's test "
                    "split), sections:SS-SS or files:NNNN-NNNN.")
flags.DEFINE_string("treebank", None, "Read --split from this treebank (a directory of .mrg files or a zip) instead "
                    "of the recipe's.")
flags.DEFINE_string("trees", None, "Gold trees to parse and score instead of a split: a bracketed file, or a "
                    "directory or zip of .mrg files.")
flags.DEFINE_integer("max_sentences", None, "Score only the first N trees.")
flags.DEFINE_string("hypotheses", None, "Also write the predicted trees to this file, one per line.")
flags.DEFINE_boolean("json", False, "End with one line of JSON: precision, recall, f1, exact_match, repaired, ...")
FLAGS = flags.FLAGS


def _gold_trees(parser):
    from keras_transformer.data import corpora
    from keras_transformer.tasks.parsing import treebank

    if FLAGS.trees:
        if FLAGS.split or FLAGS.treebank:
            common.fail("--trees: gives the gold trees; do not also give --split/--treebank")
        try:
            return treebank.load_file(FLAGS.trees)
        except (ValueError, OSError) as e:
            common.fail(f"--trees: {e}")
    data = parser.recipe.data
    if FLAGS.treebank:
        data = dataclasses.replace(data, treebank=FLAGS.treebank)
    split = FLAGS.split or data.test_split
    try:
        return treebank.load(data, split, corpora.resolve_data_dir(FLAGS.data_dir)).trees
    except (ValueError, OSError) as e:
        common.fail_with(e)


def main(argv):
    del argv
    decode_flags.check_decode_flags()
    if FLAGS.max_sentences is not None and FLAGS.max_sentences < 1:
        common.fail(f"--max_sentences: must be positive, got {FLAGS.max_sentences}")
    common.check_output_flag("hypotheses")
    parser = parser_flags.load_parser()
    gold = _gold_trees(parser)[:FLAGS.max_sentences]
    if not gold:
        common.fail("--trees: no trees to score")
    from keras_transformer.tasks.parsing import lines, metric, trees as trees_lib

    cut = decode_flags.check_long_lines(parser, [" ".join(trees_lib.words(tree)) for tree in gold], "parsed")

    try:
        scores, parses = lines.evaluate(parser, gold, FLAGS.batch_size, FLAGS.beam_size, FLAGS.alpha,
                                          FLAGS.extra_length, FLAGS.constrained)
    except ValueError as e:
        common.fail(f"--{'trees' if FLAGS.trees else 'split'}: {e}")
    if FLAGS.hypotheses:
        common.write_output_flag("hypotheses", parses.trees)
    print(metric.format_scores(scores))
    problems = ", ".join(f"{kind}: {n}" for kind, n in sorted(scores["repair_problems"].items()))
    print(f"repaired {scores['repaired']} of {len(parses.trees)} outputs"
          f"{f' ({problems})' if problems else ''}; {'constrained' if FLAGS.constrained else 'free'} beam search, "
          f"beam {scores['beam_size']}, alpha {scores['alpha']}, output up to input + {scores['extra_length']}")
    if FLAGS.json:
        print(json.dumps(dict(scores, model=parser.description, truncated=cut), sort_keys=True))


def run():
    common.run(main, decoding=True)


if __name__ == "__main__":
    run()
