"""Translating many lines with a loaded model of any kind (``artifacts.Loaded``), in input order.

    translate_lines(loaded, lines, batch_size=32, beam_size=None, alpha=None, extra_length=None)
        -> (translations [N] list of str, scores [N] float32)
    translate_nbest(loaded, lines, nbest, batch_size=32, ...) -> NBest(translations [N][<=n], scores [N][<=n])
    sample_lines(loaded, lines, num_samples, top_k=0, top_p=1.0, temperature=1.0, seed=0, batch_size=32, ...)
        -> NBest of num_samples draws each, in draw order (``decoding.sampling``)
    check_prefixes(loaded, lines, prefixes, extra_length)   a ValueError naming a prefix too long for its line
    align_lines(loaded, sources, translations, layer=None, head=-1, batch_size=32) -> [N] Pharaoh strings
        each pair's word alignment ("i-j ...", ``alignment``); ``with_alignments`` -> "translation ||| i-j ..."

Each takes ``prefixes=``, a target prefix per line ("" for none): every output of line i starts with prefix i
(``decoding.prefix``; a model's translate_with_prefix / sample_with_prefix). ``translate_lines`` and
``translate_nbest`` take ``constraints=`` instead, a string per line of words or phrases separated by tabs ("" for
none): every output of line i contains each (``decoding.constraints``; translate_with_constraints).
    check_constraints(loaded, lines, constraints, extra_length)   a ValueError naming a line's constraint that has
        no subword, or constraints too long for the line
    format_nbest(NBest, first=0) -> lines "i ||| translation ||| score"
    format_scored(...) -> lines "score<TAB>translation"

A SavedModel, a work directory and a CTranslate2 directory all run through their ``translate_with_options``
function; ``translate_lines`` through its best-only form where the model has one (``Loaded.best``: a
SavedModel's ``serving_default`` when the options are its own), whose search may stop sooner with the same
translations. Lines are translated in batches of similar length (``decoding/lines.py``; a TensorFlow model
gets ``IN_FLIGHT_BATCHES`` of them at a time) and returned in their original order. A line break the model
might emit (a byte piece: newline, or any other character ``str.splitlines`` breaks at) is replaced by a
space, so output line i is always the translation of input line i. A blank input line (empty or
whitespace only) is not translated: its translation is "", scored 0.

Scores are log P(Y|X) / lp(|Y|) with GNMT's lp(n) = ((5 + n) / 6)^α, |Y| counting the subwords and EOS
(``keras_transformer.decoding``); ``kt-score`` gives the same number for a translation it is handed.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from keras_transformer.config import IN_FLIGHT_BATCHES
from keras_transformer.decoding import NEG_INF
from keras_transformer.decoding.lines import is_blank, length_batches, one_line, run_batches
from keras_transformer.tasks.base import resolve_options

EMPTY_SLOT_SCORE = NEG_INF / 2  # an n-best slot scored at or below this is empty (the search scores it NEG_INF)


def translate_lines(loaded, lines: Sequence[str], batch_size: int = 32,
                    beam_size: Optional[int] = None, alpha: Optional[float] = None,
                    extra_length: Optional[int] = None, prefixes: Optional[Sequence[str]] = None,
                    constraints: Optional[Sequence[str]] = None) -> Tuple[List[str], np.ndarray]:
    """Translations and scores of ``lines``, in input order. None options take the recipe's §6.1 values;
    ``prefixes``: a target prefix per line ("" for none) that its translation starts with (``check_prefixes``);
    or ``constraints``: a line's words or phrases, tab-separated, that its translation contains."""
    options = resolve_options(loaded, beam_size, alpha, extra_length)
    translations = [""] * len(lines)  # a blank line's stays "", scored 0 (decoding.lines: never decoded)
    scores = np.zeros([len(lines)], np.float32)
    fn, aligned = _guided(loaded, lines, options[2], loaded.best or loaded.fn, prefixes, constraints)
    for batch, out in run_batches(fn, lines, batch_size, options, _in_flight(loaded), aligned):
        for i, text, score in zip(batch, out["translations"].numpy(), out["scores"].numpy()):
            translations[i] = one_line(text)
            scores[i] = score
    return translations, scores


