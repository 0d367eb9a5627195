"""Generated corpora in the layouts the tools read, so that the suite needs no ``../shared/data``.

``write_data_dir(root)`` fills a data directory as ``corpora.resolve_data_dir`` expects one:

    multi30k-task1-en-de/{train,val,test_2016_flickr}.{en,de}.gz   caption-like English and its German
    wmt-newstest-en-de/newstest{2013,2014}.{en,de}                 the same kind of pairs
    ptb-wsj-sample/treebank.zip                                     bracketed trees over such sentences, in the
                                                                    layout of NLTK's WSJ sample (treebank/combined/
                                                                    wsj_NNNN.mrg, 200 files: train, dev and test)

A seeded grammar writes each English caption ("a young man in a red shirt rides a bike on the street .") and
translates it word by word, with German articles agreeing in gender and case, so that a tokenizer has pieces to
merge, a model has one consistent mapping to fit, and the trees are real constituency trees (S, NP, VP, PP) with
POS tags. Every file is the same on every machine: the tests that read it assert exact figures. Nothing here is
the real Multi30k or treebank; the tests that need those are marked ``corpus`` (tests/conftest.py).
"""

from __future__ import annotations

import gzip
import io
import zipfile
from pathlib import Path
from typing import List, Tuple

import numpy as np

# English noun -> (German noun, gender m/f/n). People and animals are subjects; things and places objects.
SUBJECTS = {
    "man": ("Mann", "m"), "woman": ("Frau", "f"), "boy": ("Junge", "m"), "girl": ("Mädchen", "n"),
    "child": ("Kind", "n"), "dog": ("Hund", "m"), "cat": ("Katze", "f"), "horse": ("Pferd", "n"),
    "worker": ("Arbeiter", "m"), "player": ("Spieler", "m"), "musician": ("Musiker", "m"),
    "dancer": ("Tänzerin", "f"), "climber": ("Kletterer", "m"), "cyclist": ("Radfahrer", "m"),
    "teacher": ("Lehrerin", "f"), "baby": ("Baby", "n"), "bird": ("Vogel", "m"), "cow": ("Kuh", "f"),
}
OBJECTS = {
    "ball": ("Ball", "m"), "bike": ("Fahrrad", "n"), "guitar": ("Gitarre", "f"), "book": ("Buch", "n"),
    "hat": ("Hut", "m"), "kite": ("Drachen", "m"), "camera": ("Kamera", "f"), "flag": ("Fahne", "f"),
    "umbrella": ("Regenschirm", "m"), "sandwich": ("Sandwich", "n"), "drum": ("Trommel", "f"),
    "newspaper": ("Zeitung", "f"), "frisbee": ("Frisbee", "n"), "bucket": ("Eimer", "m"),
    "rope": ("Seil", "n"), "picture": ("Bild", "n"), "shovel": ("Schaufel", "f"), "stick": ("Stock", "m"),
}
PLACES = {
    "street": ("Straße", "f"), "beach": ("Strand", "m"), "park": ("Park", "m"), "field": ("Feld", "n"),
    "river": ("Fluss", "m"), "stage": ("Bühne", "f"), "snow": ("Schnee", "m"), "grass": ("Gras", "n"),
    "water": ("Wasser", "n"), "building": ("Gebäude", "n"), "city": ("Stadt", "f"), "mountain": ("Berg", "m"),
    "lake": ("See", "m"), "kitchen": ("Küche", "f"), "market": ("Markt", "m"), "bridge": ("Brücke", "f"),
}
ADJECTIVES = {
    "red": "rot", "blue": "blau", "green": "grün", "black": "schwarz", "white": "weiß", "yellow": "gelb",
    "young": "jung", "old": "alt", "small": "klein", "big": "groß", "happy": "glücklich", "brown": "braun",
}
VERBS = {  # transitive, 3rd person singular
    "holds": "hält", "carries": "trägt", "throws": "wirft", "rides": "fährt", "plays": "spielt",
    "watches": "beobachtet", "catches": "fängt", "pulls": "zieht", "reads": "liest", "paints": "malt",
    "kicks": "tritt", "finds": "findet",
}
PREPOSITIONS = {"on": "auf", "in": "in", "near": "neben", "by": "an", "under": "unter", "behind": "hinter"}
# German articles by (definite, case, gender): nominative subjects, accusative objects, dative places.
ARTICLES = {
    (False, "nom"): {"m": "ein", "f": "eine", "n": "ein"}, (True, "nom"): {"m": "der", "f": "die", "n": "das"},
    (False, "acc"): {"m": "einen", "f": "eine", "n": "ein"}, (True, "acc"): {"m": "den", "f": "die", "n": "das"},
    (False, "dat"): {"m": "einem", "f": "einer", "n": "einem"}, (True, "dat"): {"m": "dem", "f": "der", "n": "dem"},
}
ENDINGS = {  # adjective endings after (definite, case, gender)
    (False, "nom"): {"m": "er", "f": "e", "n": "es"}, (True, "nom"): {"m": "e", "f": "e", "n": "e"},
    (False, "acc"): {"m": "en", "f": "e", "n": "es"}, (True, "acc"): {"m": "en", "f": "e", "n": "e"},
    (False, "dat"): {"m": "en", "f": "en", "n": "en"}, (True, "dat"): {"m": "en", "f": "en", "n": "en"},
}
SPLITS = {"train": 2000, "val": 500, "test_2016_flickr": 200}  # pairs per Multi30k split
TREE_FILES = 199  # wsj_0001 ... wsj_0199: the sample's split reads 1-179 train, 180-189 dev, 190-199 test
TREES_PER_FILE = 4


