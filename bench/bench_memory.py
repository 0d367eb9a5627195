"""Peak resident memory (MB) of training, of beam-search decoding and of the loss path alone, each in a fresh process.

    python bench/bench_memory.py                       # multi30k and base
    python bench/bench_memory.py --recipes=tiny --train_steps=1 --decode_batch=2 --extra_length=2   # smoke
    python bench/bench_memory.py --recipes=base --batch=128x32x32 --phases=loss,train --vocab_sizes=37000,8000 \
        --layers=6,1 --train_steps=1 --train_code=current,legacy --loss_repeats=3  # the loss path, before and after

Phases (``--phases``), per recipe and per ``--vocab_sizes`` x ``--layers`` override (default: the recipe's own):

* ``train``: ``training.compile_model`` + ``train_on_batch`` on the fixed batch of bench_train.py,
  --train_steps steps.
* ``decode``: random weights, ``decoding.translate_ids`` with beam 4 on a [--decode_batch, S] batch of synthetic
  sources; a random model rarely emits EOS, so every sentence runs to S + extra_length tokens: the worst case.
* ``loss``: the loss path alone. Random float32 logits [B, T, V] (a ``tf.Variable``) and the fixed batch's
  padded labels [B, T]; one ``tf.function`` step takes the label-smoothed loss under a GradientTape, its gradient
  with respect to the logits, and updates the four token metrics, as a training step does. With the logits in
  place (from numpy, so no freed TensorFlow buffer sits in the baseline), the child resets its VmHWM
  (``echo 5 > /proc/self/clear_refs``) and runs 1 + --loss_steps steps (the first also traces); loss-path MB =
  VmHWM - VmRSS right before the first step; ``/ (B T V 4 bytes)``: the [B, T, V] float32 tensors alive at the
  peak. ``--loss_paths``: ``current`` is ``losses.token_statistics`` + ``losses.TokenMetrics`` (as
  ``train_step.TransformerTrainer``); ``legacy`` is the loss of --legacy_commit (``LabelSmoothedCrossEntropy`` +
  ``SmoothedLoss``, ``TokenNLL``, ``Perplexity``, ``TokenAccuracy``, one log-softmax each), read with
  ``git show <commit>:keras_transformer/losses.py`` and exec'd into a module object at run time: the old code
  is not kept in the repository, so git and the commit must be available.

``--train_code=current,legacy`` also runs the train and decode phases on --legacy_commit's ``keras_transformer``
and ``recipes`` (``git archive`` into a temporary directory, put first on the child's ``sys.path``).
Candidates of one row group (loss paths, or code versions) alternate per repeat; the median is reported.
A child that only starts TensorFlow gives the floor every process pays (--startup).

Peak = the child's VmHWM from /proc/self/status (its own address space's high-water mark). ru_maxrss is kept in
the JSON as a cross-check: on Linux it can carry the parent's footprint across fork/exec, so it can read high.

With loss and train rows of the same recipe and V (current code), the script estimates the
memory of one training step at --estimate_tokens tokens per micro-batch and the largest max_tokens_per_device
that fits a --device_gb device; its assumptions are printed with it.
"""

import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CODE_DIR_ENV = "KT_BENCH_CODE_DIR"  # --train_code=legacy: the old package's directory, searched first
sys.path.insert(0, ROOT)
if os.environ.get(CODE_DIR_ENV):
    sys.path.insert(0, os.environ[CODE_DIR_ENV])

from absl import app, flags  # noqa: E402

from bench import harness  # noqa: E402

