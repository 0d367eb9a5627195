"""Pairs per second of one full pass of a recipe's training input pipeline.

    python bench/bench_input_pipeline.py [--recipe=multi30k] [--workdir=runs/multi30k] [--data_dir=...]

Times what training iterates (shuffle, tokenize, length filter, bucket,
pad; no repeat), twice: consumed in-graph (``Dataset.reduce``, as ``fit``
consumes it) and from Python (``as_numpy_iterator``, including the copies to
NumPy). Then trains the recipe's model on the first ``--train_batches``
batches of the same pipeline (after one warm-up step) and prints its pairs/s
next to the pipeline's: the input pipeline should be far faster, so it never
starves the model.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import flags  # noqa: E402

from keras_transformer.cli import common  # noqa: E402

FLAGS = flags.FLAGS
common.define_recipe_flag("multi30k")
common.define_data_dir_flag()
flags.DEFINE_string("workdir", None, "Where the tokenizer is cached (default: runs/<recipe>).")
flags.DEFINE_integer("train_batches", 10, "Training steps timed for the comparison (0 skips training).")


def main(argv):
    del argv
    import tensorflow as tf

    from keras_transformer.data import batching, corpora, tokenizer

    recipe = common.load_recipe(FLAGS.recipe)
    cfg = recipe.data
    data_dir = corpora.resolve_data_dir(FLAGS.data_dir)
    tok = tokenizer.get_or_train(recipe, FLAGS.workdir or f"runs/{recipe.name}", data_dir)
    pairs, stats = corpora.load_split(cfg, cfg.train_split, data_dir)

    def one_pass():
        return batching.make_batches(pairs, tok, cfg, training=True, repeat=False)

    def add_batch(count, batch):  # batch = ((source [B, S], target_in [B, T]), target_out [B, T])
        return count + tf.shape(batch[1], out_type=tf.int64)[0]

    in_graph = float("inf")
    for _ in range(2):  # the first pass also pays for building the pipeline's functions
        start = time.perf_counter()
        count = one_pass().reduce(tf.constant(0, tf.int64), add_batch)
        in_graph = min(in_graph, time.perf_counter() - start)
    start = time.perf_counter()
    count_py = sum(target_out.shape[0] for _, target_out in one_pass().as_numpy_iterator())
    python = time.perf_counter() - start
    assert int(count) == count_py
    read = stats.pairs if stats.pairs is not None else count_py
    print(f"recipe {recipe.name}: {read} pairs read, {count_py} in full batches, one pass")
    print(f"input pipeline, in-graph:  {read / in_graph:9.0f} pairs/s ({in_graph:.2f} s)")
    print(f"input pipeline, to NumPy:  {read / python:9.0f} pairs/s ({python:.2f} s)")
    if FLAGS.train_batches:
        from keras_transformer.training import compile_model

        model = compile_model(recipe)
        batches = list(one_pass().take(FLAGS.train_batches).as_numpy_iterator())
        for x, y in batches:  # warm-up: traces the step once per bucket shape
            model.train_on_batch(x, y)
        start = time.perf_counter()
        for x, y in batches:
            model.train_on_batch(x, y)
        seconds = time.perf_counter() - start
        trained = sum(y.shape[0] for _, y in batches)
        print(f"training ({len(batches)} steps):     {trained / seconds:9.0f} pairs/s "
              f"-> the input pipeline is {read / in_graph / (trained / seconds):.0f}x faster")


if __name__ == "__main__":
    common.run(main)
