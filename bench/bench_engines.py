"""Beam-search translation throughput, strings in -> strings out: our SavedModel against CTranslate2 and HF generate.

    python bench/bench_engines.py                                   # 1,000 test_2016_flickr sentences, batch 1 and 32
    python bench/bench_engines.py --num_sentences=200 --rounds=5 --systems=saved_model,hf,hf_gnmt
    python bench/bench_engines.py --baseline_saved_model=/tmp/legacy_export/saved_models/multi30k_en_de
    python bench/bench_engines.py --baseline_saved_model=/tmp/a/multi30k_en_de,/tmp/b/multi30k_en_de --batch_sizes=32

Every system runs the same weights (--model: a SavedModel or a training work directory, read by
artifacts.load_model) on the same sentences, cut into the same batches (sorted by source length in
subwords), with the recipe's §6.1 decoding: beam 4, α 0.6, maximum output = source + 50. Each system times its
own tokenization and detokenization with the model's SentencePiece file. Systems (--systems):

    saved_model          our decoder today: the model exported afresh (tasks.export, parallel_searches =
                         --inter_threads) and served through
                         tf.saved_model.load(...).signatures["serving_default"]
    saved_model_bfloat16 the same, exported in bfloat16 (export.with_precision; kt-export --precision=bfloat16)
    saved_model_xla      the same with the search compiled by XLA (kt-export --jit_compile, default buckets); its
                         warm-up requests compile every bucket at load (load_seconds), as TF Serving does
    saved_model_step     the same with the default search's loop around an XLA-compiled step (kt-export
                         --step_compile, decoding.hybrid_beam_search); its warm-up requests replayed at load
    saved_model_heuristic, saved_model_xla_heuristic, saved_model_step_heuristic, saved_model_bfloat16_heuristic
                         the four above with kt-export --stop_rule=heuristic
                         (an input's search stops as if its unfinished hypotheses ended now: HF generate's default
                         rule)
    <any of the above>_onednn
                         the same export run with TensorFlow's oneDNN kernels (TF_ENABLE_ONEDNN_OPTS=1); without
                         the suffix a SavedModel runs as kt-translate runs it, on TensorFlow's own kernels
                         (TF_ENABLE_ONEDNN_OPTS=0, keras_transformer.tf_setup.onednn_default)
    baseline, baseline2, ...
                         each --baseline_saved_model loaded as it is (e.g. older exports of the same weights);
                         its row gives our SavedModel's speed-up over it ("ours ×")
    ctranslate2_float32, ctranslate2_int8
                         keras_transformer.engines.ctranslate2_convert (quantization float32 / int8), served by
                         ctranslate2.Translator.translate_batch as it comes: its length penalty log P / |Y|^α,
                         its stopping rule (K finished hypotheses), one maximum length per batch
    kt_ctranslate2_float32, kt_ctranslate2_int8
                         the same directories served by keras_transformer.engines.ctranslate2_translate as
                         kt-translate serves them: CTranslate2's own search (length penalty α), per-sentence
                         maximum lengths
    kt_ctranslate2_gnmt_float32, kt_ctranslate2_gnmt_int8
                         the same with search="gnmt", which makes CTranslate2 decode as ours (GNMT penalty) by
                         running every sentence to its maximum length and rescoring
    hf                   transformers generate (MarianMTModel; M2M100 for a pre-LN model) on the mapped weights
                         (bench/marian.py says what differs: length penalty log P / |Y|^α against our GNMT one,
                         per-batch maximum length)
    hf_gnmt              the same with our length penalty swapped into generate's beam search (not by default)

Each system runs in a worker process of its own (bench/engines.py) with --threads intra-op threads and
--inter_threads inter-op threads (TensorFlow pools; torch.set_num_threads / set_num_interop_threads;
CTranslate2 intra_threads / inter_threads). With --inter_threads=P > 1 the two engines that can decode parts of
a batch at once do: our SavedModel is exported with parallel_searches=P (keras_transformer.decoding.parallel),
CTranslate2's translate_batch gets max_batch_size = ceil(B / P) (its P translator replicas take a part each);
--threads=1 --inter_threads=2 is that layout on 2 cores. After an untimed warm-up (first and last batch), each round
times every system over all sentences, the order rotated round by round; figures are medians over rounds, and
a ratio is the median of the per-round ratios of sentences/s. "identical" counts translations equal to our
SavedModel's; BLEU is keras_transformer.tasks.translation.metric.score (sacreBLEU, cased 13a) of each system's output on
these sentences. A peer whose package is missing is skipped with a note; the benchmark runs with TensorFlow only.
"""

