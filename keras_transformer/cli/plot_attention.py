"""kt-plot-attention: attention heatmaps of a trained model, or the Eq. 3 learning-rate curve, as PNG files.

    kt-plot-attention --model=WORKDIR --sentence="A dog runs." --output_dir=DIR
                      [--reference="Ein Hund läuft."] [--checkpoint=latest|averaged|PATH]
    kt-plot-attention --learning_rate_schedule (--recipe=NAME | --model=WORKDIR) --output_dir=DIR

Attention: one PNG per kind (encoder, decoder, cross) and layer, the heads in a
grid, subword tokens on the axes; the target side is the model's beam
translation (the work directory's decode settings) unless --reference is given.
Prints the source and target (attention), then the written paths, one per line.
"""

from __future__ import annotations

from absl import flags

from keras_transformer.cli import common

flags.DEFINE_string("model", None, "Training work directory (recipe.json, checkpoints/, tokenizer/).")
flags.DEFINE_string("sentence", None, "Source sentence to translate and plot.")
flags.DEFINE_string("reference", None, "Target sentence to plot instead of the model's translation.")
flags.DEFINE_string("checkpoint", "latest", "latest, averaged, best (--keep_best_by), or a checkpoint prefix path.")
flags.DEFINE_string("output_dir", None, "Where the PNG files go (created if needed).")
flags.DEFINE_boolean("learning_rate_schedule", False, "Plot Eq. 3 over train_steps instead of attention.")
flags.DEFINE_string("recipe", None, "With --learning_rate_schedule: a recipe name (default: --model's recipe).")
common.define_data_dir_flag()
FLAGS = flags.FLAGS


def _learning_rate_paths():
    from keras_transformer import plotting
    from keras_transformer.workdir import WorkDir

    if FLAGS.recipe:
        recipe = common.load_recipe(FLAGS.recipe)
    elif FLAGS.model:
        recipe = WorkDir(FLAGS.model).read_recipe()
    else:
        common.fail("--recipe: required with --learning_rate_schedule (or give --model=WORKDIR)")
    return plotting.plot_learning_rate(recipe, FLAGS.output_dir)


def _attention_paths():
    from keras_transformer import artifacts, plotting

    if not FLAGS.model:
        common.fail("--model: required (a training work directory)")
    if not FLAGS.sentence or not FLAGS.sentence.strip():
        common.fail("--sentence: required (the source sentence to plot)")
    model, recipe, tokenizer = artifacts.load_model(FLAGS.model, FLAGS.checkpoint, FLAGS.data_dir)
    d = recipe.decode
    data = plotting.attention_data(model, tokenizer, FLAGS.sentence, FLAGS.reference, d.beam_size, d.alpha,
                                   d.extra_length)
    print(f"source: {data.source_text}\ntarget: {data.target_text}")
    return plotting.plot_attention(data, FLAGS.output_dir)


def main(argv):
    del argv
    if not FLAGS.output_dir:
        common.fail("--output_dir: required (where the PNG files go)")
    try:
        paths = _learning_rate_paths() if FLAGS.learning_rate_schedule else _attention_paths()
    except (ValueError, FileNotFoundError) as e:
        common.fail(str(e))
    print("\n".join(paths))


def run():
    common.run(main)


if __name__ == "__main__":
    run()
