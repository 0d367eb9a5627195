"""kt-params: print a recipe's parameter count (the bare integer is the last line).

    kt-params --recipe=base [--vocab_size=37000] [--noshared_vocabulary]
"""

from __future__ import annotations

import dataclasses

from absl import flags

from keras_transformer.cli import common

common.define_recipe_flag(default="base")
flags.DEFINE_integer("vocab_size", None, "Override the recipe's shared vocabulary size (each language's if not "
                     "shared).")
flags.DEFINE_boolean("shared_vocabulary", None, "Override the recipe's: one vocabulary and embedding for both "
                     "languages (§3.4), or (--noshared_vocabulary) one per language.")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    recipe = common.load_recipe(FLAGS.recipe)
    if FLAGS.vocab_size is not None:
        if FLAGS.vocab_size <= 4:
            common.fail(f"--vocab_size: must be > 4, got {FLAGS.vocab_size}")
        recipe = dataclasses.replace(recipe, model=dataclasses.replace(recipe.model, vocab_size=FLAGS.vocab_size))
    if FLAGS.shared_vocabulary is not None:
        recipe = dataclasses.replace(recipe, model=dataclasses.replace(recipe.model,
                                                                       shared_vocabulary=FLAGS.shared_vocabulary))
    from keras_transformer.model import build_model, count_parameters

    model = build_model(recipe)
    built = model.count_params()
    closed_form = count_parameters(recipe)
    m = recipe.model
    print(f"recipe {recipe.name}: N={m.num_encoder_layers}+{m.num_decoder_layers} d_model={m.d_model} d_ff={m.d_ff} "
          f"h={m.num_heads} d_k={m.key_dim} d_v={m.value_dim} vocab={m.vocab_size}"
          f"{'' if m.shared_vocabulary else ' per language'}")
    print(f"closed form: {closed_form:,}  built model: {built:,}  ({built / 1e6:.1f}M)")
    print(built)


def run():
    common.run(main)


if __name__ == "__main__":
    run()