flags.DEFINE_list("recipes", ["multi30k", "base"], "Recipes whose model configs to measure.")
flags.DEFINE_list("phases", ["train", "decode"], "Phases per recipe: train, decode, loss (the loss path alone).")
flags.DEFINE_string("batch", None, "Training batch shape BxSxT (default: per recipe, as bench_train.py).")
flags.DEFINE_list("vocab_sizes", [], "Vocabulary sizes V replacing the recipe's, one row each (default: the recipe's).")
flags.DEFINE_list("layers", [], "num_encoder_layers = num_decoder_layers replacing the recipe's, one row each.")
flags.DEFINE_integer("train_steps", 3, "Training steps in the training child.")
flags.DEFINE_enum("variant", "graph", list(harness.VARIANTS), "Training variant (see bench_train.py).")
flags.DEFINE_list("train_code", ["current"], "Code of the train/decode phases: current and/or legacy.")
flags.DEFINE_list("loss_paths", ["current", "legacy"], "Loss paths of the loss phase: current and/or legacy.")
flags.DEFINE_string("legacy_commit", "93f04b4", "The commit before the one-log-softmax loss (legacy code).")
flags.DEFINE_integer("loss_steps", 3, "Steps of the loss child after the first (tracing) one.")
flags.DEFINE_integer("decode_batch", 32, "Sentences per decoding batch (kt-translate's default).")
flags.DEFINE_integer("extra_length", 50, "Decoding max length = source length + extra_length (§6.1).")
flags.DEFINE_integer("beam_size", 4, "Beam size (§6.1).")
flags.DEFINE_integer("repeats", 1, "Child processes per measurement; the median is reported.")
flags.DEFINE_integer("loss_repeats", None, "Child processes per loss-phase measurement (default: --repeats).")
flags.DEFINE_integer("threads", os.cpu_count(), "TensorFlow intra- and inter-op threads.")
flags.DEFINE_bool("startup", True, "Also measure a process that only starts TensorFlow (the floor).")
flags.DEFINE_integer("estimate_tokens", 25000, "Tokens per micro-batch of the memory estimate (§5.1: ~25000).")
flags.DEFINE_float("device_gb", 16.0, "Device memory of the estimate, GB (1e9 bytes).")
flags.DEFINE_float("device_usable", 0.9, "Fraction of the device memory the estimate lets tensors use.")
flags.DEFINE_string("child", None, "Internal: run one measurement (startup, train, decode, loss) in this process.")
flags.DEFINE_string("code", "current", "Internal: the child's code (current or legacy).")
FLAGS = flags.FLAGS
MB = 1024 * 1024