class NBest(NamedTuple):
    translations: List[List[str]]  # [N][<= n]: the n best hypotheses of each input line, best first
    scores: List[List[float]]  # [N][<= n]: their scores log P(Y|X) / lp(|Y|), descending


def translate_nbest(loaded, lines: Sequence[str], nbest: int, batch_size: int = 32,
                    beam_size: Optional[int] = None, alpha: Optional[float] = None,
                    extra_length: Optional[int] = None, prefixes: Optional[Sequence[str]] = None,
                    constraints: Optional[Sequence[str]] = None) -> NBest:
    """The ``nbest`` best hypotheses of each line and their scores, in input order, best first.

    The beam search keeps the K = ``beam_size`` best finished hypotheses of each input, so 1 <= nbest <= K
    (a ValueError naming ``nbest`` otherwise). A score is log P(Y|X) / lp(|Y|), lp(n) = ((5 + n) / 6)^α
    (GNMT), |Y| counting the subwords and EOS; ``kt-score`` computes the same number for a given translation.
    An empty n-best slot (a search that stopped with fewer than K finished hypotheses returns an empty string
    scored NEG_INF = -1e9 there) is left out, so a line may get fewer than ``nbest`` hypotheses; a real
    empty translation (EOS first) has a finite score and is kept. A blank line gets one hypothesis, "" scored 0,
    without being decoded. None options take the recipe's §6.1 values; ``prefixes`` and ``constraints`` as
    ``translate_lines``'.
    """
    options = resolve_options(loaded, beam_size, alpha, extra_length)
    if not 1 <= nbest <= options[0]:
        raise ValueError(f"nbest: must be between 1 and the beam size K = {options[0]}, got {nbest}")
    fn, aligned = _guided(loaded, lines, options[2], loaded.fn, prefixes, constraints)
    return _nbest_lines(loaded, fn, lines, nbest, batch_size, options, aligned)


def sample_lines(loaded, lines: Sequence[str], num_samples: int, top_k: int = 0, top_p: float = 1.0,
                 temperature: float = 1.0, seed: int = 0, batch_size: int = 32, alpha: Optional[float] = None,
                 extra_length: Optional[int] = None, prefixes: Optional[Sequence[str]] = None) -> NBest:
    """``num_samples`` translations of each line drawn from the model (``decoding.sampling``: top_k, the nucleus
    top_p, the temperature), in draw order, scored log P(Y|X) / lp(|Y|); the same seed, lines and batch size give
    the same draws. A ValueError where ``loaded`` cannot sample (a CTranslate2 directory, an export written before
    its ``sample_with_options`` signature). None options take the recipe's; ``prefixes`` as ``translate_lines``'."""
    if loaded.sample is None:
        raise ValueError(f"sampling: {loaded.description} has no sample_with_options signature (exported before "
                         "sampling, or not a TensorFlow translator); re-export it with kt-export")
    _, alpha, extra_length = resolve_options(loaded, None, alpha, extra_length)
    sampling = (tf.constant(top_k, tf.int32), tf.constant(top_p, tf.float32), tf.constant(temperature, tf.float32),
                tf.constant(seed, tf.int32))

    def sample(inputs, k, alpha, extra_length):
        return loaded.sample(inputs, k, *sampling, alpha, extra_length)

    def sample_prefixed(inputs, prefix, k, alpha, extra_length):
        return loaded.sample_prefixed(inputs, prefix, k, *sampling, alpha, extra_length)

    if prefixes is not None:
        _prefixed(loaded, lines, prefixes, extra_length, "sample_prefixed")
    return _nbest_lines(loaded, sample if prefixes is None else sample_prefixed, lines, num_samples, batch_size,
                        (num_samples, alpha, extra_length), prefixes)


