"""Batched beam search with a length penalty (§6.1; Wu et al., 2016).

    lp(Y)    = ((5 + |Y|) / 6)^α                 |Y| counts the generated tokens, EOS included
    score(Y) = log P(Y | X) / lp(Y)

"We used beam search with a beam size of 4 and length penalty α = 0.6 ... set
the maximum output length during inference to input length + 50, but
terminate early when possible" (§6.1).

As in tensor2tensor and flax, the K *alive* hypotheses (which keep growing)
are kept apart from the K best *finished* ones (which emitted EOS). At step i
every alive beam is extended by every token; of the top 2K expansions of an
item, the best K that do not end in EOS become the new alive beams, and the
ones ending in EOS that rank within the top K are scored and merged into the
finished set. (Admitting EOS only from the top K is the textbook beam and
fairseq's rule; it makes K = 1 with α = 0 exactly greedy decoding.)

An item stops at its own maximum length, or once it holds N finished
hypotheses and no alive beam can beat the N-th best of them (tensor2tensor's
rule, applied to an n-best list of N = ``num_hypotheses`` <= K): log-probabilities
only fall and lp only grows, so log P_alive / lp(max_length) bounds every
extension for any α >= 0, and no later hypothesis can enter the N best. N = K
(the default) fills the n-best list that reranking and MBR read; N = 1 stops as
soon as the best hypothesis is settled, with the same best hypothesis and score
in fewer steps (the later n-best slots then hold what had finished).

That is ``stop_rule="exact"``, the default. ``stop_rule="heuristic"`` scores the best alive beam as if it
ended at this step, log P_alive / lp(i + 1), instead of at its maximum length: the rule of Hugging Face's
``generate`` (``early_stopping=False``, its default). It stops sooner, since with α > 0 the bound at the
maximum length is loose, but a longer hypothesis found later could have won: the translations may differ
(measured in docs/benchmarks.md). A stopped item
leaves the search: its result is written out and its rows are dropped from
every loop tensor and cache, so the remaining steps spend no work on it. The
``tf.while_loop`` ends when no item is left.

The search knows nothing of the model: ``step_fn(token_ids [N], step, cache,
constants) -> (log_probs [N, V], cache)`` does one decoder step for the
N = B'*K hypotheses of the B' items still searching (beams of an item
adjacent; at step 0 one row per item, N = B', since an item's K beams would all read BOS from the same
state and only beam 0 is live: the step's work is not done K times, and its rows are repeated to the K beams
after it, their cache rows too); it must return log-probabilities (<= 0; a banned token gets
NEG_INF), not raw logits: a tensor, or ``log_probs.LogProbs`` (the logits
and their normaliser; only the 2K tokens kept per beam are normalised). ``cache`` (per beam, leading dimension N) is
reordered with the beams each step; ``constants`` (one row per item, B' rows,
shared by its K beams, e.g. the encoder memory) are never reordered, only
thinned when items stop. Any cache dimension may change from step to step (a
key/value cache grows by one position), so the search traces once per input
signature and exports to a SavedModel with stock ops only.

The top 2K expansions of an item are found in two stages, each beam's 2K best
tokens and then the best 2K of those K * 2K candidates: the same expansions,
in the same order (ties go to the lower beam, then the lower token), as one
top-k over all K * V, without building the [B', K, V] sums. A beam's 2K best
tokens come from the 2K vocabulary blocks with the highest maxima
(``log_probs.top_k_by_blocks``), exactly as a top-k over the whole row.

Outputs: sequences [B, K, T] int32 without BOS, EOS included, PAD after EOS,
T = steps run; scores [B, K] float32, best first. An item with no finished
hypothesis falls back to its alive beams (no EOS, scored at its maximum
length). An item that stops with fewer than K finished hypotheses (but at
least one: at its maximum length, or with N < K) has empty slots after them:
all PAD, score NEG_INF.
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Tuple

import tensorflow as tf

from keras_transformer import BOS_ID, EOS_ID
from keras_transformer.config import STOP_RULES
from keras_transformer.decoding import model_step
from keras_transformer.decoding.constraints import Guided, allocate, checked_constraint_lengths, lexically_constrained
from keras_transformer.decoding.log_probs import NEG_INF, as_log_probs, columns, smallest
from keras_transformer.decoding.parallel import in_parallel
from keras_transformer.decoding.prefix import checked_prefix_lengths, forced_prefix


class SearchResult(NamedTuple):
    sequences: tf.Tensor  # [B, K, T] int32, T = num_steps
    scores: tf.Tensor  # [B, K] float32, best first
    num_steps: tf.Tensor  # [] int32, decoder steps run (early stop makes it < max length)


def length_penalty(length, alpha):
    """GNMT lp(Y) = ((5 + |Y|) / 6)^α (Wu et al., 2016, Eq. 14). length: any shape; returns float32."""
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, tf.cast(alpha, tf.float32))


def check_stop_rule(stop_rule: str) -> str:
    if stop_rule not in STOP_RULES:
        raise ValueError(f"stop_rule: {stop_rule!r}; expected one of {', '.join(STOP_RULES)}")
    return stop_rule


def hypotheses_to_settle(num_hypotheses, beam_size):
    """N, the hypotheses final when an item stops, as a scalar int32 tensor: ``num_hypotheses``, or K if None."""
    return tf.cast(beam_size if num_hypotheses is None else num_hypotheses, tf.int32)


def cache_invariants(cache):
    """Shape invariants for a cache nest in a ``tf.while_loop``: every dimension may change (rank is kept)."""
    return tf.nest.map_structure(lambda t: tf.TensorShape([None] * t.shape.rank), cache)


def _gather_beams(x, beams):
    """x [B, N, ...], beams [B, M] -> [B, M, ...]."""
    return tf.gather(x, beams, batch_dims=1)


class Beams(NamedTuple):
    """Each item's K alive and K finished hypotheses (leading dimension: the items; T: the output buffers).

    The search's step, shared by ``beam_search`` and the static-shape ``static_beam_search``."""

    alive_seq: tf.Tensor  # [B, K, T] int32
    alive_log_probs: tf.Tensor  # [B, K] float32
    finished_seq: tf.Tensor  # [B, K, T] int32
    finished_scores: tf.Tensor  # [B, K] float32
    finished_flags: tf.Tensor  # [B, K] bool

    @classmethod
    def start(cls, b, k, t) -> "Beams":
        """Nothing decoded: only beam 0 is live (no duplicate beams), nothing finished."""
        first_beam = tf.equal(tf.range(k), 0)[None, :]  # [1, K]
        empty = tf.zeros([b, k, t], tf.int32)  # [B, K, T]
        return cls(empty, tf.where(first_beam, 0.0, NEG_INF) * tf.ones([b, 1]), empty, tf.fill([b, k], NEG_INF),
                   tf.zeros([b, k], tf.bool))

    def last_tokens(self, i, bos_id):
        """[B*K] int32: each alive beam's token at step i - 1 (BOS at step 0), the decoder's next input."""
        previous = tf.gather(self.alive_seq, tf.maximum(i - 1, 0), axis=2)  # [B, K]
        return tf.reshape(tf.where(tf.equal(i, 0), tf.fill(tf.shape(previous), bos_id), previous), [-1])

    def expand(self, log_probs, i, k, alpha, eos_id) -> Tuple["Beams", tf.Tensor]:
        """Step i: (the new beams, source_beams [B, K], the beam each new alive beam extends).

        log_probs [B*K, V] (a tensor or ``LogProbs``; ``constraints.Guided``: the 2K kept by dynamic beam
        allocation, Post & Vilar 2018); k: K, a Python int or a scalar tensor."""
        guide = log_probs if isinstance(log_probs, Guided) else None
        log_probs = as_log_probs(log_probs if guide is None else guide.log_probs)
        b, t = tf.shape(self.alive_seq)[0], tf.shape(self.alive_seq)[2]
        # The 2K best expansions of each item (at most K of them end in EOS, one per beam), in two stages.
        per_beam = smallest(2 * k, columns(log_probs.logits))  # C = 2K, or V if smaller
        beam_log_probs, beam_tokens = log_probs.top_k(per_beam)  # [B*K, C] each beam's best tokens
        if guide is not None:  # and each unmet constraint's next subword: C = 2K + constraints
            beam_log_probs, beam_tokens = guide.with_constraint_tokens(beam_log_probs, beam_tokens)
            per_beam = tf.shape(beam_tokens)[1]
        candidates = self.alive_log_probs[:, :, None] + tf.reshape(beam_log_probs, [b, k, per_beam])  # [B, K, C]
        candidates = tf.reshape(candidates, [b, k * per_beam])  # [B, K*C]
        if guide is None:
            top_log_probs, top_ids = tf.math.top_k(candidates, k=2 * k)  # [B, 2K]
        else:  # the banks take turns (constraints.allocate)
            top_ids = allocate(candidates, tf.reshape(guide.banks(beam_tokens), [b, k * per_beam]), 2 * k)
            top_log_probs = tf.gather(candidates, top_ids, batch_dims=1)  # [B, 2K]
        top_beams = top_ids // per_beam  # [B, 2K]
        top_tokens = tf.gather(tf.reshape(beam_tokens, [b, k * per_beam]), top_ids, batch_dims=1)  # [B, 2K]
        at_i = tf.equal(tf.range(t), i)[None, None, :]  # [1, 1, T]
        top_seq = tf.where(at_i, top_tokens[:, :, None], _gather_beams(self.alive_seq, top_beams))  # [B, 2K, T]
        top_eos = tf.equal(top_tokens, eos_id)  # [B, 2K]

        # Alive: the best K expansions that do not end in EOS (allocated: the first K in the banks' order).
        if guide is None:
            alive_log_probs, alive_pick = tf.math.top_k(tf.where(top_eos, NEG_INF, top_log_probs), k=k)  # [B, K]
        else:
            _, alive_pick = tf.math.top_k(tf.where(top_eos, NEG_INF, -tf.cast(tf.range(2 * k), tf.float32)), k=k)
            alive_log_probs = tf.gather(top_log_probs, alive_pick, batch_dims=1)

        # Finished: EOS expansions ranked within the top K, scored log P / lp, merged with the old set. One that
        # was banned (log P near NEG_INF: a step_fn wrapper left fewer than K tokens, as a target prefix does) is
        # not a hypothesis.
        admit = top_eos & (tf.range(2 * k) < k)[None, :] & (top_log_probs > NEG_INF / 2)  # [B, 2K]
        new_scores = tf.where(admit, top_log_probs / length_penalty(i + 1, alpha), NEG_INF)  # [B, 2K]
        finished_scores, finished_pick = tf.math.top_k(
            tf.concat([self.finished_scores, new_scores], axis=1), k=k)  # [B, K]
        beams = Beams(
            _gather_beams(top_seq, alive_pick), alive_log_probs,
            _gather_beams(tf.concat([self.finished_seq, top_seq], axis=1), finished_pick), finished_scores,
            _gather_beams(tf.concat([self.finished_flags, admit], axis=1), finished_pick))
        return beams, _gather_beams(top_beams, alive_pick)

    def done(self, i, max_lengths, alpha, num_hypotheses, stop_rule="exact"):
        """[B] bool after step i: at the maximum length, or the N = ``num_hypotheses`` best finished (the
        finished set is sorted, best first) that no alive beam can beat (N a Python int or scalar tensor),
        scored at its maximum length (``stop_rule`` "exact") or at this step ("heuristic")."""
        scored_at = max_lengths if check_stop_rule(stop_rule) == "exact" else i + 1
        best_alive = tf.reduce_max(self.alive_log_probs, axis=1) / length_penalty(scored_at, alpha)  # [B]
        finished = tf.where(self.finished_flags, self.finished_scores, NEG_INF)  # [B, K]
        nth_finished = tf.gather(finished, num_hypotheses - 1, axis=1)  # [B]
        return (i + 1 >= max_lengths) | (nth_finished > best_alive)

    def results(self, num_steps, alpha):
        """(sequences [B, K, T], scores [B, K]): the finished set, or the alive beams where none finished."""
        any_finished = tf.reduce_any(self.finished_flags, axis=1)  # [B]
        alive_scores = self.alive_log_probs / length_penalty(num_steps, alpha)  # [B, K]
        return (tf.where(any_finished[:, None, None], self.finished_seq, self.alive_seq),
                tf.where(any_finished[:, None], self.finished_scores, alive_scores))


