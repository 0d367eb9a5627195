"""Peak memory and pairs/s of a local corpus's data path at two corpus sizes: flat memory is the goal.

    python bench/bench_corpus_scale.py                          # 1M and 4.5M pairs, gzip
    python bench/bench_corpus_scale.py --sizes=2000 --batches=5 --vocab_size=300 --sample_lines=2000   # smoke

Writes synthetic aligned En-De corpora of each size (seeded shuffles of Multi30k train and newstest2013/2014
pairs, repeated; --shards files per side, matched by a glob prefix) into a temporary directory, then measures
three stages per size, each in a fresh child process:

* validate: ``validation.check`` (the streaming pass: counts, UTF-8, a tokenizer sample of --sample_lines);
* first_run: what a first run on a fresh work directory does before training: the corpus check, its sample and
  SentencePiece training on it (``tokenizer.get_or_train``), the part whose memory could grow with the corpus;
* report:   ``kt-data-report --recipe=<recipe.json> --json`` in a new work directory (corpus check, tokenizer
  training, then one pass counting the length filter and one pass of training batches);
* batches:  ``build_datasets`` with the report's work directory (check and tokenizer cached, as on a
  resume), then the first --batches training batches.

Peak RSS is the child's ``ru_maxrss`` from ``os.wait4`` (the parent never imports TensorFlow: Linux counts
the parent's footprint at fork/exec into it); the child's own VmHWM is kept in the JSON as a cross-check. The
last line is JSON with ``rss_ratio`` = peak RSS at the largest size / at the smallest, per stage (goal <= 1.1).
"""

import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

from bench import harness  # noqa: E402

flags.DEFINE_list("sizes", ["1000000", "4500000"], "Corpus sizes in pairs.")
flags.DEFINE_list("stages", ["validate", "first_run", "report", "batches"], "Stages to measure.")
flags.DEFINE_bool("gzip", True, "Write the corpora gzipped (else plain text).")
flags.DEFINE_integer("shards", 1, "Files per side; more than one are read through a glob prefix.")
flags.DEFINE_integer("batches", 100, "Training batches the batches stage takes.")
flags.DEFINE_integer("vocab_size", 8000, "Shared BPE vocabulary of the bench recipe.")
flags.DEFINE_integer("sample_lines", 200_000, "tokenizer_sample_lines of the bench recipe (sentences).")
flags.DEFINE_integer("seed", 1, "Seed of the synthetic corpora and of the recipe.")
flags.DEFINE_string("data_dir", None, "Holds multi30k-task1-en-de/ and wmt-newstest-en-de/ (default: shared).")
flags.DEFINE_string("tmp_dir", None, "Where corpora and work directories go (default: a new temp directory).")
flags.DEFINE_bool("keep", False, "Keep the temporary directory.")
flags.DEFINE_string("child", None, "Internal: run one stage (validate, batches) in this process.")
flags.DEFINE_string("recipe_json", None, "Internal: the child's recipe file.")
flags.DEFINE_string("workdir", None, "Internal: the child's work directory.")
flags.DEFINE_string("prefix", None, "Internal: the train_prefix the recipe child writes.")
FLAGS = flags.FLAGS


def _data_dir() -> Path:
    """As ``corpora.resolve_data_dir``, without importing TensorFlow into the parent."""
    value = FLAGS.data_dir or os.environ.get("KT_DATA_DIR")
    return Path(value) if value else Path(__file__).resolve().parents[2] / "shared" / "data"


def _pool(data_dir: Path):
    """Non-empty (source, target) lines of Multi30k train and newstest2013/2014 as bytes, the material to repeat."""
    def lines(path):
        data = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
        return data.decode("utf-8").encode("utf-8").split(b"\n")[:-1]  # UTF-8 checked; one sentence per line

    pairs = []
    for directory, name, ext in (("multi30k-task1-en-de", "train", ".gz"), ("wmt-newstest-en-de", "newstest2013", ""),
                                 ("wmt-newstest-en-de", "newstest2014", "")):
        xs, ys = (lines(data_dir / directory / f"{name}.{lang}{ext}") for lang in ("en", "de"))
        assert len(xs) == len(ys), name
        pairs += [(x, y) for x, y in zip(xs, ys) if x.strip() and y.strip()]
    return pairs


