"""Training throughput and model FLOP utilisation: our Keras training step against PyTorch's nn.Transformer.

    python bench/bench_train.py                                   # multi30k and base, our variants + torch eager
    python bench/bench_train.py --variants=graph --torch_compile   # adds torch.compile (minutes to compile)
    python bench/bench_train.py --recipes=tiny --steps=2 --rounds=1   # smoke run (tests/bench)

Both frameworks train the same architecture (bench/torch_reference.py lists the small differences) on the
same fixed token-id batches (bench/harness.py: multi30k [160, 24] -> [160, 26], a real ~4096-token bucket;
base [24, 24] -> [24, 26], scaled down from the paper's ~25000 tokens per side so a CPU step takes seconds).
Our step is ``model.train_on_batch`` on ``training.compile_model(recipe)``: the same ``tf.function`` as
``fit``'s step (loss, gradients, Adam on Eq. 3, four token metrics), in the variants of --variants:

    graph     jit_compile=False, float32 (the recipes' default)
    xla       jit_compile=True
    bf16      mixed_bfloat16 (recipe.train.mixed_precision)
    xla_bf16  both

PyTorch runs eager in float32 ("eager"), eager under ``torch.autocast("cpu", dtype=torch.bfloat16)``
("eager_bf16", when a bf16 variant of ours runs) and, with --torch_compile, under ``torch.compile`` (minutes
of compilation on a small CPU, hence off by default). Every candidate is built and run once (tracing,
compilation) before timing; then each round times --steps steps of every candidate in turn, the order rotated
per round, and the figures are medians over rounds. "ratio vs torch eager" is the median of the per-round
ratios (torch step time / our step time) against the PyTorch eager row of the same precision
("torch_reference": eager for float32 variants, eager_bf16 for bf16 ones): > 1 means we are faster.
MFU = train_step_flops (bench/harness.py) / step time / the dense matmul peak of the
variant's compute dtype, measured every round in the same process (best of TensorFlow and NumPy float32; TF
bfloat16). Threads: TensorFlow intra- and inter-op pools and torch's intra- and inter-op threads all get
--threads (default os.cpu_count()). libgomp (torch's OpenMP) spin-waits by default, which collapses when another
process holds a core (a multi30k step took 8-12 s instead of 3.5-4 s on a shared 2-core machine), so
OMP_WAIT_POLICY=PASSIVE is set unless --notorch_omp_passive. Without torch installed, torch rows say "missing".
The JSON keeps each candidate's first-step loss ("first_loss"): from random weights both frameworks should start
near the same label-smoothed loss (a little above ln V), a cheap check that they compute the same objective.
"""

import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

from bench import harness  # noqa: E402

flags.DEFINE_list("recipes", ["multi30k", "base"], "Recipes whose model configs to train.")
flags.DEFINE_list("variants", ["graph", "xla", "bf16"], "Our variants: graph, xla, bf16, xla_bf16.")
flags.DEFINE_integer("steps", None, "Timed steps per candidate per round (default: 2; 1 for base).")
flags.DEFINE_integer("rounds", 5, "Rounds of interleaved timing; figures are medians over rounds.")
flags.DEFINE_string("batch", None, "Batch shape BxSxT for every recipe (default: per recipe, bench/harness.py).")
flags.DEFINE_integer("threads", os.cpu_count(), "Threads for TensorFlow's and torch's pools.")
flags.DEFINE_float("peak_seconds", 0.5, "Seconds per matmul-peak probe (one probe per round and framework).")
flags.DEFINE_bool("torch", True, "Include PyTorch when it is installed.")
flags.DEFINE_bool("torch_compile", False, "Also time torch.compile (slow to compile on a small CPU).")
flags.DEFINE_bool("torch_omp_passive", True, "Set OMP_WAIT_POLICY=PASSIVE for torch (see the docstring).")
FLAGS = flags.FLAGS

DEFAULT_STEPS = {"base": 1}


def import_torch():
    """torch with its threads set, or None when it is not installed (CI) or not wanted."""
    if not FLAGS.torch:
        return None
    if FLAGS.torch_omp_passive:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(FLAGS.threads)
    torch.set_num_interop_threads(FLAGS.threads)
    return torch


def keras_candidate(recipe, variant, batch):
    """Build, compile and run once (trace) our model; returns (run one step, first loss, parameters)."""
    import keras
    import tensorflow as tf

    from keras_transformer.training import compile_model

    model = compile_model(harness.variant_recipe(recipe, variant))
    keras.mixed_precision.set_global_policy("float32")  # compile_model sets mixed_bfloat16 globally
    source, target_in, target_out = (tf.constant(x) for x in batch)
    loss = model.train_on_batch((source, target_in), target_out, return_dict=True)["loss"]
    return lambda: model.train_on_batch((source, target_in), target_out), float(loss), model.count_params()


def torch_candidate(recipe, batch, variant):
    from bench import torch_reference

    step, parameters = torch_reference.make_train_step(recipe, batch, compile_model=variant == "compile",
                                                       bf16=variant == "eager_bf16")
    return step, step(), parameters


def torch_reference_variant(variant: str) -> str:
    """The PyTorch eager row a row of ``variant`` is compared with: the same compute precision."""
    return "eager_bf16" if "bf16" in variant else "eager"


