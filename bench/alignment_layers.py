"""Which cross-attention layer aligns words best: a dictionary-derived set of sure links, per layer and head.

    python bench/alignment_layers.py                  # the shipped model, test_2016_flickr (1,000 pairs)
    python bench/alignment_layers.py --num_sentences=200 --heads

No gold word alignment comes with Multi30k, so this builds sure links from a small English-German dictionary of
caption words (``DICTIONARY``): where an English word occurs once in a source and exactly one word of its
reference starts with one of its German stems, the two are a sure link. Each (source, reference) pair is aligned
(``align_lines``, the reference teacher-forced) by each decoder layer's cross-attention, heads averaged (--heads:
each head of each layer too), and scored on the target words the sure links cover:

    recall     the sure links that the alignment holds
    precision  the links of those target words that are sure ones (a word aligned to i and k scores 1/2)
    AER        1 - 2 |A ∩ S| / (|A| + |S|) over those target words (Och & Ney 2003, with P = S)

Prints a table and, last, a JSON line.
"""

from __future__ import annotations

import json
import os
import re
import sys

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = flags.FLAGS


def define_flags():
    """Defined when run as a script only, so that importing the module (its test) defines no flag."""
    flags.DEFINE_string("model", os.path.join(REPO, "saved_models", "multi30k_en_de"),
                        "A SavedModel or a training work directory (artifacts.load_model).")
    flags.DEFINE_string("data_dir", None, "Data directory (default: $KT_DATA_DIR or ../shared/data).")
    flags.DEFINE_string("split", "test_2016_flickr", "Split of the model's corpus to align with its references.")
    flags.DEFINE_integer("num_sentences", 1000, "The split's first N pairs.")
    flags.DEFINE_boolean("heads", False, "Score each head of each layer too.")


# English caption word -> German stems (lower-cased; a German word starting with one matches)
DICTIONARY = {
    "man": ("mann",), "men": ("männer",), "woman": ("frau",), "women": ("frauen",), "dog": ("hund",),
    "dogs": ("hunde",), "boy": ("junge",), "girl": ("mädchen",), "child": ("kind",), "children": ("kinder",),
    "two": ("zwei",), "three": ("drei",), "street": ("straße",), "water": ("wasser",), "beach": ("strand",),
    "ball": ("ball",), "red": ("rot",), "blue": ("blau",), "black": ("schwarz",), "white": ("weiß",),
    "green": ("grün",), "yellow": ("gelb",), "hat": ("hut", "mütze"), "bike": ("fahrrad", "rad"),
    "bicycle": ("fahrrad",), "car": ("auto", "wagen"), "snow": ("schnee",), "grass": ("gras",),
    "people": ("menschen", "leute", "personen"), "young": ("jung",), "little": ("klein",), "small": ("klein",),
    "tree": ("baum",), "guitar": ("gitarre",), "camera": ("kamera",), "building": ("gebäude",), "table": ("tisch",),
    "crowd": ("menge",), "sitting": ("sitz",), "standing": ("steh",), "playing": ("spiel",), "field": ("feld",),
    "stage": ("bühne",), "wall": ("wand", "mauer"), "city": ("stadt",),
}


def _word(text: str) -> str:
    return re.sub(r"[^\w-]", "", text.lower())


def sure_links(source: str, reference: str):
    """{(source word index, reference word index)} from ``DICTIONARY`` (module docstring)."""
    source_words, target_words = [_word(w) for w in source.split()], [_word(w) for w in reference.split()]
    links = set()
    for i, word in enumerate(source_words):
        stems = DICTIONARY.get(word)
        if stems is None or source_words.count(word) != 1:
            continue
        matches = [j for j, target in enumerate(target_words) if target.startswith(stems)]
        if len(matches) == 1:
            links.add((i, matches[0]))
    return links


def score(alignments, gold):
    """recall, precision and AER (module docstring) of Pharaoh strings against sure links, on the linked words."""
    found = proposed = sure = 0
    for pairs, links in zip(alignments, gold):
        covered = {j for _, j in links}
        predicted = {tuple(map(int, p.split("-"))) for p in pairs.split()}
        predicted = {(i, j) for i, j in predicted if j in covered}
        found += len(predicted & links)
        proposed += len(predicted)
        sure += len(links)
    return {"recall": round(found / sure, 4), "precision": round(found / max(proposed, 1), 4),
            "aer": round(1 - 2 * found / (proposed + sure), 4), "sure_links": sure}


def main(argv):
    del argv
    from keras_transformer import artifacts, inference
    from keras_transformer.data import corpora, files
    from keras_transformer.tasks.translation import lines as translation_lines
    from keras_transformer.tasks.translation.module import Translator

    model, recipe, tokenizer = artifacts.load_model(FLAGS.model, data_dir=FLAGS.data_dir)
    source, reference = corpora.split_files(recipe.data, FLAGS.split, corpora.resolve_data_dir(FLAGS.data_dir))
    sources = files.read_text(source)[: FLAGS.num_sentences]
    references = files.read_text(reference)[: len(sources)]
    gold = [sure_links(s, r) for s, r in zip(sources, references)]
    # A fresh translator over the weights: an export written before alignments has no align signature.
    loaded = inference.from_module(Translator(model, tokenizer, recipe), tokenizer, FLAGS.model)
    heads = range(-1, recipe.model.num_heads) if FLAGS.heads else (-1,)
    rows = []
    for layer in range(recipe.model.num_decoder_layers):
        for head in heads:
            alignments = translation_lines.align_lines(loaded, sources, references, layer, head)
            rows.append({"layer": layer, "head": "mean" if head < 0 else head, **score(alignments, gold)})
    print("| layer | head | recall | precision | AER |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['layer']} | {row['head']} | {row['recall']:.3f} | {row['precision']:.3f} | {row['aer']:.3f} |")
    print(json.dumps({"bench": "alignment_layers", "model": FLAGS.model, "split": FLAGS.split,
                      "pairs": len(sources), "pairs_with_links": sum(bool(g) for g in gold), "rows": rows},
                     ensure_ascii=False))


if __name__ == "__main__":
    define_flags()
    app.run(main)