def write_corpus(directory: Path, pool, size: int, shards: int, gz: bool, seed: int) -> str:
    """``size`` pairs as ``train-<k>.en/.de[.gz]`` shards, streamed from seeded shuffles of ``pool``; the glob."""
    directory.mkdir(parents=True, exist_ok=True)
    rng, order, written = random.Random(seed), [], 0
    for k in range(shards):
        count = size // shards + (1 if k < size % shards else 0)
        ext = ".gz" if gz else ""
        names = [directory / f"train-{k:03d}.{lang}{ext}" for lang in ("en", "de")]
        files = [gzip.open(n, "wb", compresslevel=1) if gz else open(n, "wb") for n in names]
        for _ in range(count):
            if not order:
                order = list(range(len(pool)))
                rng.shuffle(order)
            x, y = pool[order.pop()]
            files[0].write(x + b"\n")
            files[1].write(y + b"\n")
            written += 1
        for f in files:
            f.close()
    assert written == size
    return str(directory / ("train-*" if shards > 1 else "train-000"))


def bench_recipe(prefix: str):
    import dataclasses

    from keras_transformer import recipes

    base = recipes.get("multi30k")
    data = dataclasses.replace(base.data, corpus="text", train_prefix=prefix, eval_split="newstest2013",
                               test_split="newstest2014", max_length=128, tokens_per_batch=4096,
                               tokenizer_sample_lines=FLAGS.sample_lines, seed=FLAGS.seed)
    return dataclasses.replace(base, name="corpus_scale", data=data,
                               model=dataclasses.replace(base.model, vocab_size=FLAGS.vocab_size))


def _vm_hwm_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024


def child(stage: str) -> None:
    """Runs one stage in this (fresh) process; prints {"pairs", "seconds", "vm_hwm_mb", ...} as its last line."""
    from keras_transformer import recipes

    if stage == "recipe":
        Path(FLAGS.recipe_json).write_text(bench_recipe(FLAGS.prefix).to_json())
        return
    from keras_transformer.data import build_datasets, corpora, validation

    recipe = recipes.load(FLAGS.recipe_json)
    cfg = recipe.data
    data_dir = corpora.resolve_data_dir(FLAGS.data_dir)
    scans = []
    scan = validation._scan
    train = str(corpora.split_shards(cfg, cfg.train_split, data_dir)[0][0])
    # Counts real passes over the training corpus (cache misses); the eval split is small.
    validation._scan = lambda shards, *a: scans.append(str(shards[0][0]) == train) or scan(shards, *a)
    start = time.perf_counter()
    if stage == "validate":
        shards = corpora.split_shards(cfg, cfg.train_split, data_dir)
        result = validation.check(shards, cache_dir=Path(FLAGS.workdir) / "corpus",
                                  sample_sentences=cfg.tokenizer_sample_lines, seed=cfg.seed)
        out = dict(pairs=result.pairs_read, sample_pairs=result.sample_pairs)
    elif stage == "first_run":
        from keras_transformer.data import tokenizer

        from keras_transformer.workdir import WorkDir

        tokenizer.get_or_train(recipe, FLAGS.workdir, data_dir)
        cached = validation.check(corpora.split_shards(cfg, cfg.train_split, data_dir),
                                  cache_dir=WorkDir(FLAGS.workdir).corpus_cache)  # the stats the run cached
        out = dict(pairs=cached.pairs_read)
    else:  # batches
        train_ds, _, _ = build_datasets(recipe, FLAGS.workdir, data_dir, deterministic=True)
        pairs = sum(int(target_out.shape[0]) for _, target_out in train_ds.take(FLAGS.batches).as_numpy_iterator())
        out = dict(pairs=pairs)
    out.update(seconds=time.perf_counter() - start, vm_hwm_mb=_vm_hwm_mb(), train_corpus_passes=sum(scans))
    print(json.dumps(out))


def _run(args, env, log_dir: Path) -> dict:
    """Runs a child to completion; its last stdout line as JSON, plus wall seconds and its peak RSS.

    The child is reaped with ``os.wait4``, whose rusage is that child's own (``ru_maxrss``, KiB on Linux).
    """
    start = time.perf_counter()
    out_path, err_path = log_dir / "stdout.txt", log_dir / "stderr.txt"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=err)
        _, status, rusage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:4])} ... exit {proc.returncode}:\n{err_path.read_text()[-3000:]}")
    result = json.loads(out_path.read_text().strip().splitlines()[-1])
    result["wall_seconds"] = time.perf_counter() - start
    result["ru_maxrss_mb"] = rusage.ru_maxrss / 1024
    return result


