"""Lexically constrained decoding (not in the paper): every output contains each of its input's constraints, the
words or phrases a glossary requires (terminology; fairseq's ``--constraints``, Sockeye, Hugging Face's
``force_words_ids``).

    lexically_constrained(step_fn, cache, constants, constraint_ids [B, C, L], max_lengths [B], beam_size)
        -> (step_fn', cache', constants')
    checked_constraint_lengths(constraint_ids, max_lengths) -> max_lengths, asserted to hold the constraints
    allocate(scores [B, M], banks [B, M], n) -> [B, n] the candidates kept, banks taking turns

Dynamic beam allocation (Post & Vilar, 2018, "Fast Lexically Constrained Decoding with Dynamic Beam Allocation
for Neural Machine Translation"), with the vectorised allocation of Hu et al. (2019) that fairseq's
``LexicallyConstrainedBeamSearch`` uses:

- Each hypothesis tracks its progress p_j through each constraint c_j of L_j subwords: a token that is c_j's next
  advances p_j; any other resets an unfinished p_j (to 1 where it is c_j's first token); a met constraint
  (p_j = L_j) stays met. Its *bank* is Σ_j p_j, the constraint subwords it holds.
- At each step a beam's candidates are its 2K best tokens and the next token of each unmet constraint. Of all
  its beams' candidates an item keeps the 2K that come first when the banks take turns: the best candidate of
  the fullest bank, the best of the next fullest, ..., then each bank's second best, and so on (a candidate's
  rank within its bank first, then its bank, fuller first). A hypothesis that has placed a constraint word is so
  kept beside the unconstrained ones that outscore it, and an empty bank's turn goes to the others. The alive
  beams are the first K of those that do not end in EOS, in that order; an EOS among the first K finishes its
  hypothesis, as in the plain search.
- EOS is banned until every constraint is met, and so is any token after which the unmet subwords would no
  longer fit before the item's maximum length: every hypothesis can still meet them all, and every output (n-best
  slots included, and the unfinished hypotheses an item that reaches its maximum length falls back to) contains
  every constraint. Post & Vilar leave this to the beam; here it holds whatever K. With no constraint (C = 0, or
  rows of PAD) nothing is banned and the banks are one: the plain search's outputs.

Through the searches' ``step_fn`` seam, as the parser's tree constraint and the target prefix: the progress
[N, C] rides in the cache (reordered with the beams), the constraints and maximum lengths in the constants
(thinned with the items), and the step returns ``Guided``: its log-probabilities (bans applied, the model's own
values otherwise, not renormalised) and what ``Beams.expand`` needs to allocate. Scores stay log P(Y|X) / lp(Y).
A constraint is a row of subword ids, PAD after; a row of PAD (or C = 0) constrains nothing. A constraint that
is met inside another's span counts (both may share subwords); a repeated subword within one constraint is
matched without backtracking (as Post & Vilar's).
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

from keras_transformer import EOS_ID, PAD_ID
from keras_transformer.decoding.log_probs import NEG_INF, LogProbs, as_log_probs, columns


def constraint_lengths(constraint_ids):
    """constraint_ids [B, C, L] (PAD after each) -> [B, C] int32: each constraint's subwords."""
    return tf.reduce_sum(tf.cast(tf.not_equal(constraint_ids, PAD_ID), tf.int32), axis=2)


def checked_constraint_lengths(constraint_ids, max_lengths):
    """max_lengths [B], once asserted to hold each item's constraint subwords and EOS: else InvalidArgumentError
    "constraints: too long ..."."""
    needed = tf.reduce_sum(constraint_lengths(constraint_ids), axis=1) + 1  # [B]
    check = tf.debugging.Assert(tf.reduce_all(needed <= max_lengths), [
        "constraints: too long for the output (source subwords + extra_length, EOS included; at most the model's "
        "max_length): constraint subwords + EOS", needed, "output limits", max_lengths])
    with tf.control_dependencies([check]):
        return tf.identity(max_lengths)


def advance(progress, token_ids, next_ids, first_ids, lengths):
    """Progress after a token (broadcasting): progress, next_ids (the next subword of each constraint), first_ids
    and lengths [..., C], token_ids [..., 1] -> [..., C]."""
    return tf.where(progress >= lengths, progress,
                    tf.where(tf.equal(token_ids, next_ids), progress + 1,
                             tf.cast(tf.equal(token_ids, first_ids), tf.int32)))


class Guided(NamedTuple):
    """A constrained step's output: the log-probabilities, and each row's progress to allocate the banks by."""

    log_probs: LogProbs  # [N, V], the banned tokens NEG_INF
    progress: tf.Tensor  # [N, C] int32: the constraint subwords each hypothesis holds so far
    next_ids: tf.Tensor  # [N, C] int32: each constraint's next subword, PAD where it is met
    first_ids: tf.Tensor  # [N, C] int32
    lengths: tf.Tensor  # [N, C] int32

    def banks(self, token_ids):
        """token_ids [N, M] -> [N, M] int32: the constraint subwords each row holds after writing that token."""
        after = advance(self.progress[:, None], token_ids[:, :, None], self.next_ids[:, None],
                        self.first_ids[:, None], self.lengths[:, None])  # [N, M, C]
        return tf.reduce_sum(after, axis=2)

    def with_constraint_tokens(self, values, ids):
        """The candidates of each beam, its best tokens (values [N, M] log P, ids [N, M]) and then the next subword
        of each unmet constraint not among them: ([N, M + C], [N, M + C]); a duplicate or a met one is NEG_INF."""
        lp = self.log_probs
        extra = self.next_ids  # [N, C]
        extra_values = (tf.gather(lp.logits, extra, batch_dims=1) - lp.shift) - lp.log_sum  # [N, C]
        c = tf.range(tf.shape(extra)[1])
        earlier = tf.equal(extra[:, :, None], extra[:, None, :]) & (c[None, None, :] < c[None, :, None])  # [N, C, C]
        repeated = (tf.reduce_any(tf.equal(extra[:, :, None], ids[:, None, :]), axis=2)
                    | tf.reduce_any(earlier, axis=2) | tf.equal(extra, PAD_ID))  # [N, C]
        return (tf.concat([values, tf.where(repeated, NEG_INF, extra_values)], axis=1),
                tf.concat([ids, extra], axis=1))