def check_prefixes(loaded, lines: Sequence[str], prefixes: Sequence[str], extra_length: int,
                   first_line: int = 1) -> None:
    """A ValueError naming the first line (numbered from ``first_line``) whose target prefix leaves its search no
    token: a prefix must have fewer subwords than the line's output may hold (source subwords + EOS +
    extra_length, at most the model's max_length; ``decoding.prefix``). Blank lines are not decoded."""
    if len(prefixes) != len(lines):
        raise ValueError(f"target_prefix: {len(prefixes)} prefixes for {len(lines)} lines; one per line")
    limit = (loaded.recipe or loaded.owner.recipe).model.max_length  # a CTranslate2 engine (owner) keeps its own
    for i, (line, source, target) in enumerate(zip(lines, loaded.source_pieces(lines),
                                                   loaded.target_pieces(prefixes))):
        most = min(min(source, loaded.max_source_pieces) + 1 + extra_length, limit)
        if not is_blank(line) and target >= most:
            raise ValueError(f"target_prefix: line {first_line + i}: {target} subwords, but its output may hold "
                             f"{most} (source subwords + EOS + extra_length {extra_length}, at most {limit}) and the "
                             "search must choose at least one")


def constraint_phrases(constraints: str) -> List[str]:
    """A line's constraints, "phrase<TAB>phrase ...", as a list; blank ones dropped (as the signature does)."""
    return [phrase for phrase in constraints.split("\t") if not is_blank(phrase)]


def check_constraints(loaded, lines: Sequence[str], constraints: Sequence[str], extra_length: int,
                      first_line: int = 1) -> None:
    """A ValueError naming the first line (numbered from ``first_line``) with a constraint that tokenizes to no
    subword, or whose constraints' subwords and EOS do not fit in its output (source subwords + EOS + extra_length,
    at most the model's max_length; ``decoding.constraints``). Blank lines are not decoded."""
    if len(constraints) != len(lines):
        raise ValueError(f"constraints: {len(constraints)} lines of constraints for {len(lines)} lines; one per line")
    limit = loaded.recipe.model.max_length
    for i, (line, source, text) in enumerate(zip(lines, loaded.source_pieces(lines), constraints)):
        phrases = constraint_phrases(text)
        if is_blank(line) or not phrases:
            continue
        counts = loaded.target_pieces(phrases)
        empty = [p for p, n in zip(phrases, counts) if n == 0]
        if empty:
            raise ValueError(f"constraints: line {first_line + i}: {empty[0]!r} tokenizes to no subword")
        most = min(min(source, loaded.max_source_pieces) + 1 + extra_length, limit)
        if sum(counts) + 1 > most:
            raise ValueError(f"constraints: line {first_line + i}: {sum(counts)} subwords and EOS, but its output may "
                             f"hold {most} (source subwords + EOS + extra_length {extra_length}, at most {limit})")


def default_alignment_layer(loaded) -> int:
    """The decoder layer an alignment reads by default: the penultimate (Garg et al., 2019), or the only one."""
    return -min(2, loaded.recipe.model.num_decoder_layers)


def alignment_problem(loaded, layer: int, head: int) -> Optional[str]:
    """Why ``loaded`` cannot align with this layer and head (None: it can)."""
    if loaded.align is None:
        return (f"{loaded.description} has no align signature (a CTranslate2 directory, a parser, an ensemble, or "
                "an export written before alignments: re-export it with kt-export)")
    layers, heads = loaded.recipe.model.num_decoder_layers, loaded.recipe.model.num_heads
    if not -layers <= layer < layers:
        return f"alignment_layer: must be a decoder layer in [-{layers}, {layers}), got {layer}"
    if not -1 <= head < heads:
        return f"alignment_head: must be a head in [0, {heads}) or -1 (the heads averaged), got {head}"
    return None


def align_lines(loaded, sources: Sequence[str], translations: Sequence[str], layer: Optional[int] = None,
                head: int = -1, batch_size: int = 32) -> List[str]:
    """The word alignment of each (source, translation) pair as a Pharaoh string "i-j ..." (source word i, target
    word j; ``alignment``), in input order: the translation teacher-forced, one decoder layer's cross-attention
    read (None: ``default_alignment_layer``), its heads averaged (``head`` -1) or one. A blank source gets "".
    A ValueError (``alignment_problem``) where ``loaded`` cannot."""
    layer = default_alignment_layer(loaded) if layer is None else layer
    problem = alignment_problem(loaded, layer, head)
    if problem:
        raise ValueError(problem)
    alignments = [""] * len(sources)
    options = (tf.constant(layer, tf.int32), tf.constant(head, tf.int32))
    for batch in length_batches(sources, batch_size):
        out = loaded.align(tf.constant([sources[i] for i in batch]), tf.constant([translations[i] for i in batch]),
                           *options)
        for i, text in zip(batch, out["alignment"].numpy()):
            alignments[i] = text.decode()
    return alignments