def main(argv):
    del argv
    if FLAGS.child:
        return child(FLAGS.child)
    data_dir = _data_dir()  # the parent stays small: no TensorFlow here, only in the children
    root = Path(FLAGS.tmp_dir or tempfile.mkdtemp(prefix="kt_corpus_scale_"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])),
               TF_CPP_MIN_LOG_LEVEL="3")
    script = os.path.abspath(__file__)
    pool = _pool(data_dir)
    rows, results = [], []
    for size in (int(s) for s in FLAGS.sizes):
        start = time.perf_counter()
        prefix = write_corpus(root / f"corpus_{size}", pool, size, FLAGS.shards, FLAGS.gzip, FLAGS.seed)
        corpus_mb = sum(p.stat().st_size for p in (root / f"corpus_{size}").iterdir()) / 2 ** 20
        print(f"wrote {size} pairs ({corpus_mb:.0f} MB) in {time.perf_counter() - start:.0f} s: {prefix}.{{en,de}}",
              flush=True)
        recipe_json = root / f"recipe_{size}.json"  # written by a child: recipes import TensorFlow
        subprocess.run([sys.executable, script, "--child=recipe", f"--recipe_json={recipe_json}", f"--prefix={prefix}",
                        f"--vocab_size={FLAGS.vocab_size}", f"--sample_lines={FLAGS.sample_lines}",
                        f"--seed={FLAGS.seed}"], env=env, check=True, capture_output=True)
        common_args = [f"--recipe_json={recipe_json}", f"--data_dir={data_dir}", f"--batches={FLAGS.batches}"]
        for stage in FLAGS.stages:
            workdir = root / f"work_{size}" / (stage if stage in ("validate", "first_run") else "run")
            if stage == "report":
                args = [sys.executable, "-m", "keras_transformer.cli.data_report", f"--recipe={recipe_json}",
                        f"--workdir={workdir}", f"--data_dir={data_dir}", "--json"]
            else:
                args = [sys.executable, script, f"--child={stage}", f"--workdir={workdir}", *common_args]
            log_dir = root / f"log_{size}_{stage}"
            log_dir.mkdir(parents=True, exist_ok=True)
            r = _run(args, env, log_dir)
            pairs = r.get("pairs", r.get("pairs_read"))
            seconds = r.get("seconds", r["wall_seconds"])
            result = dict(size=size, stage=stage, pairs=pairs, seconds=round(seconds, 2),
                          wall_seconds=round(r["wall_seconds"], 2), pairs_per_second=round(pairs / seconds, 1),
                          peak_rss_mb=round(r["ru_maxrss_mb"], 1),
                          vm_hwm_mb=round(r["vm_hwm_mb"], 1) if "vm_hwm_mb" in r else None,
                          train_corpus_passes=r.get("train_corpus_passes"))
            results.append(result)
            rows.append([f"{size:,}", stage, f"{pairs:,}", harness.fmt(seconds, 1), harness.fmt(pairs / seconds, 0),
                         harness.fmt(result["peak_rss_mb"], 0)])
            print(f"  {stage}: {json.dumps(result)}", flush=True)
    sizes = sorted({r["size"] for r in results})
    ratio = {}
    for stage in FLAGS.stages:
        peak = {r["size"]: r["peak_rss_mb"] for r in results if r["stage"] == stage}
        if len(sizes) > 1:
            ratio[stage] = round(peak[sizes[-1]] / peak[sizes[0]], 3)
    print(harness.header("Local corpus scale: peak RSS and pairs/s per stage (fresh process each)"))
    print(f"corpora: {'gzip' if FLAGS.gzip else 'plain'}, {FLAGS.shards} shard(s) per side; tokenizer "
          f"{FLAGS.vocab_size} BPE on {FLAGS.sample_lines} sampled sentences; batches: first {FLAGS.batches}")
    print(harness.markdown_table(["pairs", "stage", "pairs read/batched", "seconds", "pairs/s", "peak RSS MB"],
                                rows))
    if ratio:
        print("peak RSS ratio, largest / smallest corpus: " + ", ".join(f"{k} {v}" for k, v in ratio.items()))
    if not FLAGS.keep and not FLAGS.tmp_dir:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    print(harness.json_line({"bench": "corpus_scale", "date": harness.now(), "cpu_count": os.cpu_count(),
                            "gzip": FLAGS.gzip, "shards": FLAGS.shards, "vocab_size": FLAGS.vocab_size,
                            "sample_lines": FLAGS.sample_lines, "results": results, "rss_ratio": ratio}))


if __name__ == "__main__":
    app.run(main)
