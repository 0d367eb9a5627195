"""kt-train: train a recipe with model.fit under a tf.distribute strategy (resumable).

    kt-train --recipe=multi30k --workdir=runs/multi30k [--train_steps=N] [--strategy=mirrored]
    kt-train --recipe=base --train_prefix=data/train --eval_prefix=data/dev --source_lang=en
             --target_lang=de --vocab_size=32000 --workdir=runs/mine   # the base model on your own corpus
    kt-train --recipe=runs/mine/recipe.json --workdir=runs/mine2      # a run's resolved recipe, as a file

Re-running the same command after an interruption resumes from the last
checkpoint in --workdir. TensorBoard: ``tensorboard --logdir=WORKDIR/tensorboard``.
"""

from __future__ import annotations

from absl import flags, logging

from keras_transformer.cli import common

common.define_recipe_override_flags(training=True, default="tiny")  # --recipe and one flag per config field
common.define_data_dir_flag()
flags.DEFINE_string("workdir", None, "Work directory: checkpoints, TensorBoard logs, tokenizer, resolved recipe.")
common.define_strategy_flag()
flags.DEFINE_integer("train_epochs", None, "Instead of --train_steps: passes over the training corpus.")
flags.DEFINE_boolean("allow_data_change", False, "Resume although the training corpus changed since the work "
                     "directory recorded it (data_fingerprint.py); the data stream restarts at its beginning.")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    if not FLAGS.workdir:
        common.fail("--workdir: required (where checkpoints and logs go)")
    recipe = common.resolve_recipe(FLAGS)
    from keras_transformer import training
    from keras_transformer.data import corpora

    try:
        data_dir = corpora.corpus_data_dir(recipe.data, FLAGS.data_dir)
        summary = training.train(recipe, FLAGS.workdir, data_dir, FLAGS.strategy, train_epochs=FLAGS.train_epochs,
                                 allow_data_change=FLAGS.allow_data_change)
    except (ValueError, OSError) as e:  # OSError: a full disk, a read-only directory
        common.fail_with(e)
    logging.info("Trained to step %d", summary.steps)
    print(f"trained {recipe.name} to step {summary.steps} in {FLAGS.workdir}")


def run():
    common.run(main)


if __name__ == "__main__":
    run()
