"""kt-pipeline: train a recipe, average its last checkpoints, evaluate, export and translate samples.

    kt-pipeline --recipe=multi30k_demo --workdir=runs/demo --export_dir=saved_models/demo    # README command 1
    kt-pipeline --recipe=multi30k --workdir=runs/multi30k --export_dir=saved_models/multi30k_en_de   # the shipped one
    kt-pipeline --recipe=base --train_prefix=data/train --eval_prefix=data/dev --test_prefix=data/test
                --source_lang=en --target_lang=de --vocab_size=32000 --workdir=runs/mine --export_dir=saved_models/mine

Every recipe field a user sets has a flag (the same as kt-train's). The same command run again, after an
interruption (a kill, SIGTERM, Ctrl-C) or after success, finishes the job without redoing finished stages:
training resumes from the work directory's last checkpoint, and the stages it recorded as done
(<workdir>/pipeline.json: trained and averaged, evaluated, exported) are skipped with a line saying so. An
--export_dir holding another export is refused.
"""

from __future__ import annotations

import shlex
import sys

from absl import flags

from keras_transformer.cli import common

common.define_recipe_override_flags(training=True, default="multi30k")  # --recipe and one flag per config field
common.define_data_dir_flag()
flags.DEFINE_string("workdir", "runs/demo", "Training work directory.")
flags.DEFINE_string("export_dir", "saved_models/demo", "Where the SavedModel goes.")
flags.DEFINE_integer("eval_sentences", None, "Score only the first N test sentences (default: all).")
common.define_strategy_flag()
FLAGS = flags.FLAGS


def main(argv):
    del argv
    if FLAGS.eval_sentences is not None and FLAGS.eval_sentences <= 0:
        common.fail(f"--eval_sentences: must be positive, got {FLAGS.eval_sentences}")
    recipe = common.resolve_recipe(FLAGS)
    data = recipe.data
    if data.corpus == "text" and not data.test_prefix and not data.test_split.startswith("newstest"):
        common.fail(f"--test_prefix: required with corpus text to evaluate on --test_split={data.test_split} "
                    "(or give --test_split=newstest2014)")
    from keras_transformer.pipeline import export_in_the_way, run_job

    problem = export_in_the_way(FLAGS.workdir, FLAGS.export_dir)
    if problem:
        common.fail(f"--export_dir: {problem}")
    try:
        run_job(recipe, FLAGS.workdir, FLAGS.export_dir, FLAGS.data_dir, FLAGS.strategy, FLAGS.eval_sentences,
                command=shlex.join(["kt-pipeline", *sys.argv[1:]]))
    except (ValueError, OSError) as e:  # OSError: a full disk, a read-only directory
        common.fail_with(e)


def run():
    common.run(main)


if __name__ == "__main__":
    run()
