"""kt-average: average the last N checkpoints of a training run into one (§6.1: the last 5).

    kt-average --model=runs/multi30k --num=5      # -> runs/multi30k/averaged/ckpt-<last step>
    kt-average --model=runs/multi30k --num=5 --best   # the 5 best by --keep_best_by instead of the last 5

Then translate or export it with --checkpoint=averaged.
"""

from __future__ import annotations

import json

from absl import flags

from keras_transformer.cli import common

flags.DEFINE_string("model", None, "Training work directory (recipe.json, checkpoints/).")
flags.DEFINE_integer("num", None, "How many of the latest checkpoints to average (default: the recipe's, 5).")
flags.DEFINE_string("output_dir", None, "Where the average goes (default: WORKDIR/averaged).")
flags.DEFINE_bool("best", False, "Average the best checkpoints kept by kt-train --keep_best_by, not the last ones.")
FLAGS = flags.FLAGS


def _check_num(num: int) -> None:
    """Exit naming --num when the work directory holds fewer checkpoints (of the kind --best picks) than asked for."""
    from keras_transformer import checkpoints
    from keras_transformer.workdir import WorkDir

    if FLAGS.best:
        found, where = checkpoints.best_checkpoints(FLAGS.model), WorkDir(FLAGS.model).best
    else:
        where = WorkDir(FLAGS.model).checkpoints
        found = checkpoints.list_checkpoints(where)
    if found and num > len(found):
        steps = ", ".join(str(c.step) for c in sorted(found))
        common.fail(f"--num: {num} checkpoints asked for, but {where} holds {len(found)} (steps {steps}); give "
                    f"--num={len(found)} or fewer")


def main(argv):
    del argv
    if not FLAGS.model:
        common.fail("--model: required (a training work directory)")
    if FLAGS.num is not None and FLAGS.num < 1:
        common.fail(f"--num: must be >= 1, got {FLAGS.num}")
    from keras_transformer import checkpoints
    from keras_transformer.workdir import WorkDir

    try:
        num = FLAGS.num or WorkDir(FLAGS.model).read_recipe().decode.average_checkpoints
        if FLAGS.num is not None:  # asked for explicitly: fewer there is an error, not a smaller average
            _check_num(FLAGS.num)
        path = checkpoints.average_checkpoints(FLAGS.model, num, FLAGS.output_dir, best=FLAGS.best)
    except (ValueError, FileNotFoundError) as e:
        common.fail(f"--model: {e}")
    except OSError as e:  # a full disk, a read-only --output_dir
        common.fail(f"--output_dir: {common.describe_os_error(e)}")
    with open(f"{path}.json") as f:
        steps = json.load(f)["steps"]
    print(f"averaged {len(steps)} checkpoints (steps {', '.join(map(str, steps))}) into {path}")


def run():
    common.run(main)


if __name__ == "__main__":
    run()