import dataclasses
import importlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags, logging  # noqa: E402

from bench import harness  # noqa: E402
from keras_transformer.config import StepCompile, XlaBuckets
from keras_transformer.serving import checks
from keras_transformer.data import files
from keras_transformer import tasks
from keras_transformer import artifacts

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OURS = ("saved_model", "saved_model_bfloat16", "saved_model_xla", "saved_model_step", "saved_model_heuristic",
        "saved_model_xla_heuristic", "saved_model_step_heuristic", "saved_model_bfloat16_heuristic")
ONEDNN = "_onednn"  # suffix: one of OURS run with oneDNN's kernels
ALL_SYSTEMS = (*OURS, *(s + ONEDNN for s in OURS), "ctranslate2_float32", "ctranslate2_int8",
               "kt_ctranslate2_float32", "kt_ctranslate2_int8", "kt_ctranslate2_gnmt_float32",
               "kt_ctranslate2_gnmt_int8", "hf", "hf_gnmt")

flags.DEFINE_string("model", os.path.join(REPO, "saved_models", "multi30k_en_de"),
                    "A SavedModel or a training work directory (artifacts.load_model).")
flags.DEFINE_string("checkpoint", "latest", "For a work directory: latest, averaged, best or a prefix.")
flags.DEFINE_list("baseline_saved_model", [], "Also time these SavedModels as they are (rows 'baseline', "
                                               "'baseline2', ...).")
flags.DEFINE_list("systems", ["saved_model", "ctranslate2_float32", "ctranslate2_int8", "kt_ctranslate2_float32",
                              "kt_ctranslate2_int8", "hf"],
                  f"Systems to time, of {', '.join(ALL_SYSTEMS)} (--baseline_saved_model adds the baselines).")
flags.DEFINE_string("data_dir", None, "Data directory (default: $KT_DATA_DIR or ../shared/data).")
flags.DEFINE_string("split", "test_2016_flickr", "Split of the model's corpus to translate.")
flags.DEFINE_integer("num_sentences", 1000, "The split's first N sentences.")
flags.DEFINE_list("batch_sizes", ["1", "32"], "Batch sizes (sentences per call).")
flags.DEFINE_integer("rounds", 3, "Timed rounds per batch size; figures are medians.")
flags.DEFINE_integer("threads", 2, "Intra-op threads of every system.")
flags.DEFINE_integer("inter_threads", 1, "Inter-op threads (TensorFlow, torch) / CTranslate2 inter_threads.")
flags.DEFINE_string("omp_wait_policy", "",
                    "OMP_WAIT_POLICY of the torch and CTranslate2 workers (libgomp); '' (the default) leaves it "
                    "unset, as their users run them (PASSIVE made CTranslate2 about 3x slower on a 2-core Zen 4).")
flags.DEFINE_float("pause", 0.5, "Seconds between two timed systems (lets spinning threads go idle).")
flags.DEFINE_string("workdir", None, "Keep the converted models here (default: a temporary directory).")
FLAGS = flags.FLAGS

