"""Where an export's decoding time goes: TensorFlow's profiler over its ``serving_default`` signature.

    python bench/profile_decode.py                                 # the shipped model: 320 sentences, batch 32
    python bench/profile_decode.py --saved_model=DIR --batch_size=1 --num_sentences=64
    python bench/profile_decode.py --kernels=onednn                # default: TensorFlow's own, as kt-translate

The split's first N sentences, sorted by length (characters) and cut into batches, go
through the signature once to trace, ``--rounds`` times timed without the profiler, then once under
``tf.profiler``. The thread time of TensorFlow's compute threads (``--inter_threads`` of them, one intra-op
thread each, as in bench_engines.py) is split three ways:

    kernels    the ops' own time, by op type (the top ``--top``; the rest in one row)
    executor   ExecutorState::Process less the kernels it ran: scheduling, the while loop's frames
    idle       inter_threads x profiled wall less both: a batch's one search waiting for its other, Python

Prints a markdown table (thread milliseconds per sentence and shares) and a JSON line. The profiler slows
the run it watches (both walls are printed): read the shares, and time with bench_engines.py.
"""

import collections
import glob
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROCESS = "ExecutorState::Process"  # the executor's span around the kernels it runs

flags.DEFINE_string("saved_model", os.path.join(REPO, "saved_models", "multi30k_en_de"), "An exported SavedModel.")
flags.DEFINE_string("data_dir", None, "Data directory (default: $KT_DATA_DIR or ../shared/data).")
flags.DEFINE_string("split", "test_2016_flickr", "Split of the model's corpus to translate.")
flags.DEFINE_integer("num_sentences", 320, "The split's first N sentences.")
flags.DEFINE_integer("batch_size", 32, "Sentences per call.")
flags.DEFINE_integer("rounds", 3, "Timed rounds without the profiler (the median is printed).")
flags.DEFINE_integer("threads", 1, "TensorFlow intra-op threads.")
flags.DEFINE_integer("inter_threads", 2, "TensorFlow inter-op threads (the export's parallel searches run on them).")
flags.DEFINE_integer("top", 15, "Op types listed by name.")
flags.DEFINE_enum("kernels", "eigen", ["eigen", "onednn"], "TensorFlow's own kernels (TF_ENABLE_ONEDNN_OPTS=0, as "
                  "kt-translate runs an export: tf_setup.onednn_default) or oneDNN's (=1).")
FLAGS = flags.FLAGS


def thread_time(xspace):
    """(Process picoseconds, {op type: kernel picoseconds}) summed over the compute threads of a profile."""
    process, kernels = 0, collections.Counter()
    for plane in xspace.planes:
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name  # "ExecutorState::Process" or "node:OpType"
                if name == PROCESS:
                    process += event.duration_ps
                elif ":" in name:
                    kernels[name.rsplit(":", 1)[1]] += event.duration_ps
    return process, kernels


def profile(translate, logdir):
    """(wall seconds, Process ps, {op type: ps}) of one profiled run."""
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    tf.profiler.experimental.start(logdir)
    start = time.perf_counter()
    translate()
    wall = time.perf_counter() - start
    tf.profiler.experimental.stop()
    xspace = xplane_pb2.XSpace()
    with open(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)[0], "rb") as f:
        xspace.ParseFromString(f.read())
    return (wall, *thread_time(xspace))


def main(argv):
    del argv
    os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1" if FLAGS.kernels == "onednn" else "0"  # read when TensorFlow loads
    from bench import harness  # imports the package, which keeps the setting above
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.inter_threads)
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops of the text signatures)

    from keras_transformer.config import Recipe
    from keras_transformer.data import corpora, files
    from keras_transformer.serving import loading

    recipe = Recipe.from_dict(loading.read_info(FLAGS.saved_model)["recipe"])  # export.json: no model to build
    source, _ = corpora.split_files(recipe.data, FLAGS.split, corpora.resolve_data_dir(FLAGS.data_dir))
    lines = sorted(files.read_text(source)[: FLAGS.num_sentences], key=len)
    batches = [tf.constant(lines[i:i + FLAGS.batch_size]) for i in range(0, len(lines), FLAGS.batch_size)]
    signature = tf.saved_model.load(FLAGS.saved_model).signatures["serving_default"]

    def translate():
        for batch in batches:
            signature(inputs=batch)

    translate()  # traces
    walls = []
    for _ in range(FLAGS.rounds):
        start = time.perf_counter()
        translate()
        walls.append(time.perf_counter() - start)
    with tempfile.TemporaryDirectory(prefix="profile_decode_") as logdir:
        wall, process, kernels = profile(translate, logdir)
    kernel_total = sum(kernels.values())
    parts = kernels.most_common(FLAGS.top)
    others = kernel_total - sum(ps for _, ps in parts)
    parts.append((f"other kernels ({max(len(kernels) - FLAGS.top, 0)} op types)", others))
    total = FLAGS.inter_threads * wall * 1e12  # the compute threads' picoseconds
    parts.append(("executor", process - kernel_total))
    parts.append(("idle", total - process))
    rows = [{"part": name, "thread_ms_per_sentence": ps / 1e9 / len(lines), "share": ps / total} for name, ps in parts]

    print(harness.header("profile_decode") + f": {FLAGS.saved_model}, {len(lines)} {FLAGS.split} sentences, batch "
          f"{FLAGS.batch_size}, {FLAGS.threads} intra-op / {FLAGS.inter_threads} inter-op threads, "
          f"{FLAGS.kernels} kernels; wall {harness.median(walls):.3f} s (median of {FLAGS.rounds}), "
          f"{wall:.3f} s profiled\n")
    print(harness.markdown_table(["part", "thread ms / sentence", "share"], [
        (r["part"], harness.fmt(r["thread_ms_per_sentence"], 3), f"{100 * r['share']:.1f}%") for r in rows], 1))
    print(harness.json_line({
        "bench": "profile_decode", "date": harness.now(), "cpu_count": os.cpu_count(),
        "saved_model": FLAGS.saved_model, "split": FLAGS.split, "sentences": len(lines),
        "batch_size": FLAGS.batch_size, "threads": FLAGS.threads, "inter_threads": FLAGS.inter_threads,
        "kernels": FLAGS.kernels, "wall_seconds": harness.median(walls), "round_seconds": walls,
        "profiled_wall_seconds": wall, "results": rows}))


if __name__ == "__main__":
    app.run(main)
