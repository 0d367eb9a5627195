"""Peak resident memory (MB) of training and of beam-search decoding, each in a fresh process.

    python bench/bench_memory.py                       # multi30k and base
    python bench/bench_memory.py --recipes=tiny --train_steps=1 --decode_batch=2 --extra_length=2   # smoke

For each recipe, one child process trains (``training.compile_model`` + ``train_on_batch`` on the fixed batch of
bench_train.py, --train_steps steps) and another decodes (random weights, ``decoding.translate_ids`` with beam 4,
a [--decode_batch, S] batch of synthetic sources; a random model rarely emits EOS, so every sentence runs to
S + extra_length tokens: the worst case). A third child only starts TensorFlow: the floor every process pays.
Peak = the child's VmHWM from /proc/self/status (its own address space's high-water mark). ru_maxrss is kept in
the JSON as a cross-check: on Linux it can carry the parent's footprint across fork/exec, so it can read high.
"""

import json
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

from bench import common  # noqa: E402

flags.DEFINE_list("recipes", ["multi30k", "base"], "Recipes whose model configs to measure.")
flags.DEFINE_string("batch", None, "Training batch shape BxSxT (default: per recipe, as bench_train.py).")
flags.DEFINE_integer("train_steps", 3, "Training steps in the training child.")
flags.DEFINE_enum("variant", "graph", list(common.VARIANTS), "Training variant (see bench_train.py).")
flags.DEFINE_integer("decode_batch", 32, "Sentences per decoding batch (kt-translate's default).")
flags.DEFINE_integer("extra_length", 50, "Decoding max length = source length + extra_length (§6.1).")
flags.DEFINE_integer("beam_size", 4, "Beam size (§6.1).")
flags.DEFINE_integer("repeats", 1, "Child processes per measurement; the median is reported.")
flags.DEFINE_integer("threads", os.cpu_count(), "TensorFlow intra- and inter-op threads.")
flags.DEFINE_bool("startup", True, "Also measure a process that only starts TensorFlow (the floor).")
flags.DEFINE_string("child", None, "Internal: run one measurement (startup, train or decode) in this process.")
FLAGS = flags.FLAGS


def memory_mb():
    """(VmRSS, VmHWM) of this process in MB, from /proc/self/status; (None, None) where there is none."""
    try:
        with open("/proc/self/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))
    except (OSError, KeyError):
        return None, None


def child(phase, recipe_name):
    """Run one phase and print {"rss_after_startup_mb", "peak_rss_mb", "ru_maxrss_mb", "seconds"}."""
    common.set_threads(FLAGS.threads)
    from keras_transformer.runtime import init_devices

    init_devices()
    import recipes
    import tensorflow as tf

    start_rss, _ = memory_mb()
    start = time.perf_counter()
    recipe = recipes.get(recipe_name)
    b, s, t = common.batch_shape(recipe_name, FLAGS.batch)
    if phase == "train":
        from keras_transformer.training import compile_model

        model = compile_model(common.variant_recipe(recipe, FLAGS.variant))
        source, target_in, target_out = (tf.constant(x) for x in common.fixed_batch(recipe.model.vocab_size, b, s, t))
        for _ in range(FLAGS.train_steps):
            model.train_on_batch((source, target_in), target_out)
    elif phase == "decode":
        from keras_transformer.decoding import translate_ids
        from keras_transformer.model import build_model

        model = build_model(recipe.model)
        source = common.fixed_batch(recipe.model.vocab_size, FLAGS.decode_batch, s, t)[0]  # [B, S]
        sequences, _ = translate_ids(model, source, FLAGS.beam_size, recipe.decode.alpha, FLAGS.extra_length)
        sequences.numpy()
    _, peak = memory_mb()
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024 if sys.platform != "darwin" else 1024 ** 2)
    print(json.dumps({"rss_after_startup_mb": start_rss, "peak_rss_mb": peak if peak is not None else maxrss,
                      "ru_maxrss_mb": maxrss, "seconds": time.perf_counter() - start}))


def measure(phase, recipe_name):
    """Median over --repeats fresh child processes of one phase."""
    flag_names = ("batch", "train_steps", "variant", "decode_batch", "extra_length", "beam_size", "threads")
    args = [f"--{n}={FLAGS[n].value}" for n in flag_names if FLAGS[n].value is not None]
    runs = []
    for _ in range(FLAGS.repeats):
        out = subprocess.run([sys.executable, os.path.abspath(__file__), f"--child={phase}",
                              f"--recipes={recipe_name}", *args], capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise SystemExit(f"bench_memory: the {phase} child for {recipe_name} failed:\n{out.stderr[-3000:]}")
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    row = {k: round(common.median([r[k] for r in runs]), 1) for k in runs[0]}
    return {"recipe": recipe_name, "phase": phase, **row,
            "peak_minus_startup_mb": round(row["peak_rss_mb"] - row["rss_after_startup_mb"], 1)}


def main(argv):
    del argv
    if FLAGS.child:
        return child(FLAGS.child, FLAGS.recipes[0])
    rows = [measure("startup", FLAGS.recipes[0])] if FLAGS.startup else []
    for name in FLAGS.recipes:
        rows += [measure("train", name), measure("decode", name)]
    settings = {"startup": "import + devices", "train": f"{FLAGS.variant}, {FLAGS.train_steps} steps",
                "decode": f"beam {FLAGS.beam_size}, batch {FLAGS.decode_batch}, +{FLAGS.extra_length}"}
    for row in rows:
        b, s, t = common.batch_shape(row["recipe"], FLAGS.batch)
        shape = "—" if row["phase"] == "startup" else (
            f"{b}×{s}→{t}" if row["phase"] == "train" else f"{FLAGS.decode_batch}×{s}")
        row["settings"] = f"{settings[row['phase']]}, {shape}" if shape != "—" else settings["startup"]
    print("\n" + common.header("Peak resident memory (VmHWM), one fresh process per row"))
    print(f"threads {FLAGS.threads}; median of {FLAGS.repeats} process(es); startup = import TF + init devices\n")
    print(common.markdown_table(
        ["config", "phase", "settings", "peak RSS (MB)", "RSS after startup (MB)", "peak − startup (MB)",
         "seconds"],
        [["—" if r["phase"] == "startup" else r["recipe"], r["phase"], r["settings"], common.fmt(r["peak_rss_mb"], 0),
          common.fmt(r["rss_after_startup_mb"], 0), common.fmt(r["peak_minus_startup_mb"], 0),
          common.fmt(r["seconds"], 1)] for r in rows], right_from=3))
    print(common.json_line({"bench": "memory", "date": common.now(), "cpu_count": os.cpu_count(),
                            "threads": FLAGS.threads, "repeats": FLAGS.repeats, "results": rows}))


if __name__ == "__main__":
    from keras_transformer.runtime import silence_native_stderr

    silence_native_stderr()  # C++ start-up chatter (CUDA probing); Python errors still reach stderr
    app.run(main)