LABELS = {"saved_model": "keras_transformer SavedModel (fresh export)",
          "saved_model_bfloat16": "keras_transformer SavedModel, --precision=bfloat16",
          "saved_model_xla": "keras_transformer SavedModel, --jit_compile (XLA)",
          "saved_model_step": "keras_transformer SavedModel, --step_compile (XLA step)",
          "saved_model_step_heuristic": "keras_transformer SavedModel, --step_compile --stop_rule=heuristic",
          "saved_model_heuristic": "keras_transformer SavedModel, --stop_rule=heuristic",
          "saved_model_xla_heuristic": "keras_transformer SavedModel, --jit_compile --stop_rule=heuristic",
          "saved_model_bfloat16_heuristic": "keras_transformer SavedModel, --precision=bfloat16 --stop_rule=heuristic",
          "ctranslate2_float32": "CTranslate2 float32 (translate_batch)",
          "ctranslate2_int8": "CTranslate2 int8 (translate_batch)",
          "kt_ctranslate2_float32": "CTranslate2 float32 (kt-translate, native search)",
          "kt_ctranslate2_int8": "CTranslate2 int8 (kt-translate, native search)",
          "kt_ctranslate2_gnmt_float32": "CTranslate2 float32 (kt-translate, gnmt search)",
          "kt_ctranslate2_gnmt_int8": "CTranslate2 int8 (kt-translate, gnmt search)",
          "hf": "HF generate", "hf_gnmt": "HF generate, GNMT length penalty"}


def baselines():
    """{system name: SavedModel directory} of --baseline_saved_model: baseline, baseline2, ..."""
    return {"baseline" + (str(i + 1) if i else ""): path for i, path in enumerate(FLAGS.baseline_saved_model)}


def installed(*packages):
    return all(importlib.util.find_spec(p) is not None for p in packages)


def version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def ctranslate2_module(name):
    """keras_transformer.engines.<name>, or a reason string when CTranslate2 cannot run here."""
    if not installed("ctranslate2"):
        return "ctranslate2 not installed"
    try:
        return importlib.import_module(f"keras_transformer.engines.{name}")
    except ImportError as e:
        return f"pending: keras_transformer.engines.{name} cannot be imported ({e})"


def _compiled(kind):
    """What an export of ours compiles with XLA: the whole search, its step, or nothing."""
    return XlaBuckets() if "_xla" in kind else StepCompile() if "_step" in kind else None


def prepare(systems, workdir, model, recipe, tok):
    """{system: worker arguments} for the systems that can run, and {system: reason} for those skipped."""
    from keras_transformer.serving import writer as export

    common_args = [f"--threads={FLAGS.threads}", f"--inter_threads={FLAGS.inter_threads}",
                   f"--beam_size={recipe.decode.beam_size}", f"--alpha={recipe.decode.alpha}",
                   f"--extra_length={recipe.decode.extra_length}",
                   f"--max_source_length={checks.max_source_length(recipe)}",
                   f"--max_length={recipe.model.max_length}", f"--spm={tok.model_path}"]
    ready, skipped, exported = {}, {}, set()
    for system in systems:
        kind = system.removesuffix(ONEDNN)
        path = os.path.join(workdir, kind)
        if kind in OURS:
            if kind not in exported:  # one export for both kernels
                exported.add(kind)
                precision = "bfloat16" if "_bfloat16" in kind else "float32"
                stop_rule = "heuristic" if kind.endswith("heuristic") else "exact"
                decode = dataclasses.replace(recipe.decode, stop_rule=stop_rule)
                tasks.export(export.with_precision(model, precision), tok, dataclasses.replace(recipe, decode=decode),
                             path, parallel_searches=FLAGS.inter_threads, xla=_compiled(kind))
            ready[system] = ["--kind=saved_model", f"--artifact={path}"]
        elif system in baselines():
            ready[system] = ["--kind=saved_model", f"--artifact={baselines()[system]}"]
        elif system in ("hf", "hf_gnmt"):
            if not installed("torch", "transformers"):
                skipped[system] = "torch or transformers not installed"
                continue
            from bench import marian

            hf_dir = os.path.join(workdir, "marian")
            if not os.path.isdir(hf_dir):
                marian.save(marian.from_keras(model), hf_dir)
            ready[system] = [f"--kind={system}", f"--artifact={hf_dir}"]
        else:  # [kt_]ctranslate2_<quantization>: one converted directory per quantization
            kind, quantization = system.rsplit("_", 1)
            convert, serve = ctranslate2_module("ctranslate2_convert"), ctranslate2_module("ctranslate2_translate")
            reason = next((x for x in (convert, serve if kind.startswith("kt_") else None) if isinstance(x, str)),
                          None)
            if reason:
                skipped[system] = reason
                continue
            ct2_dir = os.path.join(workdir, f"ctranslate2_{quantization}")
            if not os.path.isdir(ct2_dir):
                convert.convert(model, tok, recipe, ct2_dir, quantization)
            ready[system] = [f"--kind={kind}", f"--artifact={ct2_dir}"]
    return {s: args + common_args for s, args in ready.items()}, skipped


