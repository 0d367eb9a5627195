"""kt-export: write a training work directory's model as a translator SavedModel (text in, text out).

    kt-export --model=runs/multi30k --export_dir=saved_models/multi30k_en_de [--checkpoint=averaged]
    kt-export --model=runs/multi30k --export_dir=saved_models/multi30k_ids --ids_only

Signatures: serving_default, translate_with_options, translate_ids,
translate_ids_with_options (see keras_transformer.export; --ids_only keeps the
last two, for servers without the tensorflow-text ops).
"""

from __future__ import annotations

import os

from absl import flags

from keras_transformer.cli import common

flags.DEFINE_string("model", None, "Training work directory (recipe.json, checkpoints/, tokenizer/).")
flags.DEFINE_string("checkpoint", "latest",
                    "'latest', 'averaged' (kt-average), 'best' (--keep_best_by) or a checkpoint path prefix.")
flags.DEFINE_string("export_dir", None, "Where the SavedModel goes, e.g. saved_models/NAME.")
flags.DEFINE_boolean("ids_only", False, "Only the translate_ids signatures (no tensorflow-text ops in the graph).")
common.define_data_dir_flag()
FLAGS = flags.FLAGS


def main(argv):
    del argv
    for name in ("model", "export_dir"):
        if not getattr(FLAGS, name):
            common.fail(f"--{name}: required")
    if os.path.exists(os.path.join(FLAGS.export_dir, "saved_model.pb")):
        common.fail(f"--export_dir: {FLAGS.export_dir} already holds a SavedModel; remove it or choose another")
    from keras_transformer import checkpoints, export

    try:
        model, recipe, tok = checkpoints.load_for_inference(FLAGS.model, FLAGS.checkpoint, FLAGS.data_dir)
        path = checkpoints.resolve_checkpoint(FLAGS.model, FLAGS.checkpoint)
    except (ValueError, FileNotFoundError) as e:
        common.fail(f"--model: {e}")
    export.export(model, tok, recipe, FLAGS.export_dir, with_text=not FLAGS.ids_only,
                  info={"checkpoint": os.path.abspath(path), "workdir": os.path.abspath(FLAGS.model)})
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(FLAGS.export_dir) for f in files)
    print(f"exported {path} to {FLAGS.export_dir} ({size / 2**20:.1f} MiB)")


def run():
    common.run(main)


if __name__ == "__main__":
    run()