def memory_mb():
    """(VmRSS, VmHWM) of this process in MB, from /proc/self/status; (None, None) where there is none."""
    try:
        with open("/proc/self/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))
    except (OSError, KeyError):
        return None, None


def _git(*args) -> bytes:
    """Output of ``git -C ROOT args``; SystemExit that says what is missing when git or the commit is not there."""
    try:
        out = subprocess.run(["git", "-C", ROOT, *args], capture_output=True, check=False)
    except FileNotFoundError:
        raise SystemExit(f"bench_memory: the legacy code needs git (git {' '.join(args)}), which is not installed")
    if out.returncode != 0:
        raise SystemExit(f"bench_memory: the legacy code needs commit {FLAGS.legacy_commit} of {ROOT}: "
                         f"git {' '.join(args)} failed: {out.stderr.decode(errors='replace').strip()}")
    return out.stdout


def legacy_losses():
    """keras_transformer/losses.py of --legacy_commit, exec'd into a fresh module object (not kept in the repo)."""
    module = types.ModuleType("legacy_losses")
    module.__file__ = f"{FLAGS.legacy_commit}:keras_transformer/losses.py"
    exec(compile(_git("show", module.__file__).decode(), module.__file__, "exec"), module.__dict__)
    return module


def legacy_code_dir() -> str:
    """A temporary directory with --legacy_commit's keras_transformer and recipes (``git archive``)."""
    directory = tempfile.mkdtemp(prefix="kt_legacy_")
    with tarfile.open(fileobj=io.BytesIO(_git("archive", FLAGS.legacy_commit, "keras_transformer", "recipes"))) as tar:
        tar.extractall(directory)
    return directory


def config_of(recipe, vocab, layers):
    """The recipe's ModelConfig with V and N = num_encoder_layers = num_decoder_layers replaced where given."""
    import dataclasses

    changes = {"vocab_size": vocab} if vocab else {}
    if layers:
        changes.update(num_encoder_layers=layers, num_decoder_layers=layers)
    return dataclasses.replace(recipe.model, **changes)


def loss_step(path, labels, logits, epsilon):
    """A tf.function: loss under a tape, d loss / d logits, metric updates -> (loss, sum of the gradient)."""
    import tensorflow as tf

    if path == "current":
        from keras_transformer import losses

        metrics = losses.TokenMetrics()

        def step():  # as train_step.TransformerTrainer.train_step
            with tf.GradientTape() as tape:
                stats = losses.token_statistics(labels, logits.read_value(), epsilon)  # [B, T, 4]
                loss = tf.reduce_sum(stats[..., losses.SMOOTHED]) / losses.global_token_count(stats)
            grad = tape.gradient(loss, logits)  # [B, T, V]
            metrics.update_state(stats)
            return loss, tf.reduce_sum(grad)
    else:
        old = legacy_losses()
        loss_fn = old.LabelSmoothedCrossEntropy(epsilon)
        metrics = [old.SmoothedLoss(epsilon), old.TokenNLL(), old.Perplexity(), old.TokenAccuracy()]

        def step():  # as Keras' train_step with compile(loss=..., metrics=[...]): metrics after the gradient
            with tf.GradientTape() as tape:
                y_pred = logits.read_value()  # [B, T, V]
                loss = loss_fn(labels, y_pred)
            grad = tape.gradient(loss, logits)  # [B, T, V]
            for metric in metrics:
                metric.update_state(labels, y_pred)
            return loss, tf.reduce_sum(grad)

    return tf.function(step, jit_compile=harness.VARIANTS[FLAGS.variant][0])


def loss_child(recipe, config, b, t):
    """The loss phase's numbers: RSS before the measured steps, VmHWM after them, their difference."""
    import numpy as np
    import tensorflow as tf

    v = config.vocab_size
    labels = tf.constant(harness.fixed_batch(v, b, 2, t)[2])  # [B, T], padded
    # From numpy, freed after: TensorFlow's own CPU allocator keeps freed buffers resident, so logits drawn with
    # tf.random would leave ~2 [B, T, V] buffers in the baseline for the step to reuse unseen.
    values = np.random.default_rng(0).standard_normal((b, t, v), dtype=np.float32)
    logits = tf.Variable(values)  # [B, T, V] float32
    del values
    step = loss_step(FLAGS.code, labels, logits, recipe.train.label_smoothing)
    rss_before, _ = memory_mb()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS: the peak from here on is the loss path's
    for _ in range(1 + FLAGS.loss_steps):  # the first call also traces
        loss, _ = step()
        loss.numpy()
    _, peak = memory_mb()
    return {"rss_before_step_mb": rss_before, "peak_rss_mb": peak, "loss_path_mb": peak - rss_before,
            "tensors_btv": (peak - rss_before) * MB / (b * t * v * 4)}


def child(phase, recipe_name):
    """Run one phase and print its numbers as one JSON line."""
    harness.set_threads(FLAGS.threads)
    from keras_transformer.tf_setup import init_devices

    init_devices()
    import dataclasses

    from keras_transformer import recipes
    import tensorflow as tf

    start_rss, _ = memory_mb()
    start = time.perf_counter()
    recipe = recipes.get(recipe_name)
    config = config_of(recipe, int(FLAGS.vocab_sizes[0]) if FLAGS.vocab_sizes else None,
                       int(FLAGS.layers[0]) if FLAGS.layers else None)
    recipe = dataclasses.replace(recipe, model=config)
    b, s, t = harness.batch_shape(recipe_name, FLAGS.batch)
    result = {}
    if phase == "loss":
        result = loss_child(recipe, config, b, t)
    elif phase == "train":
        from keras_transformer.training import compile_model

        model = compile_model(harness.variant_recipe(recipe, FLAGS.variant))
        source, target_in, target_out = (tf.constant(x) for x in harness.fixed_batch(config.vocab_size, b, s, t))
        for _ in range(FLAGS.train_steps):
            model.train_on_batch((source, target_in), target_out)
        result["parameters"] = model.count_params()
    elif phase == "decode":
        from keras_transformer.decoding import translate_ids
        from keras_transformer.model import build_model

        model = build_model(config)
        source = harness.fixed_batch(config.vocab_size, FLAGS.decode_batch, s, t)[0]  # [B, S]
        sequences, _ = translate_ids(model, source, FLAGS.beam_size, recipe.decode.alpha, FLAGS.extra_length)
        sequences.numpy()
    _, peak = memory_mb()
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024 if sys.platform != "darwin" else 1024 ** 2)
    if phase != "loss":
        result.update(rss_after_startup_mb=start_rss, peak_rss_mb=peak if peak is not None else maxrss)
    print(json.dumps({**result, "ru_maxrss_mb": maxrss, "seconds": time.perf_counter() - start,
                      "vocab_size": config.vocab_size, "layers": config.num_decoder_layers}))


