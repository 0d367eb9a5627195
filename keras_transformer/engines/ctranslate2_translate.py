"""Translating with a CTranslate2 directory (``kt-export --format=ctranslate2``) as our SavedModel translator does.

    load(model_dir, device="cpu", compute_type="default", intra_threads=0, search="native") -> CTranslate2Translator
    CTranslate2Translator.translate(texts, beam_size=None, alpha=None, extra_length=None, prefixes=None)
        -> {"translations" [B], "scores" [B], "nbest_translations" [B, K], "nbest_scores" [B, K]} (numpy)
    gnmt_rerank(hypotheses, eos, max_length, beam_size, alpha) -> [(tokens, score)] best first

Same inputs and outputs as ``tasks.translation.module.Translator``: a source is its SentencePiece
pieces + EOS, cut to ``max_source_length - 1`` pieces + EOS; an empty input is
the source [EOS]; item b may emit up to (its source tokens + extra_length)
tokens, EOS included, at most ``recipe.model.max_length``; PAD and BOS are
never emitted. Two searches (``SEARCHES``):

``native`` (the default): CTranslate2's own beam search at its own speed. It
ranks by log P(Y|X) / |Y|^α (fairseq's and Marian's length normalisation) and
stops an item once K hypotheses have finished; α is CTranslate2's
``length_penalty``, by default the one ``kt-export`` chose on the eval split
(INFO's decode.length_penalty). PAD and BOS are suppressed before its
log-softmax; EOS is not allowed first (its ``min_decoding_length`` 1). A
batch is searched to its longest maximum length; an item with a hypothesis
longer than its own is searched again to exactly its own (rare: grouped by
length). Scores are CTranslate2's.

``gnmt``: exactly our search's outputs and scores (GNMT, §6.1), at a fraction
of CTranslate2's speed (it searches to fixed lengths and rescores):

    score(Y) = log P(Y|X) / ((5 + |Y|) / 6)^α       |Y| counting EOS

CTranslate2's own beam search ranks by log P(Y|X) / |Y|^length_penalty and
stops once K·patience hypotheses have finished. It is driven to return what
ours returns instead:

- Its beam holds the same K alive hypotheses as ours, whatever the length
  penalty: the best K expansions not ending in EOS among the top 2K; an EOS
  expansion finishes only from the top K.
- A search to ``length`` tokens with patience = length + 1 never stops early
  and, asked for num_hypotheses = K·patience, returns every hypothesis that
  finished plus the K candidates of its last step. Each is rescored with our
  formula (log P recovered as CTranslate2's score × |Y| under
  length_penalty = 1; ``gnmt_rerank``) and the K best finished ones are kept.
- Ours stops an item once K hypotheses finished and no alive beam can beat the
  worst of them (log P_alive / lp(max_length) bounds every extension). The
  same rule, checked after a search to ``length`` (``_settled``), tells
  whether a longer search could change the K best. A batch is searched to
  the longest of its sentences' 1.5 S + 4 tokens (S source tokens, EOS
  included) and the unsettled sentences again to twice that, at most their
  maximum length.
- The maximum output length is per sentence in ours (its source tokens +
  extra_length, at most model.max_length), per call in CTranslate2
  (``max_decoding_length``). A sentence searched past its own maximum M keeps
  its hypotheses of at most M tokens: the search up to M does not depend on
  what follows, and hypotheses are registered as they finish. Only if none of
  them finished does it need the alive beams at M (ours' fallback, scored at
  lp(M)); it is then searched again to exactly M, in one call per M. An item
  that reaches M with fewer than K finished has empty slots ("", -1e9) after
  them, as in ours.
- Ours bans PAD and BOS after its log-softmax; CTranslate2 can suppress tokens
  only before it, renormalising over the other V - 2 (log-probabilities higher
  than ours by -log(1 - p(PAD) - p(BOS)), up to 3.3e-5 per token for the
  shipped model). So a search runs with every token allowed, which gives our
  log-probabilities exactly, and an item whose hypotheses contain PAD or BOS
  is searched again with the two suppressed. A trained model gives them next
  to no probability: on test_2016_flickr no item needs the second search. (A
  hypothesis through PAD or BOS that is dropped before the end goes unseen; it
  needs them among an item's 2K best expansions.)
- CTranslate2 forbids EOS at the first step unless min_decoding_length is 0,
  which it is: ours may translate to EOS alone.
- Beam size 1 is CTranslate2's greedy search, which stops at its first EOS;
  ours (a beam of one) may go on to a better-scoring longer output when
  α > 0. With α = 0 both are greedy decoding.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from keras_transformer import BOS_ID, EOS_ID, PAD_ID
from keras_transformer.config import Recipe
from keras_transformer.decoding import NEG_INF
from keras_transformer.decoding.lines import is_blank
from keras_transformer.engines import INFO, SENTENCEPIECE, SOURCE_EOS, import_ctranslate2, is_ctranslate2_model


SEARCHES = ("native", "gnmt")  # CTranslate2's own search (the default), or ours reproduced exactly
LENGTH_PENALTY_GRID = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.5)  # kt-export chooses the native α among these
DEFAULT_LENGTH_PENALTY = 1.0  # CTranslate2's own, for a directory that stores none (written by convert() alone)


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """lp(Y) = ((5 + |Y|) / 6)^α (Wu et al., 2016), as ``decoding.length_penalty``."""
    return ((5.0 + length) / 6.0) ** alpha


def gnmt_rerank(hypotheses: Sequence[Tuple[List[str], float]], eos: str, max_length: int, beam_size: int,
                alpha: float) -> List[Tuple[List[str], float]]:
    """The K best of ``hypotheses`` [(tokens, log P)] under our score, best first.

    Tokens end with ``eos`` where the hypothesis finished; if any did, only those count (|Y| counts EOS);
    otherwise the unfinished ones count, at ``max_length`` tokens (ours scores alive beams at their maximum
    length). Ties keep the given order.
    """
    finished = [(t, lp) for t, lp in hypotheses if t and t[-1] == eos]
    if finished:
        scored = [(t, lp / gnmt_length_penalty(len(t), alpha)) for t, lp in finished]
    else:
        scored = [(t, lp / gnmt_length_penalty(max_length, alpha)) for t, lp in hypotheses]
    order = sorted(range(len(scored)), key=lambda i: -scored[i][1])
    return [scored[i] for i in order[:beam_size]]


def _settled(hypotheses, best, eos: str, length: int, max_length: int, beam_size: int, alpha: float) -> bool:
    """True when a longer search would return ``best`` too: ours' stopping rule (beam_search.py), checked after.

    hypotheses: every [(tokens, log P)] of a search run to ``length`` tokens; best: their ``gnmt_rerank``.
    Settled once K hypotheses finished and the worst of the K best beats every later one: log P only falls
    and lp only grows, so a later hypothesis scores at most log P(best candidate at the last step) /
    lp(max_length), and that candidate is the best of those ``length`` tokens long.
    """
    if len(best) < beam_size or best[-1][0][-1:] != [eos]:
        return False  # fewer than K finished
    top = max(log_p for tokens, log_p in hypotheses if len(tokens) == length)
    return best[-1][1] > top / gnmt_length_penalty(max_length, alpha)


def _available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class CTranslate2Translator:
    """Text in, text out over a CTranslate2 directory; ``translate`` mirrors ``tasks.translation.module.Translator``."""

    def __init__(self, model_dir, device: str = "cpu", compute_type: str = "default", intra_threads: int = 0,
                 search: str = "native", inter_threads: int = 1):
        if search not in SEARCHES:
            raise ValueError(f"search: expected one of {', '.join(SEARCHES)}, got {search!r}")
        ctranslate2 = import_ctranslate2()
        import sentencepiece as spm

        model_dir = Path(model_dir)
        if not is_ctranslate2_model(model_dir):
            raise FileNotFoundError(f"{model_dir}: no CTranslate2 model.bin")
        info_path = model_dir / INFO
        if not info_path.is_file():
            raise FileNotFoundError(f"{info_path}: not found; was {model_dir} written by kt-export "
                                    "--format=ctranslate2?")
        self.info = json.loads(info_path.read_text(encoding="utf-8"))
        self.recipe = Recipe.from_dict(self.info["recipe"])
        self.max_source_length = int(self.info["max_source_length"])
        self.search = search
        d = self.info["decode"]
        alpha = float(d.get("length_penalty", DEFAULT_LENGTH_PENALTY)) if search == "native" else float(d["alpha"])
        self.defaults = (int(d["beam_size"]), alpha, int(d["extra_length"]))
        self.description = (f"{model_dir} (CTranslate2 {ctranslate2.__version__}, {self.info['quantization']}, "
                            f"{search} search)")
        shared = self.info.get("tokenizer", SENTENCEPIECE)  # or one per language (ctranslate2_convert.describe)
        self._source_sp, self._target_sp = (
            spm.SentencePieceProcessor(model_file=str(model_dir / self.info.get(f"{side}_tokenizer", shared)))
            for side in ("source", "target"))
        self._eos = self._target_sp.id_to_piece(EOS_ID)
        self._banned = {self._target_sp.id_to_piece(i) for i in (PAD_ID, BOS_ID)}  # never emitted, as in ours
        self._suppressed = [[token] for token in sorted(self._banned)]
        threads = intra_threads or min(4, _available_cores())
        self._translator = ctranslate2.Translator(str(model_dir), device=device, compute_type=compute_type,
                                                  intra_threads=threads, inter_threads=inter_threads)
        self._replicas = inter_threads

    def encode(self, texts: Sequence[str]) -> List[List[str]]:
        """[B] texts -> [B] sources: pieces + EOS (spelled SOURCE_EOS), at most max_source_length tokens, cut as
        ``serving.checks.truncate_source`` cuts them."""
        keep = self.max_source_length - 1
        return [self._source_sp.encode(text, out_type=str)[:keep] + [SOURCE_EOS] for text in texts]

    def source_pieces(self, texts: Sequence[str]) -> List[int]:
        """How many subwords each text tokenizes to (no EOS), before ``encode`` cuts them."""
        return [len(pieces) for pieces in self._source_sp.encode(list(texts))]

    def _detokenize(self, tokens: List[str]) -> str:
        ids = [self._target_sp.piece_to_id(t) for t in tokens]
        if EOS_ID in ids:
            ids = ids[:ids.index(EOS_ID)]
        return self._target_sp.decode([i for i in ids if i not in (PAD_ID, BOS_ID)])

    def _decode(self, sources: List[List[str]], beam_size: int, length: int) -> List[List[Tuple[List[str], float]]]:
        """Every hypothesis [(tokens, log P)] of a beam search run to ``length`` tokens (no early stop).

        Decoded with every token allowed (CTranslate2's log-probabilities are then ours); a source whose
        hypotheses hold PAD or BOS is decoded again with the two suppressed.
        """
        out = self._translate_batch(sources, beam_size, length, suppress=False)
        again = [i for i, hypotheses in enumerate(out) if any(self._banned & set(t) for t, _ in hypotheses)]
        if again:
            for i, hypotheses in zip(again, self._translate_batch([sources[i] for i in again], beam_size, length,
                                                                  suppress=True)):
                out[i] = hypotheses
        return out

    def _translate_batch(self, sources, beam_size: int, length: int, suppress: bool):
        # K * patience exceeds the hypotheses that can finish, so no item stops before `length` (K = 1 is greedy
        # search, which returns its one hypothesis at its first EOS). min_decoding_length 0: EOS may come first.
        patience = length + 1 if beam_size > 1 else 1
        results = self._translator.translate_batch(
            sources, beam_size=beam_size, patience=patience, num_hypotheses=beam_size * patience,
            length_penalty=1.0, return_scores=True, return_end_token=True, max_decoding_length=length,
            min_decoding_length=0, max_input_length=0,
            suppress_sequences=self._suppressed if suppress else None)
        # length_penalty 1: CTranslate2's score is log P / |Y| (|Y| with EOS, as it is returned).
        return [[(tokens, float(score) * len(tokens)) for tokens, score in zip(r.hypotheses, r.scores)]
                for r in results]

    def _gnmt_search(self, sources: List[List[str]], limits: List[int], beam_size: int, alpha: float):
        """Per source its K best [(tokens, our score)]; ``limits``: each source's maximum output length M.

        Open sources are decoded together to one length L (at first the longest of their 1.5 S + 4, for K = 1
        their M). A source with M <= L keeps its hypotheses of at most M tokens: its search up to M is the same
        whatever follows (hypotheses are registered as they finish); if none of them finished, its fallback
        (the alive beams at M) needs a search that ends at M, and it is decoded again to exactly M, grouped
        with the sources of that M. A source with M > L is done once ``_settled``, else decoded again to 2 L.
        """
        out: List[Optional[List[Tuple[List[str], float]]]] = [None] * len(sources)
        first = [m if beam_size == 1 else min(m, math.ceil(1.5 * len(s)) + 4) for s, m in zip(sources, limits)]
        open_items, length = list(range(len(sources))), max(first, default=0)
        exact: Dict[int, List[int]] = {}  # M -> the sources to decode to exactly M
        while open_items:
            still = []
            for i, hypotheses in zip(open_items, self._decode([sources[i] for i in open_items], beam_size, length)):
                limit = limits[i]
                if limit <= length:
                    kept = [(t, lp) for t, lp in hypotheses if len(t) <= limit]
                    if limit == length or any(t[-1] == self._eos for t, _ in kept):
                        out[i] = gnmt_rerank(kept, self._eos, limit, beam_size, alpha)
                    else:
                        exact.setdefault(limit, []).append(i)
                    continue
                best = gnmt_rerank(hypotheses, self._eos, limit, beam_size, alpha)
                if _settled(hypotheses, best, self._eos, length, limit, beam_size, alpha):
                    out[i] = best
                else:
                    still.append(i)
            open_items, length = still, min(2 * length, max((limits[i] for i in still), default=0))
        for limit, group in sorted(exact.items()):
            for i, hypotheses in zip(group, self._decode([sources[i] for i in group], beam_size, limit)):
                out[i] = gnmt_rerank(hypotheses, self._eos, limit, beam_size, alpha)
        return out

    def _native(self, sources: List[List[str]], limits: List[int], beam_size: int, length_penalty: float,
                prefixes: Optional[List[List[str]]] = None):
        """Per source its K best [(tokens, CTranslate2's score)] from CTranslate2's own search (module docstring):
        the batch to its longest limit, then any source with a hypothesis past its own limit again to it;
        ``prefixes``: the target pieces each output starts with (CTranslate2's target_prefix)."""
        out = self._native_batch(sources, beam_size, length_penalty, max(limits, default=0), prefixes)
        over: Dict[int, List[int]] = {}  # M -> the sources to search again to M
        for i, hypotheses in enumerate(out):
            if any(len(tokens) > limits[i] for tokens, _ in hypotheses):
                over.setdefault(limits[i], []).append(i)
        for limit, group in sorted(over.items()):
            again = self._native_batch([sources[i] for i in group], beam_size, length_penalty, limit,
                                       None if prefixes is None else [prefixes[i] for i in group])
            for i, hypotheses in zip(group, again):
                out[i] = hypotheses
        return out

    def _native_batch(self, sources, beam_size: int, length_penalty: float, length: int, prefixes=None):
        if not sources:
            return []
        results = self._translator.translate_batch(
            sources, target_prefix=prefixes if prefixes and any(prefixes) else None, beam_size=beam_size,
            num_hypotheses=beam_size, length_penalty=length_penalty,
            return_scores=True, return_end_token=True, max_decoding_length=length, max_input_length=0,
            suppress_sequences=self._suppressed,  # CTranslate2's min_decoding_length 1: at least one token
            max_batch_size=-(-len(sources) // self._replicas) if self._replicas > 1 else 0)  # a part per replica
        return [list(zip(r.hypotheses, map(float, r.scores))) for r in results]

    def target_pieces(self, texts: Sequence[str]) -> List[int]:
        """How many target subwords each text (a target prefix) tokenizes to."""
        return [len(pieces) for pieces in self._target_sp.encode(list(texts))]

    def translate(self, texts: Sequence[str], beam_size: Optional[int] = None, alpha: Optional[float] = None,
                  extra_length: Optional[int] = None,
                  prefixes: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
        """Beam search of ``texts``; None options take the directory's values (α: CTranslate2's length penalty in
        the native search, GNMT's in the gnmt one). ``prefixes``: a target prefix per text ("" for none) that its
        outputs start with (the native search only; its scores then leave out the prefix's tokens, as
        CTranslate2's do). Outputs as documented above."""
        beam_size, alpha, extra_length = (default if v is None else v for v, default in
                                          zip((beam_size, alpha, extra_length), self.defaults))
        if beam_size < 1 or alpha < 0 or extra_length < 0:
            raise ValueError(f"beam_size >= 1, alpha >= 0 and extra_length >= 0 expected, got {beam_size}, {alpha}, "
                             f"{extra_length}")
        if prefixes is not None and self.search != "native":
            raise ValueError("target_prefix: a CTranslate2 directory takes one with its native search only")
        kept = [i for i, text in enumerate(texts) if not is_blank(text)]  # a blank input: "", score 0, not searched
        sources = self.encode([texts[i] for i in kept])
        # Each sentence's own limit (decoding/model_step.max_output_lengths): source tokens + extra_length.
        limits = [min(len(s) + extra_length, self.recipe.model.max_length) for s in sources]
        if prefixes is not None:
            pieces = [self._target_sp.encode(prefixes[i], out_type=str) for i in kept]
            nbest = self._native(sources, limits, beam_size, alpha, pieces) if sources else []
        else:
            search = self._native if self.search == "native" else self._gnmt_search
            nbest = search(sources, limits, beam_size, alpha) if sources else []
        b = len(texts)
        nbest_translations = np.full([b, beam_size], "", dtype=object)
        nbest_scores = np.full([b, beam_size], NEG_INF, dtype=np.float32)
        nbest_scores[:, 0] = 0.0  # the blank inputs' one hypothesis; the others' are overwritten below
        for i, hypotheses in zip(kept, nbest):
            nbest_scores[i, 0] = NEG_INF
            for k, (tokens, score) in enumerate(hypotheses):
                nbest_translations[i, k] = self._detokenize(tokens)
                nbest_scores[i, k] = score
        return {"translations": nbest_translations[:, 0], "scores": nbest_scores[:, 0],
                "nbest_translations": nbest_translations, "nbest_scores": nbest_scores}

    def translate_with_options(self, inputs, beam_size, alpha, extra_length):
        """``Loaded.fn``: tensors in (inputs [B] string, scalars), the same dict of tensors out."""
        return self.translate_with_prefix(inputs, None, beam_size, alpha, extra_length)

    def translate_with_prefix(self, inputs, target_prefix, beam_size, alpha, extra_length):
        """``Loaded.prefixed``: as ``translate_with_options``, with target_prefix [B] string (None: none)."""
        import tensorflow as tf

        def strings(t):
            return [s.decode("utf-8") for s in tf.convert_to_tensor(t, tf.string).numpy().tolist()]

        prefixes = None if target_prefix is None else strings(target_prefix)
        out = self.translate(strings(inputs), int(beam_size), float(alpha), int(extra_length), prefixes)
        strings = lambda a: tf.constant([s.encode("utf-8") for s in a.reshape(-1)], tf.string,  # noqa: E731
                                        shape=a.shape)
        return {"translations": strings(out["translations"]), "scores": tf.constant(out["scores"]),
                "nbest_translations": strings(out["nbest_translations"]),
                "nbest_scores": tf.constant(out["nbest_scores"])}


def load(model_dir, device: str = "cpu", compute_type: str = "default", intra_threads: int = 0,
         search: str = "native", inter_threads: int = 1) -> CTranslate2Translator:
    """The translator over a directory written by ``ctranslate2_convert.convert``.

    device: "cpu", "cuda" or "auto"; compute_type: CTranslate2's ("default" runs the stored weight type);
    intra_threads: threads per translation, 0 = one per available core, at most 4; search: one of ``SEARCHES``;
    inter_threads: CTranslate2's translator replicas, each given a part of a batch (the native search).
    """
    return CTranslate2Translator(model_dir, device, compute_type, intra_threads, search, inter_threads)