def with_alignments(translations: Sequence[str], alignments: Sequence[str]) -> List[str]:
    """Marian's --alignment layout: "translation ||| i-j ..." per line."""
    return [f"{text} ||| {pairs}" for text, pairs in zip(translations, alignments)]


def _guided(loaded, lines, extra_length, default, prefixes=None, constraints=None):
    """(the function that decodes ``lines``, the string per line it takes after them or None): ``default``, or
    ``loaded``'s with a target prefix or constraints once they are checked (a ValueError where it has none)."""
    if prefixes is not None and constraints is not None:
        raise ValueError("constraints: not with a target_prefix")
    if prefixes is not None:
        return _prefixed(loaded, lines, prefixes, extra_length), prefixes
    if constraints is None:
        return default, None
    if loaded.constrained is None:
        raise ValueError(f"constraints: {loaded.description} has no translate_with_constraints signature (a "
                         "CTranslate2 directory, a parser, an ensemble, or an export written before constraints); "
                         "re-export it with kt-export")
    check_constraints(loaded, lines, constraints, extra_length)
    return loaded.constrained, constraints


def _prefixed(loaded, lines, prefixes, extra_length, field: str = "prefixed"):
    """``loaded``'s function with a target prefix (``field``: "prefixed" or "sample_prefixed") once the prefixes
    are checked; a ValueError where it has none."""
    fn = getattr(loaded, field)
    if fn is None:
        raise ValueError(f"target_prefix: {loaded.description} has no translate_with_prefix signature (a CTranslate2 "
                         "directory, a parser, or an export written before target prefixes); re-export it with "
                         "kt-export")
    check_prefixes(loaded, lines, prefixes, extra_length)
    return fn


def _nbest_lines(loaded, fn, lines, nbest, batch_size, options, aligned=None) -> NBest:
    """``fn``'s first ``nbest`` n-best slots of each line (empty ones left out), in input order."""
    blank = [is_blank(line) for line in lines]  # a blank line: "" scored 0, never decoded
    translations: List[List[str]] = [[""] if b else [] for b in blank]
    scores: List[List[float]] = [[0.0] if b else [] for b in blank]
    for batch, out in run_batches(fn, lines, batch_size, options, _in_flight(loaded), aligned):
        texts = out["nbest_translations"].numpy()[:, :nbest]  # [B, n]
        values = out["nbest_scores"].numpy()[:, :nbest]  # [B, n]
        for i, row_texts, row_scores in zip(batch, texts, values):
            kept = [(one_line(t), float(v)) for t, v in zip(row_texts, row_scores) if v > EMPTY_SLOT_SCORE]
            translations[i], scores[i] = [t for t, _ in kept], [v for _, v in kept]
    return NBest(translations, scores)


def _in_flight(loaded) -> int:
    """Batches decoded at once: IN_FLIGHT_BATCHES for a TensorFlow model, 1 for a CTranslate2 directory (its own
    translator replicas share a batch)."""
    return 1 if loaded.recipe is None else IN_FLIGHT_BATCHES


def format_nbest(result: NBest, first: int = 0) -> List[str]:
    """The Moses/Marian n-best format: ``i ||| translation ||| score`` per hypothesis, i the 0-based input line
    (counted from ``first``), the hypotheses of a line together and best first; scores with 6 decimals."""
    return [f"{i} ||| {text} ||| {score:.6f}"
            for i, (texts, scores) in enumerate(zip(result.translations, result.scores), start=first)
            for text, score in zip(texts, scores)]


def format_scored(translations: Sequence[str], scores: Sequence[float]) -> List[str]:
    """``score<TAB>translation`` per line (kt-translate --with_scores); scores with 6 decimals."""
    return [f"{float(score):.6f}\t{text}" for text, score in zip(translations, scores)]
