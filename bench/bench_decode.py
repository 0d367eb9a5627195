"""Beam-search throughput: the key/value-cached decoder against re-decoding the whole prefix at every step.

    python bench/bench_decode.py                        # tiny recipe, random weights, synthetic sources
    python bench/bench_decode.py --recipe=base --batch_sizes=1,64 --num_sentences=128
    python bench/bench_decode.py --model_file=model.keras --source_file=test.ids   # one line of token ids each

Prints a markdown table and a final JSON line. Target tokens are those of the 1-best output (EOS included).
Each decoder is traced once on the first batch before timing. A random model rarely emits EOS, so every
sentence then runs to its maximum length (source length + extra_length): a worst case for both decoders.
"""

import json
import time

import numpy as np
from absl import app, flags

import keras_transformer  # noqa: F401  (TensorFlow backend, quiet start-up)
import tensorflow as tf
from keras_transformer import EOS_ID, PAD_ID
from keras_transformer.decoding import beam_search, model_step, translate_ids
from keras_transformer.model import build_model

flags.DEFINE_string("recipe", "tiny", "Recipe whose model config (and decode config) to use.")
flags.DEFINE_string("model_file", None, "A saved .keras Transformer; default: random weights from --recipe.")
flags.DEFINE_string("source_file", None, "Source token ids, one sentence per line; default: synthetic ids.")
flags.DEFINE_integer("num_sentences", 64, "Sentences decoded per batch size and decoder.")
flags.DEFINE_list("batch_sizes", ["1", "64"], "Batch sizes to measure.")
flags.DEFINE_integer("source_length", 12, "Mean synthetic source length (tokens, EOS included).")
flags.DEFINE_integer("beam_size", None, "Default: the recipe's (4, §6.1).")
flags.DEFINE_float("alpha", None, "Default: the recipe's (0.6).")
flags.DEFINE_integer("extra_length", None, "Default: the recipe's (50).")
FLAGS = flags.FLAGS


def sources(vocab_size):
    if FLAGS.source_file:
        with open(FLAGS.source_file) as f:
            lines = [[int(t) for t in line.split()] for line in f if line.strip()]
    else:
        rng = np.random.default_rng(0)
        lengths = rng.integers(FLAGS.source_length // 2, FLAGS.source_length * 3 // 2 + 1, FLAGS.num_sentences)
        lines = [list(rng.integers(EOS_ID + 1, vocab_size, n - 1)) + [EOS_ID] for n in lengths]
    return (lines * FLAGS.num_sentences)[: FLAGS.num_sentences]


def batches(lines, batch_size):
    for i in range(0, len(lines), batch_size):
        chunk = lines[i: i + batch_size]
        ids = np.full((len(chunk), max(map(len, chunk))), PAD_ID, np.int32)  # [B, S]
        for row, line in zip(ids, chunk):
            row[: len(line)] = line
        yield ids


def redecode_search(model):
    """The no-cache baseline in the same search, one tf.function with the same signature as translate_ids."""
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32),
                                  tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.int32)])
    def search(source_ids, beam_size, alpha, extra_length):
        max_lengths = model_step.max_output_lengths(source_ids, extra_length, model.config.max_length)  # [B]
        step_fn, cache, constants = model_step.redecode_step_fn(model, source_ids, beam_size,
                                                                 tf.reduce_max(max_lengths))
        result = beam_search(step_fn, cache, beam_size, max_lengths, alpha, constants)
        return result.sequences, result.scores
    return search


def measure(search, lines, batch_size, decode):
    args = (decode.beam_size, decode.alpha, decode.extra_length)
    search(next(batches(lines, batch_size)), *args)  # trace (once per decoder) and warm up
    tokens, start = 0, time.perf_counter()
    for ids in batches(lines, batch_size):
        sequences, _ = search(ids, *args)  # [B, K, T]
        tokens += int(np.count_nonzero(sequences.numpy()[:, 0]))
    seconds = time.perf_counter() - start
    return {"batch_size": batch_size, "sentences": len(lines), "seconds": round(seconds, 3),
            "sentences_per_s": round(len(lines) / seconds, 2), "tokens_per_s": round(tokens / seconds, 1)}


def main(argv):
    del argv
    from keras_transformer import recipes
    from keras_transformer.config import override

    recipe = recipes.get(FLAGS.recipe)
    decode = override(recipe.decode, beam_size=FLAGS.beam_size, alpha=FLAGS.alpha, extra_length=FLAGS.extra_length)
    if FLAGS.model_file:
        import keras
        model = keras.saving.load_model(FLAGS.model_file)
    else:
        model = build_model(recipe)
    lines = sources(model.config.vocab_size)
    decoders = {"cached": lambda *a: translate_ids(model, *a), "no-cache": redecode_search(model)}
    results = []
    for batch_size in map(int, FLAGS.batch_sizes):
        for name, search in decoders.items():
            results.append({"decoder": name, **measure(search, lines, batch_size, decode)})
    print(f"\nbeam {decode.beam_size}, alpha {decode.alpha}, max length = source + {decode.extra_length}, "
          f"recipe {FLAGS.recipe}, {tf.config.list_logical_devices()[-1].device_type}\n")
    print("| decoder | batch | sentences | seconds | sentences/s | target tokens/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['decoder']} | {r['batch_size']} | {r['sentences']} | {r['seconds']} | {r['sentences_per_s']} "
              f"| {r['tokens_per_s']} |")
    print(json.dumps({"bench": "decode", "recipe": FLAGS.recipe, "beam_size": decode.beam_size,
                      "alpha": decode.alpha, "extra_length": decode.extra_length, "results": results}))


if __name__ == "__main__":
    from keras_transformer.tf_setup import init_devices

    init_devices()
    app.run(main)
