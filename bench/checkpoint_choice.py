"""The best single checkpoint against the average of the k best, scored on trees that did not choose them.

    python bench/checkpoint_choice.py --parses=parses/seed3,parses/seed2 --split=dev

A parser run keeps its k best checkpoints by dev F1 (``--keep_best_by=val_f1``) and averages them (§6.1). The
dev F1 of the best single checkpoint is the highest of the run's validations on the very trees it is then
scored on, so it reads high by construction; the averaged weights are a new model, scored once. This script
asks which choice does better on trees that took no part in it: it cuts the split's trees into two random
halves, picks the candidate with the highest F1 on one half, scores it on the other, and compares it there
with the average; both ways round, ``--rounds`` random cuts. Each directory of ``--parses`` holds one run's
parses of the split, one tree per line in the split's order (``kt-evaluate-parser --hypotheses``):
``averaged.txt`` and ``ckpt-<step>.txt`` for each kept checkpoint::

    for c in runs/seed3/checkpoints/best/ckpt-*.index; do
      kt-evaluate-parser --model=runs/seed3 --checkpoint=${c%.index} --split=dev --alpha=0.3 \\
        --hypotheses=parses/seed3/$(basename ${c%.index}).txt
    done
    kt-evaluate-parser --model=runs/seed3 --checkpoint=averaged --split=dev --alpha=0.3 \\
        --hypotheses=parses/seed3/averaged.txt

Prints a markdown table (one row per run) and a JSON line.
"""

import json
import random
import statistics
import sys
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from absl import app, flags

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FLAGS = flags.FLAGS


def define_flags():
    """Defined when run as a script only, so that importing the module (its test) defines no flag."""
    flags.DEFINE_list("parses", [], "Directories of one run's parses each: averaged.txt and ckpt-<step>.txt.")
    flags.DEFINE_string("recipe", "ptb_sample", "The recipe whose treebank and split the parses are of.")
    flags.DEFINE_string("split", "dev", "The split the parses are of.")
    flags.DEFINE_string("data_dir", None, "Where the treebank is (default: KT_DATA_DIR, else ../shared/data).")
    flags.DEFINE_integer("rounds", 1000, "Random cuts into two halves (each scored both ways round).")
    flags.DEFINE_integer("seed", 0, "Seed of the cuts.")


Counts = List[Tuple[int, int, int]]  # per tree: (matched, gold, test) labeled brackets


def tree_counts(gold_trees, test_trees) -> Counts:
    """EVALB counts of each tree on its own (``metric.score`` of one pair; trees left empty count nothing)."""
    from keras_transformer.tasks.parsing import metric

    if len(gold_trees) != len(test_trees):
        raise ValueError(f"{len(test_trees)} parses for {len(gold_trees)} gold trees")
    counts = []
    for gold, test in zip(gold_trees, test_trees):
        scores = metric.score([gold], [test])
        counts.append((scores["matched"], scores["gold_brackets"], scores["test_brackets"]))
    return counts


def f1(counts: Counts, trees: Sequence[int]) -> float:
    """Corpus labeled F1 (0-100) of the trees at indices ``trees``, as metric.score sums them."""
    from keras_transformer.tasks.parsing import metric

    return metric.bracket_scores(*(sum(counts[i][j] for i in trees) for j in range(3)))[2]


def split_half(candidates: Dict[str, Counts], average: Counts, rounds: int, seed: int = 0) -> Dict:
    """Pick the best of ``candidates`` on one half, score it and ``average`` on the other.

    Returns {"gain": mean over the 2·rounds cuts of F1(pick) - F1(average) on the held-out half,
    "wins": the share (0-100) of cuts where the pick scored higher, "full": {name: F1 on all trees},
    "average": the average's F1 on all trees}. A tie on the choosing half goes to the later name.
    """
    rng = random.Random(seed)
    trees = list(range(len(average)))
    half = len(trees) // 2
    gains = []
    for _ in range(rounds):
        rng.shuffle(trees)
        for choose, held_out in ((trees[:half], trees[half:]), (trees[half:], trees[:half])):
            pick = max(candidates, key=lambda name: (f1(candidates[name], choose), name))
            gains.append(f1(candidates[pick], held_out) - f1(average, held_out))
    everything = range(len(average))
    return {"gain": statistics.mean(gains), "wins": 100.0 * sum(g > 0 for g in gains) / len(gains),
            "full": {name: f1(c, everything) for name, c in candidates.items()}, "average": f1(average, everything)}


def _step(path: Path) -> int:
    return int(path.stem.split("-")[-1])


def main(argv):
    del argv
    from keras_transformer import recipes
    from keras_transformer.data import corpora
    from keras_transformer.tasks.parsing import treebank, trees

    if not FLAGS.parses:
        raise app.UsageError("--parses: give at least one directory")
    gold = treebank.load(recipes.get(FLAGS.recipe).data, FLAGS.split, corpora.resolve_data_dir(FLAGS.data_dir)).trees

    def read(path: Path) -> Counts:
        return tree_counts(gold, trees.read_trees(path.read_text(), str(path)))

    print("| run | F1 of each kept checkpoint (all trees) | best single | average | held out: best single − "
          "average | best single ahead in |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    results = {}
    for directory in map(Path, FLAGS.parses):
        paths = sorted(directory.glob("ckpt-*.txt"), key=_step)
        if not paths or not (directory / "averaged.txt").exists():
            raise app.UsageError(f"--parses: {directory} needs averaged.txt and ckpt-<step>.txt files")
        result = split_half({f"{_step(p):05d}": read(p) for p in paths}, read(directory / "averaged.txt"),
                            FLAGS.rounds, FLAGS.seed)
        results[directory.name] = result
        each = ", ".join(f"{int(name)}: {value:.2f}" for name, value in result["full"].items())
        print(f"| {directory.name} | {each} | {max(result['full'].values()):.2f} | {result['average']:.2f} | "
              f"{result['gain']:+.2f} | {result['wins']:.0f}% |")
    mean = statistics.mean(r["gain"] for r in results.values())
    print(f"mean over runs, held out: best single − average {mean:+.2f}")
    print(json.dumps({"bench": "checkpoint_choice", "split": FLAGS.split, "rounds": FLAGS.rounds,
                      "mean_gain": mean, "runs": results}, sort_keys=True))


if __name__ == "__main__":
    define_flags()
    app.run(main)