class Worker:
    """One system's worker process (bench/engines.py) and its JSON-lines protocol."""

    def __init__(self, system, args, log_dir):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
        if FLAGS.omp_wait_policy and not args[0].endswith("saved_model"):
            env["OMP_WAIT_POLICY"] = FLAGS.omp_wait_policy
        if args[0].endswith("saved_model"):  # TensorFlow's kernels as kt-translate chooses them, or oneDNN's
            env["TF_ENABLE_ONEDNN_OPTS"] = "1" if system.endswith(ONEDNN) else "0"
        self.system, self.log = system, os.path.join(log_dir, f"{system}.log")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "engines.py"), *args], cwd=REPO, env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)

    def read(self):
        line = self.proc.stdout.readline()
        if not line:
            with open(self.log) as f:
                tail = f.read()[-2000:]
            raise RuntimeError(f"{self.system}: worker exited ({self.proc.wait()}):\n{tail}")
        return json.loads(line)

    def ask(self, **command):
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def time_batch_size(workers, lines, order, batch_size):
    """{system: (round seconds, translations in input order)} for one batch size."""
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    for worker in workers.values():
        worker.ask(cmd="batches", batches=[[lines[i] for i in batch] for batch in batches])
        worker.ask(cmd="warmup")
    outputs = {system: [] for system in workers}

    def runner(system):
        def run():
            reply = workers[system].ask(cmd="run")
            translations = [None] * len(lines)
            for batch, out in zip(batches, reply["translations"]):
                for i, text in zip(batch, out):
                    translations[i] = text
            outputs[system].append((reply["seconds"], translations))
            logging.info("batch %d, round %d: %s %.1f s", batch_size, len(outputs[system]), system, reply["seconds"])
        return run

    harness.interleaved({s: runner(s) for s in workers}, FLAGS.rounds, pause=FLAGS.pause)
    return outputs


def rows_for(batch_size, outputs, references, n):
    from keras_transformer.tasks.translation import metric

    seconds = {s: [x[0] for x in runs] for s, runs in outputs.items()}
    ours = outputs["saved_model"][0][1] if "saved_model" in outputs else None
    rows = []
    for system, runs in outputs.items():
        first = runs[0][1]
        label = LABELS.get(system.removesuffix(ONEDNN)) or f"SavedModel as given ({system}: {baselines()[system]})"
        if system.endswith(ONEDNN):
            label += ", oneDNN kernels"
        row = {"system": system, "label": label, "batch_size": batch_size, "sentences": n,
               "seconds": round(harness.median(seconds[system]), 3),
               "round_seconds": [round(x, 3) for x in seconds[system]],
               "sentences_per_s": round(n / harness.median(seconds[system]), 2),
               "bleu": round(metric.score(first, references)["bleu"], 2),
               "same_output_every_round": all(r[1] == first for r in runs)}
        for name, key in (("ctranslate2_float32", "ratio_vs_ctranslate2_float32"), ("hf", "ratio_vs_hf")):
            if name in seconds:  # speed ratio = reference time / this system's time, per round
                row[key] = round(harness.median([r / x for r, x in zip(seconds[name], seconds[system])]), 3)
        if ours is not None:
            row["identical_vs_saved_model"] = sum(a == b for a, b in zip(first, ours))
        if system in baselines() and "saved_model" in seconds:  # how much faster ours is, per round
            row["saved_model_speedup"] = round(harness.median(
                [x / s for x, s in zip(seconds[system], seconds["saved_model"])]), 3)
        rows.append(row)
    return rows