def allocate(scores, banks, n):
    """scores [B, M] (candidates' log P), banks [B, M] int -> [B, n] int32: the candidates kept, in the order in
    which the banks take turns (module docstring: rank within the bank, then the bank, fuller first; a tie in score
    to the lower index). A candidate at or below NEG_INF / 2 comes after every other."""
    m = tf.shape(scores)[1]
    valid = scores > NEG_INF / 2  # [B, M]
    index = tf.range(m)
    ahead = ((scores[:, None, :] > scores[:, :, None])
             | (tf.equal(scores[:, None, :], scores[:, :, None]) & (index[None, None, :] < index[None, :, None])))
    same_bank = tf.equal(banks[:, None, :], banks[:, :, None])  # [B, M (candidate), M (other)]
    rank = tf.reduce_sum(tf.cast(ahead & same_bank & valid[:, None, :], tf.int32), axis=2)  # [B, M]
    turns = tf.reduce_max(banks) + 1  # banks 0 ... turns - 1
    order = rank * turns + (turns - 1 - banks)  # [B, M]: smaller first, each distinct among the valid
    order = tf.where(valid, order, (m + 1) * turns + index)
    _, picked = tf.math.top_k(-tf.cast(order, tf.float32), k=n)
    return picked


def lexically_constrained(step_fn, cache, constants, constraint_ids, max_lengths, beam_size):
    """(step_fn', cache', constants'): ``step_fn`` whose hypotheses must contain each item's constraints,
    constraint_ids [B, C, L] (PAD after each; the module docstring), within max_lengths [B]; the cache gains the
    progress of each of the B*K beams."""
    constraint_ids = tf.pad(tf.cast(constraint_ids, tf.int32), [[0, 0], [0, 0], [0, 1]])  # [B, C, L + 1]: a PAD last
    lengths = constraint_lengths(constraint_ids)  # [B, C]
    progress = tf.zeros([tf.shape(lengths)[0] * beam_size, tf.shape(lengths)[1]], tf.int32)  # [B*K, C]

    def step(token_ids, i, cache, wrapped):
        rows = tf.shape(token_ids)[0] // tf.shape(wrapped["lengths"])[0]  # R hypotheses an item
        constraints = tf.repeat(wrapped["constraints"], rows, axis=0)  # [N, C, L]
        lengths = tf.repeat(wrapped["lengths"], rows, axis=0)  # [N, C]
        first_ids = constraints[:, :, 0]  # [N, C]

        def next_ids(progress):
            at = tf.minimum(progress, tf.shape(constraints)[2] - 1)
            return tf.where(progress >= lengths, PAD_ID, tf.gather(constraints, at, batch_dims=2))  # [N, C]

        # the token each hypothesis wrote last step (BOS at step 0, which advances nothing)
        progress = advance(cache["progress"], token_ids[:, None], next_ids(cache["progress"]), first_ids, lengths)
        log_probs, inner = step_fn(token_ids, i, cache["inner"], wrapped["constants"])
        log_probs = as_log_probs(log_probs)
        guided = Guided(log_probs, progress, next_ids(progress), first_ids, lengths)

        # What a token leaves unmet: an ordinary one restarts every unfinished constraint; a next or first
        # subword of one may advance it. It is allowed while that fits in the positions after it.
        total = tf.reduce_sum(lengths, axis=1)  # [N]
        room = tf.repeat(wrapped["max_lengths"], rows) - i - 1  # [N] positions after this step's
        met = tf.reduce_sum(tf.where(progress >= lengths, lengths, 0), axis=1)  # [N]
        special = tf.concat([guided.next_ids, first_ids], axis=1)  # [N, 2C]
        special_fits = total[:, None] - guided.banks(special) <= room[:, None]  # [N, 2C]
        vocab = columns(log_probs.logits)
        allowed = tf.tile((total - met <= room)[:, None], [1, vocab])  # [N, V]
        rows_of = tf.tile(tf.range(tf.shape(special)[0])[:, None], [1, tf.shape(special)[1]])  # [N, 2C]
        allowed = tf.tensor_scatter_nd_update(allowed, tf.reshape(tf.stack([rows_of, special], axis=2), [-1, 2]),
                                              tf.reshape(special_fits, [-1]))
        all_met = tf.equal(tf.reduce_sum(progress, axis=1), total)  # [N]
        allowed = tf.where(tf.equal(tf.range(vocab), EOS_ID)[None, :], all_met[:, None], allowed)
        return guided._replace(log_probs=log_probs.ban(allowed)), {"inner": inner, "progress": progress}

    wrapped = {"constants": constants, "constraints": constraint_ids, "lengths": lengths,
               "max_lengths": tf.cast(max_lengths, tf.int32)}
    return step, {"inner": cache, "progress": progress}, wrapped
