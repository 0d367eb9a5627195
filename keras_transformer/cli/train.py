"""kt-train: train a recipe with model.fit under a tf.distribute strategy (resumable).

    kt-train --recipe=multi30k --workdir=runs/multi30k [--train_steps=N] [--strategy=mirrored]

Re-running the same command after an interruption resumes from the last
checkpoint in --workdir. TensorBoard: ``tensorboard --logdir=WORKDIR/tensorboard``.
"""

from __future__ import annotations

import dataclasses

from absl import flags, logging

from keras_transformer.cli import common
from keras_transformer.config import override

common.define_recipe_flag(default="tiny")
common.define_data_dir_flag()
flags.DEFINE_string("workdir", None, "Work directory: checkpoints, TensorBoard logs, tokenizer, resolved recipe.")
flags.DEFINE_enum("strategy", "mirrored", ["mirrored", "one_device", "multi_worker", "tpu"], "tf.distribute strategy.")
flags.DEFINE_integer("train_steps", None, "Parameter updates to train for (the paper counts steps).")
flags.DEFINE_float("max_train_minutes", None, "Stop (and checkpoint) after this much wall time; 0 = no cap.")
flags.DEFINE_integer("train_epochs", None, "Alternatively: passes over the training corpus.")
flags.DEFINE_integer("tokens_per_batch", None, "Token budget per side and replica (§5.1: ~25000).")
flags.DEFINE_integer("d_model", None, "Override d_model.")
flags.DEFINE_integer("d_ff", None, "Override d_ff.")
flags.DEFINE_integer("num_heads", None, "Override h.")
flags.DEFINE_integer("num_layers", None, "Override N (encoder and decoder).")
flags.DEFINE_float("dropout", None, "Override P_drop.")
flags.DEFINE_float("label_smoothing", None, "Override ε_ls.")
flags.DEFINE_float("learning_rate_scale", None, "Multiplies Eq. 3.")
flags.DEFINE_integer("warmup_steps", None, "Override warmup_steps of Eq. 3.")
flags.DEFINE_integer("gradient_accumulation_steps", None,
                     "Micro-batches per update (reach ~25k tokens on a small machine).")
flags.DEFINE_integer("checkpoint_every", None, "Save (and validate) every N steps.")
flags.DEFINE_integer("keep_checkpoints", None, "Keep the last K checkpoints.")
flags.DEFINE_boolean("mixed_precision", None, "bfloat16 compute (mixed_bfloat16 policy).")
flags.DEFINE_boolean("jit_compile", None, "XLA-compile the train step.")
flags.DEFINE_integer("seed", None, "Random seed.")
flags.DEFINE_integer("bleu_samples", None,
                     "Dev pairs beam-decoded and scored (BLEU, chrF) at each checkpoint; 0 = off.")
FLAGS = flags.FLAGS


def resolve_recipe():
    """The recipe named by --recipe with the override flags applied; bad values exit naming the flag."""
    recipe = common.load_recipe(FLAGS.recipe)
    for name in ("train_steps", "train_epochs", "tokens_per_batch", "d_model", "d_ff", "num_heads", "num_layers",
                 "warmup_steps", "gradient_accumulation_steps", "checkpoint_every", "keep_checkpoints"):
        value = getattr(FLAGS, name)
        if value is not None and value <= 0:
            common.fail(f"--{name}: must be positive, got {value}")
    try:
        layers = FLAGS.num_layers
        model = override(recipe.model, d_model=FLAGS.d_model, d_ff=FLAGS.d_ff, num_heads=FLAGS.num_heads,
                         dropout=FLAGS.dropout, num_encoder_layers=layers, num_decoder_layers=layers)
        data = override(recipe.data, tokens_per_batch=FLAGS.tokens_per_batch)
        train = override(recipe.train, train_steps=FLAGS.train_steps, max_train_minutes=FLAGS.max_train_minutes,
                         warmup_steps=FLAGS.warmup_steps,
                         learning_rate_scale=FLAGS.learning_rate_scale, label_smoothing=FLAGS.label_smoothing,
                         gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
                         checkpoint_every=FLAGS.checkpoint_every, keep_checkpoints=FLAGS.keep_checkpoints,
                         mixed_precision=FLAGS.mixed_precision, jit_compile=FLAGS.jit_compile, seed=FLAGS.seed,
                         bleu_samples=FLAGS.bleu_samples)
        from keras_transformer.data import batching

        batching.bucket_shapes(data)  # refuses a budget below the longest bucket, before any work
    except ValueError as e:  # a config field named in the message; flags share the field names
        common.fail_with(e)
    return dataclasses.replace(recipe, model=model, data=data, train=train)


def main(argv):
    del argv
    if not FLAGS.workdir:
        common.fail("--workdir: required (where checkpoints and logs go)")
    recipe = resolve_recipe()
    from keras_transformer import training
    from keras_transformer.data import corpora

    try:
        data_dir = corpora.resolve_data_dir(FLAGS.data_dir) if recipe.data.corpus != "wmt14" else FLAGS.data_dir
        if FLAGS.train_epochs is not None:
            steps = training.steps_for_epochs(recipe, FLAGS.workdir, data_dir, FLAGS.train_epochs)
            recipe = dataclasses.replace(recipe, train=dataclasses.replace(recipe.train, train_steps=steps))
        summary = training.train(recipe, FLAGS.workdir, data_dir, FLAGS.strategy)
    except (ValueError, FileNotFoundError) as e:
        common.fail_with(e)
    logging.info("Trained to step %d", summary["steps"])
    print(f"trained {recipe.name} to step {summary['steps']} in {FLAGS.workdir}")


def run():
    common.run(main)


if __name__ == "__main__":
    run()
