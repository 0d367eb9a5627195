"""Target prefixes against CTranslate2's ``target_prefix``: the same weights, α = 0, so that both rank by log P alone.

    python bench/prefix_agreement.py                        # the shipped model, the first 200 test_2016_flickr lines
    python bench/prefix_agreement.py --prefix_words=3 --num_sentences=500

Each sentence's prefix is the first --prefix_words words of its reference. Ours (the translator's
translate_with_prefix over the model's weights: beam 4, α = 0, at most source + 50 tokens) and CTranslate2's own
beam search with target_prefix on a CTranslate2 conversion of the same weights (beam 4, length_penalty 0, the
same limit) translate every line. The best hypotheses are compared; where they differ, both are scored by forced
decoding (``scoring.score_lines``, kt-score's, α = 0: log P): the search whose hypothesis has the higher log P
found the better one. Every one of our scores is checked against kt-score's forced-decoding score of its text
(the prefix's tokens included; kt-score re-tokenizes the text, so a hypothesis whose subwords are not
SentencePiece's own segmentation of it scores differently: ``kt_score_differs`` lists them); CTranslate2's scores
leave the prefix out (``prefix_log_p_gap_median``, ours less theirs on the lines both translate alike).

Prints a table and, last, a JSON line. Needs ctranslate2 (the [bench] extra).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
flags.DEFINE_string("model", os.path.join(REPO, "saved_models", "multi30k_en_de"),
                    "A SavedModel or a training work directory (artifacts.load_model).")
flags.DEFINE_string("data_dir", None, "Data directory (default: $KT_DATA_DIR or ../shared/data).")
flags.DEFINE_string("split", "test_2016_flickr", "Split of the model's corpus to translate.")
flags.DEFINE_integer("num_sentences", 200, "The split's first N sentences.")
flags.DEFINE_integer("prefix_words", 2, "Words of each reference given as its prefix.")
flags.DEFINE_integer("beam_size", 4, "Beam size of both searches.")
flags.DEFINE_integer("extra_length", 50, "Max output length = source length + this, in both.")
flags.DEFINE_integer("batch_size", 32, "Sentences per call, in both.")
FLAGS = flags.FLAGS


def compare(ours, theirs, ours_forced, theirs_forced):
    """The comparison's figures from the two best texts per line and their forced log P (the same order)."""
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    return {"same_best": len(ours) - len(differ), "different": len(differ),
            "ours_higher_log_p": sum(ours_forced[i] > theirs_forced[i] + 1e-4 for i in differ),
            "ctranslate2_higher_log_p": sum(theirs_forced[i] > ours_forced[i] + 1e-4 for i in differ),
            "equal_log_p": sum(abs(ours_forced[i] - theirs_forced[i]) <= 1e-4 for i in differ),
            "differences": [{"line": i, "ours": ours[i], "ctranslate2": theirs[i],
                             "ours_log_p": round(float(ours_forced[i]), 4),
                             "ctranslate2_log_p": round(float(theirs_forced[i]), 4)} for i in differ]}


def main(argv):
    del argv
    import numpy as np

    from keras_transformer import artifacts, inference, scoring
    from keras_transformer.data import corpora, files
    from keras_transformer.engines import ctranslate2_convert
    from keras_transformer.tasks.translation import lines as translation_lines
    from keras_transformer.tasks.translation.module import Translator

    model, recipe, tokenizer = artifacts.load_model(FLAGS.model, data_dir=FLAGS.data_dir)
    source, reference = corpora.split_files(recipe.data, FLAGS.split, corpora.resolve_data_dir(FLAGS.data_dir))
    lines = files.read_text(source)[: FLAGS.num_sentences]
    prefixes = [" ".join(r.split()[: FLAGS.prefix_words]) for r in files.read_text(reference)[: len(lines)]]
    options = {"beam_size": FLAGS.beam_size, "alpha": 0.0, "extra_length": FLAGS.extra_length,
               "batch_size": FLAGS.batch_size, "prefixes": prefixes}

    # A fresh translator over the weights: an export written before target prefixes has no such signature.
    ours_loaded = inference.from_module(Translator(model, tokenizer, recipe), tokenizer, FLAGS.model)
    ours, our_scores = translation_lines.translate_lines(ours_loaded, lines, **options)
    workdir = tempfile.mkdtemp(prefix="prefix_agreement_")
    try:
        converted = ctranslate2_convert.convert(model, tokenizer, recipe, os.path.join(workdir, "ct2"))
        theirs, their_scores = translation_lines.translate_lines(inference.load(converted), lines, **options)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    forced = scoring.score_lines(model, recipe, tokenizer, lines + lines, ours + theirs, alpha=0.0,
                                 batch_size=FLAGS.batch_size).log_probs
    ours_forced, theirs_forced = forced[: len(lines)], forced[len(lines):]
    same = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a == b]
    result = {"bench": "prefix_agreement", "model": FLAGS.model, "split": FLAGS.split, "sentences": len(lines),
              "prefix_words": FLAGS.prefix_words, "beam_size": FLAGS.beam_size, "alpha": 0.0,
              "all_start_with_prefix": all(t.startswith(p) for t, p in zip(ours + theirs, prefixes + prefixes)),
              "kt_score_agrees": int(np.sum(np.abs(our_scores - ours_forced) <= 1e-3)),
              "kt_score_differs": [{"line": i, "ours": ours[i], "score": round(float(our_scores[i]), 4),
                                    "kt_score": round(float(ours_forced[i]), 4)}
                                   for i in np.flatnonzero(np.abs(our_scores - ours_forced) > 1e-3).tolist()],
              **compare(ours, theirs, ours_forced, theirs_forced)}
    # CTranslate2 scores the continuation alone: ours less its score is the prefix's log P, on the lines alike.
    gap = [our_scores[i] - their_scores[i] for i in same]
    result["prefix_log_p_gap_median"] = round(float(np.median(gap)), 4) if gap else None
    print("| sentences | same best | differ | ours higher log P | CTranslate2 higher | equal log P | "
          "score = kt-score's (1e-3) |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {result['sentences']} | {result['same_best']} | {result['different']} | {result['ours_higher_log_p']} | "
          f"{result['ctranslate2_higher_log_p']} | {result['equal_log_p']} | {result['kt_score_agrees']} |")
    print(json.dumps(result, ensure_ascii=False))


if __name__ == "__main__":
    app.run(main)
