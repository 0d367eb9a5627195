"""kt-data-report: what the input pipeline makes of a recipe's corpus.

    kt-data-report --recipe=multi30k [--workdir=runs/multi30k] [--data_dir=...] [--json]
    kt-data-report --recipe=base --train_prefix=data/train --source_lang=en --target_lang=de --vocab_size=32000

Trains (or loads the cached) tokenizer into the work directory, then makes one
pass over the training batches exactly as training builds them (no repeat;
--split=val etc. are batched as evaluation batches them):
pairs kept and filtered, vocabulary size, tokens per batch, distinct batch
shapes against the number of buckets, and padding efficiency per side. With
--json the last line of output is one JSON object.
"""

from __future__ import annotations

import json

from absl import flags

from keras_transformer.cli import common

FLAGS = flags.FLAGS
common.define_recipe_override_flags(training=False)  # --recipe, the data flags, --vocab_size, --shared_vocabulary
common.define_data_dir_flag()
flags.DEFINE_string("workdir", None, "Where the tokenizer is cached (default: runs/<recipe>).")
flags.DEFINE_string("split", None, "Split to report on (default: the recipe's train split).")
flags.DEFINE_bool("json", False, "End the output with one line of JSON.")
flags.DEFINE_integer("replicas", 1, "Devices training in sync: the update's token budget is split over them.")


def main(argv):
    del argv
    recipe = common.resolve_recipe(FLAGS, needs_eval=False)
    workdir = FLAGS.workdir or f"runs/{recipe.name}"
    from keras_transformer import tasks
    from keras_transformer.data.report import format_report, report

    try:
        r = report(recipe, workdir, FLAGS.data_dir, FLAGS.split, FLAGS.replicas, tasks.get(recipe).corpus)
    except (ValueError, FileNotFoundError) as e:
        common.fail_with(e)
    print(format_report(r))
    if FLAGS.json:
        print(json.dumps(r, sort_keys=True))


def run():
    common.run(main)


if __name__ == "__main__":
    run()
