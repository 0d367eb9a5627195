"""The whole parsing job (§6.3): train -> average checkpoints -> parse the test trees, F1 -> export -> sample parses.

``job.run_job`` hands a corpus-ptb recipe here; the stages are the
same library calls as for translation (``training.train``,
``checkpoints.average_checkpoints``, ``export.export``), with labeled bracket
F1 (EVALB COLLINS.prm through PYEVALB, ``parse_scoring``) where translation
reports BLEU.
"""

from __future__ import annotations

from typing import Optional, Sequence

from keras_transformer import parse_scoring, parsing
from keras_transformer.config import Recipe
from keras_transformer.data import corpora, treebank
from keras_transformer.job import export_averaged, train_and_average, write_metadata

SAMPLE_SENTENCES = (
    "Ms. Haag plays Elianti .",
    "The company said it expects to report a loss for the third quarter .",
    "Two young children are playing soccer on a field .",
)


def run_parse_job(recipe: Recipe, workdir: str, export_dir: str, data_dir: Optional[str] = None,
                  strategy: str = "mirrored", eval_sentences: Optional[int] = None,
                  samples: Sequence[str] = SAMPLE_SENTENCES, log=print, command: Optional[str] = None) -> dict:
    """Runs every stage and returns (and writes next to the export) a metadata dict of what it measured;
    ``command`` (the command line that ran it) is recorded there."""
    data_dir = str(corpora.resolve_data_dir(data_dir))
    averaged, trained = train_and_average(recipe, workdir, data_dir, strategy, log)

    gold = treebank.load(recipe.data, recipe.data.test_split, data_dir).trees
    if eval_sentences:
        gold = gold[:eval_sentences]
    parser = parsing.load_parser(workdir, "averaged", data_dir)
    scores, _ = parsing.evaluate(parser, gold)
    log(f"[3/5] {recipe.data.test_split} ({scores['sentences']} trees, {scores['seconds']:.0f} s): "
        f"{parse_scoring.format_scores(scores)}; {scores['repaired']} outputs repaired")

    export_averaged(workdir, averaged, export_dir, data_dir, log)

    served = parsing.load_parser(export_dir)
    parses = parsing.parse_lines(served, list(samples))
    log("[5/5] parses by the exported model:")
    for sentence, tree in zip(samples, parses.trees):
        log(f"  {sentence}\n    -> {tree}")

    return write_metadata(export_dir, recipe, command, trained, {
        "test_split": recipe.data.test_split,
        "test_sentences": scores["sentences"],
        **{key: round(scores[key], 2) for key in ("precision", "recall", "f1", "exact_match")},
        "repaired": scores["repaired"],
        "scoring": scores["conventions"],
        "decode": {"beam_size": recipe.decode.beam_size, "alpha": recipe.decode.alpha,
                   "extra_length": recipe.decode.extra_length, "constrained": True},
        "samples": dict(zip(samples, parses.trees)),
    })