def run_child(spec, legacy_dir):
    """One fresh child process of ``spec`` = (phase, recipe, code, V, N); its JSON numbers."""
    phase, recipe_name, code, vocab, layers = spec
    flag_names = ("batch", "train_steps", "variant", "decode_batch", "extra_length", "beam_size", "threads",
                  "legacy_commit", "loss_steps")
    args = [f"--{n}={FLAGS[n].value}" for n in flag_names if FLAGS[n].value is not None]
    args += [f"--vocab_sizes={vocab or ''}", f"--layers={layers or ''}", f"--code={code}"]
    env = dict(os.environ)
    env.pop(CODE_DIR_ENV, None)
    if code == "legacy" and phase != "loss":
        env[CODE_DIR_ENV] = legacy_dir
    out = subprocess.run([sys.executable, os.path.abspath(__file__), f"--child={phase}", f"--recipes={recipe_name}",
                          *args], capture_output=True, text=True, check=False, env=env)
    if out.returncode != 0:
        raise SystemExit(f"bench_memory: the {phase} child ({code}) for {recipe_name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(specs, legacy_dir=None, repeats=None):
    """Median over ``repeats`` (--repeats) fresh processes of each spec; the specs alternate, rotated per repeat."""
    runs = {spec: [] for spec in specs}
    for r in range(repeats or FLAGS.repeats):
        for spec in specs[r % len(specs):] + specs[: r % len(specs)]:
            runs[spec].append(run_child(spec, legacy_dir))
    rows = []
    for (phase, recipe_name, code, _, _), results in runs.items():
        row = {k: round(harness.median([x[k] for x in results]), 2 if k == "tensors_btv" else 1) for k in results[0]}
        if "rss_after_startup_mb" in row:
            row["peak_minus_startup_mb"] = round(row["peak_rss_mb"] - row["rss_after_startup_mb"], 1)
        row.update({k: int(row[k]) for k in ("vocab_size", "layers", "parameters") if k in row})
        rows.append({"recipe": recipe_name, "phase": phase, "code": code, **row})
    return rows


def loss_ratios(rows):
    """current / legacy loss-path MB per (recipe, V) measured both ways."""
    loss = {(r["recipe"], r["vocab_size"], r["code"]): r["loss_path_mb"] for r in rows if r["phase"] == "loss"}
    return [{"recipe": name, "vocab_size": v, "current_mb": mb, "legacy_mb": loss[name, v, "legacy"],
             "ratio": round(mb / loss[name, v, "legacy"], 3)}
            for (name, v, code), mb in loss.items() if code == "current" and (name, v, "legacy") in loss]


def estimates(rows):
    """Memory of one step at --estimate_tokens tokens and the max_tokens_per_device of the device, per train row.

    Bytes = W + tokens (A + L): W = 16 bytes per parameter (float32 weights, gradients, Adam m and v), fixed;
    L = loss-path bytes per token (loss phase, current or legacy); A = the rest of the measured step per token,
    (peak - startup - L N - W) / N of the current code's train row at N = B T tokens.
    """
    loss = {(r["recipe"], r["vocab_size"], r["code"]): r["loss_path_mb"] * MB for r in rows if r["phase"] == "loss"}
    usable, out = FLAGS.device_gb * 1e9 * FLAGS.device_usable, []
    for r in rows:
        if r["phase"] != "train" or r["code"] != "current" or (r["recipe"], r["vocab_size"], "current") not in loss:
            continue
        b, _, t = harness.batch_shape(r["recipe"], FLAGS.batch)
        tokens = b * t
        weights = 16 * r["parameters"]
        rest = (r["peak_minus_startup_mb"] * MB - loss[r["recipe"], r["vocab_size"], "current"] - weights) / tokens
        est = {"recipe": r["recipe"], "vocab_size": r["vocab_size"], "layers": r["layers"], "measured_tokens": tokens,
               "parameters": r["parameters"], "non_loss_mb_per_1k_tokens": round(rest * 1000 / MB, 1)}
        for code in FLAGS.loss_paths:
            per_token = rest + loss.get((r["recipe"], r["vocab_size"], code), float("nan")) / tokens
            est[f"{code}_gb_at_estimate_tokens"] = round((weights + FLAGS.estimate_tokens * per_token) / 1e9, 2)
            est[f"{code}_max_tokens_per_device"] = int((usable - weights) / per_token // 500 * 500) \
                if per_token == per_token else None
        out.append(est)
    return out


def config_name(row):
    return "—" if row["phase"] == "startup" else f"{row['recipe']} V={row['vocab_size']} N={row['layers']}"


def settings(row):
    b, s, t = harness.batch_shape(row["recipe"], FLAGS.batch)
    return {"startup": "import + devices", "train": f"{FLAGS.variant}, {FLAGS.train_steps} steps, {b}×{s}→{t}",
            "decode": f"beam {FLAGS.beam_size}, {FLAGS.decode_batch}×{s}, +{FLAGS.extra_length}",
            "loss": f"loss + 4 metrics + ∂/∂logits, {1 + FLAGS.loss_steps} steps, [{b}, {t}, V]"}[row["phase"]]


def report(rows):
    print("\n" + harness.header("Peak resident memory (VmHWM), one fresh process per row"))
    print(f"threads {FLAGS.threads}; median of {FLAGS.repeats} process(es) (loss phase: "
          f"{FLAGS.loss_repeats or FLAGS.repeats}); startup = import TF + init devices; "
          f"legacy = commit {FLAGS.legacy_commit}; baseline = RSS after startup (train, decode) or right before the "
          f"measured steps (loss: logits already allocated); copies = (peak − baseline) / (B·T·V·4 bytes)\n")
    print(harness.markdown_table(
        ["config", "phase", "code", "settings", "peak RSS (MB)", "baseline RSS (MB)", "peak − baseline (MB)",
         "[B,T,V] f32 copies", "seconds"],
        [[config_name(r), r["phase"], r["code"], settings(r), harness.fmt(r["peak_rss_mb"], 0),
          harness.fmt(r.get("rss_after_startup_mb", r.get("rss_before_step_mb")), 0),
          harness.fmt(r.get("peak_minus_startup_mb", r.get("loss_path_mb")), 0), harness.fmt(r.get("tensors_btv")),
          harness.fmt(r["seconds"], 1)] for r in rows], right_from=4))
    ratios, est = loss_ratios(rows), estimates(rows)
    for x in ratios:
        print(f"\nloss path {x['recipe']} V={x['vocab_size']}: current {x['current_mb']:,.0f} MB / legacy "
              f"{x['legacy_mb']:,.0f} MB = {x['ratio']:.2f} (target ≤ 0.5)")
    if est:
        print(f"\nEstimate at {FLAGS.estimate_tokens:,} tokens per micro-batch, {FLAGS.device_gb:g} GB device "
              f"({FLAGS.device_usable:.0%} usable). Assumptions: bytes = W + tokens·(A + L); W = 16 B/parameter "
              f"(float32 weights, gradients, Adam m, v) is fixed; A = the measured step's non-loss memory per "
              f"target token (peak − startup − loss path − W, over B·T; it includes the logits and one-off tracing "
              f"memory, so it errs high) grows linearly with tokens at this S/T and sentence length; L = the loss "
              f"path's measured [B·T, V] float32 copies × V × 4 B; float32, no XLA; host RSS stands in for device "
              f"memory.\n")
        cols = ["config", "non-loss MB / 1k tokens"] + [f"{c} GB @ {FLAGS.estimate_tokens // 1000}k" for c in
                                                        FLAGS.loss_paths]
        cols += [f"{c} max_tokens_per_device" for c in FLAGS.loss_paths]
        print(harness.markdown_table(cols, [
            [config_name({**e, "phase": "train"}), harness.fmt(e["non_loss_mb_per_1k_tokens"], 0)]
            + [harness.fmt(e[f"{c}_gb_at_estimate_tokens"]) for c in FLAGS.loss_paths]
            + [f"{e[f'{c}_max_tokens_per_device']:,}" if e[f"{c}_max_tokens_per_device"] else None
               for c in FLAGS.loss_paths] for e in est], right_from=1))
    print(harness.json_line({"bench": "memory", "date": harness.now(), "cpu_count": os.cpu_count(),
                            "threads": FLAGS.threads, "repeats": FLAGS.repeats,
                            "loss_repeats": FLAGS.loss_repeats or FLAGS.repeats, "legacy_commit": FLAGS.legacy_commit,
                            "results": rows, "loss_path_ratios": ratios,
                            "estimates": est}))


def main(argv):
    del argv
    if FLAGS.child:
        return child(FLAGS.child, FLAGS.recipes[0])
    phases, vocabs = FLAGS.phases, [int(v) for v in FLAGS.vocab_sizes] or [None]
    layers = [int(n) for n in FLAGS.layers] or [None]
    legacy_train = "legacy" in FLAGS.train_code and {"train", "decode"} & set(phases)
    if legacy_train or ("loss" in phases and "legacy" in FLAGS.loss_paths):
        _git("cat-file", "-e", f"{FLAGS.legacy_commit}:keras_transformer/losses.py")  # fail before measuring
    legacy_dir = legacy_code_dir() if legacy_train else None
    try:
        rows = measure([("startup", FLAGS.recipes[0], "current", None, None)]) if FLAGS.startup else []
        for name in FLAGS.recipes:
            for v in vocabs:
                if "loss" in phases:
                    rows += measure([("loss", name, path, v, None) for path in FLAGS.loss_paths],
                                    repeats=FLAGS.loss_repeats)
                for n in layers:
                    for phase in [p for p in ("train", "decode") if p in phases]:
                        rows += measure([(phase, name, code, v, n) for code in FLAGS.train_code], legacy_dir)
    finally:
        if legacy_dir:
            shutil.rmtree(legacy_dir, ignore_errors=True)
    report(rows)


if __name__ == "__main__":
    from keras_transformer.tf_setup import silence_native_stderr

    silence_native_stderr()  # C++ start-up chatter (CUDA probing); Python errors still reach stderr
    app.run(main)
