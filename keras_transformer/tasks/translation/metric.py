"""Corpus BLEU and chrF with sacrebleu, each with its signature (§6.1 reports BLEU on newstest2014).

    score(hypotheses, references, lowercase_tokenized=False)
        -> {"bleu": float, "chrf": float, "signature": str, "chrf_signature": str, ...}

Two variants:

* default: detokenized, cased output against raw references with sacrebleu's
  defaults (BLEU: ``tokenize="13a"``, smoothing "exp"; chrF: ``char_order=6,
  word_order=0, beta=2``). Comparable across papers through the signature,
  e.g. ``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0``.
* ``lowercase_tokenized=True``: the lower-cased, tokenized BLEU older papers
  report (``multi-bleu.perl`` on Moses-tokenized text, the paper's hyphen
  splitting included): BLEU with ``tokenize="intl", lowercase=True`` (splits all
  Unicode punctuation and symbols except inside numbers, so "Haus-Tür" ->
  "haus - tür"); chrF with ``lowercase=True``. Its signature reads
  ``...|case:lc|eff:no|tok:intl|...``. Numbers are NOT comparable with the
  default variant: say which one you quote.

The same numbers come out of the sacrebleu command line:
``sacrebleu REF -i HYP -m bleu chrf`` (add ``--tokenize intl --lowercase
--chrf-lowercase`` for the second variant).
"""

from __future__ import annotations

from typing import Dict, List, Sequence

from sacrebleu.metrics import BLEU, CHRF

DEFAULT_BLEU = dict(tokenize="13a", lowercase=False)
TOKENIZED_BLEU = dict(tokenize="intl", lowercase=True)


def _metrics(lowercase_tokenized: bool):
    if lowercase_tokenized:
        return BLEU(**TOKENIZED_BLEU), CHRF(lowercase=True)
    return BLEU(**DEFAULT_BLEU), CHRF()


def score(hypotheses: Sequence[str], references: Sequence[str], lowercase_tokenized: bool = False) -> Dict:
    """Corpus BLEU and chrF (0-100) of hypotheses against one reference each (same length, same order).

    Returns {"bleu", "chrf": float; "signature": BLEU's sacrebleu signature; "chrf_signature";
    "bleu_text": sacrebleu's one-line BLEU summary (n-gram precisions, brevity penalty); "num_sentences"}.
    """
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(f"hypotheses: {len(hypotheses)} lines but references have {len(references)}")
    if not references:
        raise ValueError("references: empty; nothing to score")
    bleu, chrf = _metrics(lowercase_tokenized)
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    return {
        "bleu": float(bleu_score.score),
        "chrf": float(chrf_score.score),
        "signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
        "bleu_text": bleu_score.format(signature=str(bleu.get_signature())),
        "num_sentences": len(references),
    }


def format_scores(scores: Dict) -> List[str]:
    """Two lines in sacrebleu's own format, each naming its signature (what a paper should quote):

    BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = 27.31 58.9/33.1/20.8/13.5 (BP = ...)
    chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0 = 55.12
    """
    return [scores["bleu_text"], f"chrF2|{scores['chrf_signature']} = {scores['chrf']:.2f}"]