class _Items(NamedTuple):
    """The per-item loop state of the items still searching (leading dimension B')."""

    index: tf.Tensor  # [B'] int32, the item's row in the output
    max_lengths: tf.Tensor  # [B'] int32
    beams: Beams


def beam_search(step_fn, initial_cache, beam_size, max_lengths, alpha, constants=(), eos_id=EOS_ID,
                bos_id=BOS_ID, num_hypotheses=None, stop_rule="exact") -> SearchResult:
    """Beam search over ``step_fn`` (see the module docstring).

    initial_cache, constants: nests of tensors [B*K, ...]; max_lengths [B] int: most tokens (EOS included) per
    item; beam_size K, alpha and num_hypotheses N (1 <= N <= K, default K: the hypotheses that must be final
    before an item stops) may be Python numbers or scalar tensors; ``stop_rule``: "exact" or "heuristic" (the
    module docstring).
    """
    max_lengths = tf.cast(max_lengths, tf.int32)  # [B]
    alpha = tf.cast(alpha, tf.float32)
    k = tf.cast(beam_size, tf.int32)
    n = hypotheses_to_settle(num_hypotheses, k)
    b = tf.shape(max_lengths)[0]
    t_max = tf.maximum(tf.reduce_max(max_lengths), 0)  # T of the output buffers

    def settle(i, items, log_probs, cache, constants, out_seq, out_scores, cache_rows):
        """Step i after the decoder: expand the beams, retire the items that are done, and take each new beam's
        cache row, ``cache_rows(keep [B''], source_beams [B', K]) -> [B''*K]``."""
        beams, source_beams = items.beams.expand(log_probs, i, k, alpha, eos_id)
        items = items._replace(beams=beams)
        done = beams.done(i, items.max_lengths, alpha, n, stop_rule)  # [B']
        keep = tf.cast(tf.where(~done)[:, 0], tf.int32)  # [B'']

        def retire():  # write the stopped items' results; the constants lose their rows
            stopped = tf.where(done)[:, 0]  # [R]
            sequences, scores = (tf.gather(x, stopped) for x in beams.results(i + 1, alpha))
            rows = tf.gather(items.index, stopped)[:, None]  # [R, 1]
            return (tf.tensor_scatter_nd_update(out_seq, rows, sequences),
                    tf.tensor_scatter_nd_update(out_scores, rows, scores),
                    tf.nest.map_structure(lambda t: tf.gather(t, keep), constants))

        out_seq, out_scores, constants = tf.cond(tf.reduce_any(done), retire, lambda: (out_seq, out_scores, constants))
        items = tf.nest.map_structure(lambda t: tf.gather(t, keep), items)
        cache = tf.nest.map_structure(lambda t: tf.gather(t, cache_rows(keep, source_beams)), cache)
        return i + 1, items, cache, constants, out_seq, out_scores

    def step(i, items, cache, constants, out_seq, out_scores):
        log_probs, cache = step_fn(items.beams.last_tokens(i, bos_id), i, cache, constants)  # [B'*K, V]
        # The per-beam cache in one gather: row j*K + m takes the row of its source beam; stopped items go.
        return settle(i, items, log_probs, cache, constants, out_seq, out_scores,
                      lambda keep, source_beams: tf.reshape(keep[:, None] * k + tf.gather(source_beams, keep), [-1]))

    def first_step(items, cache, constants, out_seq, out_scores):
        """Step 0 on one row per item (B' rows, not B'*K): every beam of an item reads BOS from the same state and
        only beam 0 is live (``Beams.start``), so the K rows would be K copies. Its log-probabilities are
        repeated to the K beams for ``expand``, and every new beam takes its item's cache row."""
        bos = tf.fill(tf.shape(items.index), bos_id)  # [B']
        log_probs, cache = step_fn(bos, tf.constant(0), cache, constants)  # [B', V]
        log_probs = tf.nest.map_structure(lambda t: tf.repeat(t, k, axis=0) if tf.is_tensor(t) else t, log_probs)
        return settle(tf.constant(0), items, log_probs, cache, constants, out_seq, out_scores,
                      lambda keep, source_beams: tf.repeat(keep, k))  # [B''*K]

    def searching(i, items, *state):
        return tf.logical_and(i < t_max, tf.shape(items.index)[0] > 0)

    start = Beams.start(b, k, t_max)
    searched = tf.cast(tf.where(max_lengths > 0)[:, 0], tf.int32)  # items allowed no token keep the start state
    items = tf.nest.map_structure(lambda t: tf.gather(t, searched), _Items(tf.range(b), max_lengths, start))
    initial_cache = tf.nest.map_structure(lambda t: tf.gather(t, searched * k), initial_cache)  # an item's beam 0
    constants = tf.nest.map_structure(lambda t: tf.gather(t, searched), constants)
    state = (tf.constant(0), items, initial_cache, constants, start.alive_seq, start.alive_log_probs)
    state = tf.cond(tf.size(searched) > 0, lambda: first_step(*state[1:]), lambda: state)  # step 0, then the loop
    item_invariants = tf.nest.map_structure(lambda t: tf.TensorShape([None] * t.shape.rank), items)
    num_steps, _, _, _, out_seq, out_scores = tf.while_loop(
        searching, step, state,
        shape_invariants=(tf.TensorShape([]), item_invariants, cache_invariants(initial_cache),
                          cache_invariants(constants), tf.TensorShape([None, None, None]),
                          tf.TensorShape([None, None])),
        maximum_iterations=t_max)
    return SearchResult(out_seq[:, :, :num_steps], out_scores, num_steps)