def _noun_phrase(rng, nouns, case) -> Tuple[tuple, List[str], List[str]]:
    """(tree, English words, German words) of a determiner, an optional adjective and a noun."""
    noun = str(rng.choice(sorted(nouns)))
    german, gender = nouns[noun]
    definite = bool(rng.random() < 0.4)
    adjective = str(rng.choice(sorted(ADJECTIVES))) if rng.random() < 0.5 else None
    determiner = "the" if definite else ("an" if (adjective or noun)[0] in "aeiou" else "a")
    words, german_words, tree = [determiner], [ARTICLES[definite, case][gender]], [("DT", determiner)]
    if adjective:
        words.append(adjective)
        german_words.append(ADJECTIVES[adjective] + ENDINGS[definite, case][gender])
        tree.append(("JJ", adjective))
    words.append(noun)
    german_words.append(german)
    tree.append(("NN", noun))
    return ("NP", *tree), words, german_words


def sentence(rng) -> Tuple[tuple, str, str]:
    """(tree, English sentence, German sentence): NP VP (with an object and maybe a place) and a full stop."""
    subject, english, german = _noun_phrase(rng, SUBJECTS, "nom")
    verb = str(rng.choice(sorted(VERBS)))
    obj, obj_english, obj_german = _noun_phrase(rng, OBJECTS, "acc")
    vp = ["VP", ("VBZ", verb), obj]
    english += [verb] + obj_english
    german += [VERBS[verb]] + obj_german
    if rng.random() < 0.6:
        preposition = str(rng.choice(sorted(PREPOSITIONS)))
        place, place_english, place_german = _noun_phrase(rng, PLACES, "dat")
        vp.append(("PP", ("IN", preposition), place))
        english += [preposition] + place_english
        german += [PREPOSITIONS[preposition]] + place_german
    tree = ("S", subject, tuple(vp), (".", "."))
    german[0] = german[0].capitalize()
    return tree, " ".join(english + ["."]), " ".join(german + ["."])


def pairs(n: int, seed: int) -> Tuple[List[str], List[str]]:
    """n (English, German) caption pairs from the grammar, seeded."""
    rng = np.random.default_rng(seed)
    made = [sentence(rng)[1:] for _ in range(n)]
    return [e for e, _ in made], [g for _, g in made]


def bracketed(tree) -> str:
    """A tree as the Penn Treebank writes it: (S (NP (DT a) (NN man)) ...)."""
    label, *children = tree
    if len(children) == 1 and isinstance(children[0], str):
        return f"({label} {children[0]})"
    return f"({label} {' '.join(bracketed(child) for child in children)})"


def _write_gz(path: Path, lines) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:  # the same bytes each time
        f.write("".join(f"{line}\n" for line in lines).encode("utf-8"))


def write_data_dir(root) -> Path:
    """Writes the generated Multi30k, newstest and treebank-sample files under ``root`` (see the module
    docstring); returns ``root``."""
    root = Path(root)
    for seed, (split, n) in enumerate(SPLITS.items()):
        english, german = pairs(n, seed)
        _write_gz(root / "multi30k-task1-en-de" / f"{split}.en.gz", english)
        _write_gz(root / "multi30k-task1-en-de" / f"{split}.de.gz", german)
    newstest = root / "wmt-newstest-en-de"
    newstest.mkdir(parents=True, exist_ok=True)
    for seed, year in ((10, 2013), (11, 2014)):
        english, german = pairs(50, seed)
        (newstest / f"newstest{year}.en").write_text("".join(f"{x}\n" for x in english), encoding="utf-8")
        (newstest / f"newstest{year}.de").write_text("".join(f"{x}\n" for x in german), encoding="utf-8")
    rng = np.random.default_rng(20)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for number in range(1, TREE_FILES + 1):
            trees = [f"( {bracketed(sentence(rng)[0])} )" for _ in range(TREES_PER_FILE)]
            info = zipfile.ZipInfo(f"treebank/combined/wsj_{number:04d}.mrg", date_time=(1980, 1, 1, 0, 0, 0))
            archive.writestr(info, "\n\n".join(trees) + "\n")
    (root / "ptb-wsj-sample").mkdir(parents=True, exist_ok=True)
    (root / "ptb-wsj-sample" / "treebank.zip").write_bytes(buffer.getvalue())
    return root