def bench_recipe(name, torch, peaks):
    from keras_transformer import recipes
    from keras_transformer import PAD_ID

    recipe = recipes.get(name)
    b, s, t = harness.batch_shape(name, FLAGS.batch)
    batch = harness.fixed_batch(recipe.model.vocab_size, b, s, t)
    steps = FLAGS.steps or DEFAULT_STEPS.get(name, 2)
    target_tokens, flops = int((batch[2] != PAD_ID).sum()), harness.train_step_flops(recipe.model, b, s, t)
    rows, candidates = [], {}

    def add(framework, variant, build):
        row = {"recipe": name, "framework": framework, "variant": variant, "batch": [b, s, t],
               "target_tokens": target_tokens, "flops_per_step": flops, "status": "ok"}
        rows.append(row)
        if build is None:
            row["status"] = "missing (torch not installed)"
            return
        start = time.perf_counter()
        try:
            step, row["first_loss"], row["parameters"] = build()
        except Exception as e:  # e.g. torch.compile without a working compiler: report, do not stop
            row["status"] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
            return
        row["warmup_seconds"] = round(time.perf_counter() - start, 1)  # build + first step (trace, compile)
        candidates[(framework, variant)] = lambda: [step() for _ in range(steps)]

    for variant in FLAGS.variants:
        add("keras", variant, lambda: keras_candidate(recipe, variant, batch))
    torch_variants = ["eager"] + (["eager_bf16"] if any("bf16" in v for v in FLAGS.variants) else [])
    for variant in torch_variants + (["compile"] if FLAGS.torch_compile else []) if FLAGS.torch else []:
        add("pytorch", variant, torch and (lambda: torch_candidate(recipe, batch, variant)))

    times = harness.interleaved(candidates, FLAGS.rounds, between=lambda: update_peaks(peaks))
    for row in rows:
        key = (row["framework"], row["variant"])
        if key not in times:
            continue
        step_times = [x / steps for x in times[key]]
        step_s = harness.median(step_times)
        row.update(step_seconds=round(step_s, 4), round_step_seconds=[round(x, 4) for x in step_times],
                   target_tokens_per_s=round(target_tokens / step_s, 1),
                   model_tflops_per_s=round(flops / step_s / 1e12, 5))
        reference = torch_reference_variant(row["variant"])
        if ("pytorch", reference) in times:
            ratios = [r / x for r, x in zip(times["pytorch", reference], times[key])]
            row.update(ratio_vs_torch_eager=round(harness.median(ratios), 3), torch_reference=reference)
    for row in rows:  # the peak is the best seen over all rounds so far
        if "step_seconds" in row:
            peak = peaks["bfloat16"] if "bf16" in row["variant"] else peaks["float32"]
            row["mfu"] = round(flops / row["step_seconds"] / peak, 4)
    return rows


def update_peaks(peaks):
    bfloat16 = any("bf16" in v for v in FLAGS.variants)
    measured = harness.matmul_peak(seconds=FLAGS.peak_seconds, bfloat16=bfloat16)
    peaks["float32"] = max(peaks.get("float32", 0.0), measured["tensorflow"], measured["numpy"])
    peaks["bfloat16"] = max(peaks.get("bfloat16", 0.0), measured.get("tensorflow_bf16", 0.0))


def main(argv):
    del argv
    unknown = sorted(set(FLAGS.variants) - set(harness.VARIANTS))
    if unknown:
        raise app.UsageError(f"--variants: unknown {', '.join(unknown)}; expected some of "
                             f"{', '.join(harness.VARIANTS)}")
    harness.set_threads(FLAGS.threads)
    from keras_transformer.tf_setup import init_devices

    init_devices()
    torch = import_torch()
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(1)  # once: re-seeding later would make the built tf.functions retrace
    peaks, rows = {}, []
    update_peaks(peaks)
    for name in FLAGS.recipes:
        rows += bench_recipe(name, torch, peaks)
        keras.backend.clear_session()
        gc.collect()
    versions = {"tensorflow": tf.__version__, "keras": keras.__version__, "torch": torch and torch.__version__}
    print("\n" + harness.header("Training throughput, keras_transformer vs PyTorch nn.Transformer"))
    print(f"threads {FLAGS.threads}; TF {versions['tensorflow']}, Keras {versions['keras']}, torch "
          f"{versions['torch'] or 'not installed'}; matmul peak float32 {peaks['float32'] / 1e9:.1f} GFLOP/s, "
          f"bfloat16 {peaks['bfloat16'] / 1e9:.1f} GFLOP/s; medians of {FLAGS.rounds} rounds\n")
    print(harness.markdown_table(
        ["config", "framework", "variant", "batch B×S→T", "target tokens/s", "step time (s)",
         "ratio vs torch eager (same precision)", "MFU"],
        [[r["recipe"], r["framework"], r["variant"] if r["status"] == "ok" else f"{r['variant']}: {r['status']}",
          "{}×{}→{}".format(*r["batch"]), harness.fmt(r.get("target_tokens_per_s"), 0),
          harness.fmt(r.get("step_seconds"), 3), harness.fmt(r.get("ratio_vs_torch_eager")),
          None if "mfu" not in r else f"{100 * r['mfu']:.1f}%"] for r in rows], right_from=3))
    print(harness.json_line({"bench": "train", "date": harness.now(),
                            "cpu_count": os.cpu_count(), "threads": FLAGS.threads, "versions": versions,
                            "peak_flops": {k: round(v) for k, v in peaks.items()}, "rounds": FLAGS.rounds,
                            "results": rows}))


if __name__ == "__main__":
    from keras_transformer.tf_setup import silence_native_stderr

    silence_native_stderr()  # C++ start-up chatter (CUDA probing); Python errors still reach stderr
    app.run(main)
