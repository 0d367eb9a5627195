"""Terminology constraints taken from the references: does every output hold them, and what do they do to BLEU?

    python bench/constraint_bleu.py                          # the shipped model, first 200 test_2016_flickr pairs
    python bench/constraint_bleu.py --num_constraints=2 --beam_sizes=4,10

Each sentence gets ``--num_constraints`` words of its reference as constraints (drawn with ``--seed`` among the
reference's words of 4 letters or more, punctuation stripped; the usual simulated-terminology setting of Hokamp &
Liu 2017 and Post & Vilar 2018). Each beam size translates the sentences unconstrained and constrained
(``translate_with_constraints`` of a fresh translator over the model's weights: an export written before
constraints has no such signature), and the outputs are scored with cased sacreBLEU against the references.
Prints a table and, last, a JSON line.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import time

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = flags.FLAGS


def define_flags():
    """Defined when run as a script only, so that importing the module (its test) defines no flag."""
    flags.DEFINE_string("model", os.path.join(REPO, "saved_models", "multi30k_en_de"),
                        "A SavedModel or a training work directory (artifacts.load_model).")
    flags.DEFINE_string("data_dir", None, "Data directory (default: $KT_DATA_DIR or ../shared/data).")
    flags.DEFINE_string("split", "test_2016_flickr", "Split of the model's corpus to translate.")
    flags.DEFINE_integer("num_sentences", 200, "The split's first N pairs.")
    flags.DEFINE_integer("num_constraints", 1, "Reference words given as constraints per sentence.")
    flags.DEFINE_integer("seed", 0, "Seed of the words drawn.")
    flags.DEFINE_list("beam_sizes", ["4"], "Beam sizes, each run unconstrained and constrained.")
    flags.DEFINE_integer("batch_size", 32, "Sentences per call.")


def reference_words(reference: str, count: int, rng: random.Random):
    """``count`` distinct words of ``reference`` with 4 letters or more, punctuation stripped, in reference order."""
    words = list(dict.fromkeys(w for w in (re.sub(r"^\W+|\W+$", "", t) for t in reference.split()) if len(w) >= 4))
    picked = set(rng.sample(words, min(count, len(words))))
    return [w for w in words if w in picked]


def holds(output: str, phrases) -> bool:
    return all(p in output for p in phrases)


def main(argv):
    del argv
    from keras_transformer import artifacts, inference
    from keras_transformer.data import corpora, files
    from keras_transformer.tasks.translation import lines as translation_lines, metric
    from keras_transformer.tasks.translation.module import Translator

    model, recipe, tokenizer = artifacts.load_model(FLAGS.model, data_dir=FLAGS.data_dir)
    source, reference = corpora.split_files(recipe.data, FLAGS.split, corpora.resolve_data_dir(FLAGS.data_dir))
    lines = files.read_text(source)[: FLAGS.num_sentences]
    references = files.read_text(reference)[: len(lines)]
    rng = random.Random(FLAGS.seed)
    phrases = [reference_words(r, FLAGS.num_constraints, rng) for r in references]
    constraints = ["\t".join(p) for p in phrases]
    loaded = inference.from_module(Translator(model, tokenizer, recipe), tokenizer, FLAGS.model)

    rows = []
    for beam_size in (int(b) for b in FLAGS.beam_sizes):
        for name, given in (("unconstrained", None), ("constrained", constraints)):
            options = {"beam_size": beam_size, "batch_size": FLAGS.batch_size}
            warm = None if given is None else given[:2]
            translation_lines.translate_lines(loaded, lines[:2], constraints=warm, **options)  # traced before timing
            options["constraints"] = given
            start = time.perf_counter()
            outputs, _ = translation_lines.translate_lines(loaded, lines, **options)
            seconds = time.perf_counter() - start
            bleu = metric.score(outputs, references)
            rows.append({"beam_size": beam_size, "search": name, "bleu": round(bleu["bleu"], 2),
                         "chrf": round(bleu["chrf"], 2), "hold_all": sum(holds(o, p) for o, p in zip(outputs, phrases)),
                         "seconds": round(seconds, 1)})
    print(f"{len(lines)} sentences of {FLAGS.split}, {sum(map(len, phrases))} constraint words in all")
    print("| beam | search | BLEU | chrF | outputs holding every constraint | seconds |")
    print("|---|---|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['beam_size']} | {row['search']} | {row['bleu']:.2f} | {row['chrf']:.2f} | "
              f"{row['hold_all']} / {len(lines)} | {row['seconds']:.1f} |")
    print(json.dumps({"bench": "constraint_bleu", "model": FLAGS.model, "split": FLAGS.split, "sentences": len(lines),
                      "num_constraints": FLAGS.num_constraints, "seed": FLAGS.seed, "rows": rows},
                     ensure_ascii=False))


if __name__ == "__main__":
    define_flags()
    app.run(main)
