"""kt-pipeline: train a recipe, average its last checkpoints, evaluate, export and translate samples.

    kt-pipeline --recipe=multi30k --train_steps=400 --warmup_steps=400 --workdir=runs/demo --export_dir=saved_models/demo

Re-running resumes training from the work directory's last checkpoint.
"""

from __future__ import annotations

import dataclasses

from absl import flags

from keras_transformer.cli import common

common.define_recipe_flag(default="multi30k")
common.define_data_dir_flag()
flags.DEFINE_string("workdir", "runs/demo", "Training work directory.")
flags.DEFINE_string("export_dir", "saved_models/demo", "Where the SavedModel goes.")
flags.DEFINE_integer("train_steps", None, "Override the recipe's training steps (the demo trains a few minutes).")
flags.DEFINE_float("max_train_minutes", None, "Override the recipe's wall-clock training cap (0 = none).")
flags.DEFINE_integer("warmup_steps", None, "Override the recipe's warmup (Eq. 3); a short demo wants a short warmup.")
flags.DEFINE_integer("checkpoint_every", None, "Override the recipe's checkpoint interval.")
flags.DEFINE_integer("eval_sentences", None, "Score only the first N test sentences (default: all).")
flags.DEFINE_enum("strategy", "mirrored", ["mirrored", "one_device", "multi_worker", "tpu"], "tf.distribute strategy.")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    recipe = common.load_recipe(FLAGS.recipe)
    if FLAGS.eval_sentences is not None and FLAGS.eval_sentences <= 0:
        common.fail(f"--eval_sentences: must be positive, got {FLAGS.eval_sentences}")
    from keras_transformer.config import override
    from keras_transformer.pipeline import run_pipeline

    try:  # TrainConfig validates the training overrides and names the field
        train = override(recipe.train, train_steps=FLAGS.train_steps, warmup_steps=FLAGS.warmup_steps,
                         checkpoint_every=FLAGS.checkpoint_every, max_train_minutes=FLAGS.max_train_minutes)
    except ValueError as e:
        common.fail_with(e)
    recipe = dataclasses.replace(recipe, train=train)
    try:
        run_pipeline(recipe, FLAGS.workdir, FLAGS.export_dir, FLAGS.data_dir, FLAGS.strategy, FLAGS.eval_sentences)
    except (ValueError, FileNotFoundError) as e:
        common.fail_with(e)


def run():
    common.run(main)


if __name__ == "__main__":
    run()