# -- the model-level entry point -----------------------------------------------------------------


def _beam_search_model(model, source_ids, beam_size, alpha, extra_length, num_hypotheses, *guide, parallel_searches,
                       stop_rule, guided_by=None):
    def search(source_ids, *guide):  # [B', S] (and the prefix [B', P] or constraints [B', C, L]) -> [B', K, T], [B', K]
        max_lengths = model_step.max_output_lengths(source_ids, extra_length, model.config.max_length)  # [B']
        step_fn, cache, constants = model_step.cached_step_fn(model, source_ids, beam_size)
        if guided_by == "target_prefix":
            max_lengths = checked_prefix_lengths(guide[0], max_lengths)
            step_fn, constants = forced_prefix(step_fn, constants, guide[0])
        elif guided_by == "constraints":
            max_lengths = checked_constraint_lengths(guide[0], max_lengths)
            step_fn, cache, constants = lexically_constrained(step_fn, cache, constants, guide[0], max_lengths,
                                                              beam_size)
        result = beam_search(step_fn, cache, beam_size, max_lengths, alpha, constants,
                             num_hypotheses=num_hypotheses, stop_rule=stop_rule)
        return result.sequences, result.scores

    return in_parallel(search, source_ids, parallel_searches, *guide)


def translate_ids(model, source_ids, beam_size=4, alpha=0.6, extra_length=50, parallel_searches=1,
                  num_hypotheses=None, stop_rule="exact", target_prefix=None, constraints=None):
    """Beam search with the model's key/value cache (§6.1 defaults).

    source_ids [B, S] int (PAD-padded) -> (sequences [B, K, T] int32, scores [B, K] float32); see the module
    docstring for the conventions. Item b may emit up to (its non-PAD source tokens + extra_length) tokens, at
    most ``model.config.max_length``; PAD and BOS are never emitted. ``num_hypotheses`` N (default K): an item
    stops once its N best hypotheses are final (N = 1: the best alone, in fewer steps; the module docstring).
    ``parallel_searches`` P > 1 deals the items to P searches run at once (``parallel.in_parallel``; the same
    results). ``stop_rule``: "exact" or "heuristic" (the module docstring). ``target_prefix`` [B, P] int (PAD
    after each prefix): every hypothesis of item b starts with its row (``decoding.prefix``), which must be
    shorter than the item's maximum output length. ``constraints`` [B, C, L] int (PAD after each): every
    hypothesis of item b contains each of its C rows (``decoding.constraints``, dynamic beam allocation); not
    with a prefix. Runs one ``tf.function`` per model, P, stop rule and guide (none, a prefix or constraints),
    traced once: the other arguments are tensors in its signature, so it also works inside an exported
    ``tf.function``.
    """
    if target_prefix is not None and constraints is not None:
        raise ValueError("constraints: not with a target_prefix")
    guided_by, guide = next(((name, value) for name, value in (("target_prefix", target_prefix),
                                                                ("constraints", constraints)) if value is not None),
                            (None, None))
    search = functools.partial(_beam_search_model, parallel_searches=parallel_searches,
                               stop_rule=check_stop_rule(stop_rule), guided_by=guided_by)
    name = f"beam_search/{parallel_searches}/{stop_rule}" + (f"/{guided_by}" if guided_by else "")
    guide_spec = {"target_prefix": [tf.TensorSpec([None, None], tf.int32, name="target_prefix")],
                  "constraints": [tf.TensorSpec([None, None, None], tf.int32, name="constraints")]}
    fn = model_step.compiled_for(model, name, search, [
        tf.TensorSpec([None, None], tf.int32, name="source_ids"),
        tf.TensorSpec([], tf.int32, name="beam_size"),
        tf.TensorSpec([], tf.float32, name="alpha"),
        tf.TensorSpec([], tf.int32, name="extra_length"),
        tf.TensorSpec([], tf.int32, name="num_hypotheses"),
    ] + guide_spec.get(guided_by, []))
    return fn(tf.cast(source_ids, tf.int32), tf.cast(beam_size, tf.int32), tf.cast(alpha, tf.float32),
              tf.cast(extra_length, tf.int32), hypotheses_to_settle(num_hypotheses, beam_size),
              *([] if guide is None else [tf.cast(guide, tf.int32)]))