def main(argv):
    del argv
    import sentencepiece

    from keras_transformer.data import corpora

    systems = [s for s in FLAGS.systems if s not in baselines()] + list(baselines())
    unknown = set(systems) - set(ALL_SYSTEMS) - set(baselines())
    if unknown:
        raise app.UsageError(f"--systems: unknown {sorted(unknown)}; known: {', '.join(ALL_SYSTEMS)}")
    model, recipe, tok = artifacts.load_model(FLAGS.model, FLAGS.checkpoint, FLAGS.data_dir)
    source, reference = corpora.split_files(recipe.data, FLAGS.split, corpora.resolve_data_dir(FLAGS.data_dir))
    lines = files.read_text(source)[: FLAGS.num_sentences]
    references = files.read_text(reference)[: len(lines)]
    spm = sentencepiece.SentencePieceProcessor(model_file=tok.model_path)
    lengths = [len(x) for x in spm.encode(lines)]
    order = sorted(range(len(lines)), key=lambda i: (lengths[i], i))  # the same batches for every system

    workdir = FLAGS.workdir or tempfile.mkdtemp(prefix="bench_engines_")
    os.makedirs(workdir, exist_ok=True)
    start = time.perf_counter()
    worker_args, skipped = prepare(systems, workdir, model, recipe, tok)
    prepare_seconds = time.perf_counter() - start
    workers, results = {}, []
    try:
        for system, args in worker_args.items():
            workers[system] = Worker(system, args, workdir)
        load_seconds = {}
        for system, worker in list(workers.items()):
            reply = worker.read()
            if "error" in reply:
                skipped[system] = f"failed to load: {reply['error']}"
                worker.close()
                del workers[system]
            else:
                load_seconds[system] = reply["load_seconds"]
        for batch_size in map(int, FLAGS.batch_sizes):
            outputs = time_batch_size(workers, lines, order, batch_size)
            results += rows_for(batch_size, outputs, references, len(lines))
    finally:
        for worker in workers.values():
            worker.close()
        if not FLAGS.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    for row in results:
        row["load_seconds"] = load_seconds[row["system"]]
    report(results, skipped, recipe, len(lines), prepare_seconds)


def report(results, skipped, recipe, n, prepare_seconds):
    d = recipe.decode
    print(f"\n{harness.header('bench_engines')}: {n} {FLAGS.split} sentences, beam {d.beam_size}, α {d.alpha}, "
          f"max length source + {d.extra_length}, {FLAGS.threads} intra-op / {FLAGS.inter_threads} inter-op threads, "
          f"medians of {FLAGS.rounds} rounds\n")
    columns = ["system", "batch", "sentences/s", "× CTranslate2 fp32", "× HF", "ours ×", f"identical (of {n})",
               "BLEU"]
    rows = [[r["label"], r["batch_size"], harness.fmt(r["sentences_per_s"]), harness.fmt(r.get(
        "ratio_vs_ctranslate2_float32")), harness.fmt(r.get("ratio_vs_hf")), harness.fmt(r.get(
            "saved_model_speedup")), r.get("identical_vs_saved_model"), harness.fmt(r["bleu"])] for r in results]
    print(harness.markdown_table(columns, rows, right_from=1))
    for system, reason in skipped.items():
        print(f"skipped {system}: {reason}")
    versions = {p: version(p) for p in ("tensorflow", "keras", "tensorflow-text", "sentencepiece", "torch",
                                         "transformers", "ctranslate2")}
    print(harness.json_line({
        "bench": "engines", "date": harness.now(), "cpu_count": os.cpu_count(), "model": FLAGS.model,
        "split": FLAGS.split, "num_sentences": n, "beam_size": d.beam_size, "alpha": d.alpha,
        "extra_length": d.extra_length, "threads": FLAGS.threads, "inter_threads": FLAGS.inter_threads,
        "omp_wait_policy": FLAGS.omp_wait_policy, "rounds": FLAGS.rounds, "versions": versions,
        "prepare_seconds": round(prepare_seconds, 1), "skipped": skipped, "results": results}))


if __name__ == "__main__":
    from keras_transformer.tf_setup import init_devices

    init_devices()
    app.run(main)
