"""The chart parser's decoding (``chart.py``): CKY over span scores, in the graph, and the tree it finds written as
the sequence-to-sequence parser's linearized output.

    parse(span_logits [B, N+1, N+1, CHAIN, C], tag_logits [B, N, C], words [B], bonus=0, threshold=0) -> Parse
    best_tree(scores [B, N+1, N+1], words [B]) -> (in_tree [B, N+1, N+1] bool, total [B])
    inside(potentials [B, N+1, N+1], words [B]) -> log Z [B]  (the tree CRF's normalizer, ``tree_loss.tree_crf``)
    marginals(margins [B, N+1, N+1, L], words [B]) -> μ [B, N+1, N+1]  (the tree CRF's constituent marginals)
    linearize(chains, tags, words, label_texts, tag_texts) -> [B] "(S (NP @NNP @NNP ) (VP @VBZ ) @. )"

Scores (Stern et al., 2017; Kitaev & Klein, 2018). Span (i, j)'s first chain row gives log p(label) and log p(∅);
its score is the best label's margin log p(label) - log p(∅), and its chain the best label followed by the best of
the next rows until one picks ∅. A tree's score is the sum over its spans of max(margin, 0): a span whose best label
is less likely than ∅ is in the binary tree as a bracket of no constituent (a binarisation node) and adds 0. The
root (0, n) is always a constituent and adds its margin whatever its sign. CKY finds the binary tree of the
largest sum in O(n^3):

    best(i, i+1) = s(i, i+1)
    best(i, j)   = s(i, j) + max_{i<k<j} best(i, k) + best(k, j)

one span length at a time, every start and split of that length at once (a ``tf.while_loop`` over lengths), then
the tree is read back top-down, again one length at a time. Tags are each word's best tag.

A bonus δ (``bonus``, a scalar; the export's α) is added to every margin before it: a span whose best label is
within δ of ∅ becomes a constituent. Trained locally on charts where most spans are ∅, the classifier is too sure
of ∅ and the trees hold too few constituents (recall well below precision on the WSJ sample's dev trees); δ > 0
trades precision for recall, chosen on dev like the sequence-to-sequence parser's α. δ = 0 is Stern et al.'s
(2017) rule.

With a ``threshold`` τ > 0 (``ParsingConfig.chart_mbr``, for a parser trained as a tree CRF) the tree is the one of
minimum Bayes risk instead (the outside CRF parser's decoding): span (i, j)'s score is μ(i, j) - τ + δ, where μ is
the probability under the CRF that the span is a labeled constituent (``marginals``: the gradient of log Z by the
label margins), so CKY finds the binary tree of the most expected correct constituents, each charged τ.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import tensorflow as tf

PADDING, EMPTY = 0, 1  # span classes: not a span of the sentence; ∅ (no constituent here, or the chain ends)
FIRST_LABEL = 2  # the first phrase label's class; tags start at class 1


class Parse(NamedTuple):
    chains: tf.Tensor  # [B, N+1, N+1, CHAIN] int32: label classes of the tree's constituents, 0 elsewhere
    tags: tf.Tensor  # [B, N] int32 tag classes
    scores: tf.Tensor  # [B] float32: the tree's sum of span scores
    words: tf.Tensor  # [B] int32


def _by_length(x, fill):
    """x [B, N+1, N+1, ...] indexed (start i, end j) -> [B, N+1, N+1, ...] indexed (length l, start i): x[i, i+l],
    ``fill`` where i + l > N."""
    n1 = tf.shape(x)[1]
    length, start = tf.meshgrid(tf.range(n1), tf.range(n1), indexing="ij")  # [N+1, N+1] each
    end = start + length
    picked = tf.gather_nd(tf.transpose(x, [1, 2, 0] + list(range(3, x.shape.rank))),
                          tf.stack([start, tf.minimum(end, n1 - 1)], axis=-1))  # [N+1 (l), N+1 (i), B, ...]
    picked = tf.transpose(picked, [2, 0, 1] + list(range(3, x.shape.rank)))
    inside = tf.reshape(end < n1, [1, n1, n1] + [1] * (x.shape.rank - 3))
    return tf.where(inside, picked, tf.cast(fill, x.dtype))


def _split_sums(table, length):
    """table [B, N+1 (l), N+1 (i)] (a chart by length, filled below ``length``), length l >= 2 (scalar) ->
    [B, l-1, N+1 (i)]: table(i, i+m) + table(i+m, i+l) for each split m = 1..l-1 of the spans of length l (clamped
    garbage where i + l > N, never read for a span of the sentence)."""
    n1 = tf.shape(table)[1]
    splits = tf.range(1, tf.maximum(length, 2))  # [L-1] the left part's length m
    left = tf.gather(table, splits, axis=1)  # [B, L-1, N+1]: table(i, i+m)
    right_at = tf.stack(tf.meshgrid(length - splits, tf.range(n1), indexing="ij"), axis=-1)  # [L-1, N+1, 2]
    right_at = tf.stack([right_at[..., 0], tf.minimum(right_at[..., 1] + splits[:, None], n1 - 1)], axis=-1)
    right = tf.gather_nd(tf.transpose(table, [1, 2, 0]), right_at)  # [L-1, N+1, B]: table(i+m, i+l)
    return left + tf.transpose(right, [2, 0, 1])


def best_tree(scores, words):
    """scores [B, N+1, N+1] float32 (span (i, j)'s score, what it adds to a tree that holds it), words [B] int32
    -> (in_tree [B, N+1, N+1] bool: the spans of the highest-scoring binary tree over each item's n words, the
    n single words and the root (0, n) among them; total [B] float32: its score). Only i < j <= n is read."""
    b, n1 = tf.shape(scores)[0], tf.shape(scores)[1]
    s = _by_length(scores, 0.0)  # [B, N+1 (l), N+1 (i)]: s(i, i+l)
    starts = tf.range(n1)

    def fill(length, best, split):
        total = _split_sums(best, length)  # [B, L-1, N+1]
        row = tf.equal(tf.range(n1), length)[None, :, None]  # [1, N+1, 1]
        best = tf.where(row, (s[:, length] + tf.reduce_max(total, axis=1))[:, None, :], best)
        split = tf.where(row, (tf.argmax(total, axis=1, output_type=tf.int32) + 1)[:, None, :], split)
        return length + 1, best, split

    best = tf.where(tf.equal(tf.range(n1), 1)[None, :, None], s, 0.0)  # length 1: the words
    _, best, split = tf.while_loop(lambda length, *_: length < n1, fill,
                                   (tf.constant(2), best, tf.zeros([b, n1, n1], tf.int32)))
    items = tf.range(b)
    total = tf.gather_nd(best, tf.stack([items, words, tf.zeros_like(words)], axis=1))  # [B] best(0, n)

    def read(length, in_tree):  # marks both parts of each span of this length in the tree
        chosen = tf.cast(in_tree[:, length], tf.int32)  # [B, N+1]: (i, i+l) in the tree
        m = split[:, length]  # [B, N+1]
        item, start = tf.meshgrid(items, starts, indexing="ij")  # [B, N+1] each
        left = tf.stack([item, m, start], axis=-1)
        right = tf.stack([item, length - m, tf.minimum(start + m, n1 - 1)], axis=-1)
        in_tree = tf.tensor_scatter_nd_max(tf.cast(in_tree, tf.int32), tf.reshape(tf.concat([left, right], 1),
                                                                                  [-1, 3]),
                                           tf.reshape(tf.concat([chosen, chosen], 1), [-1]))
        return length - 1, tf.cast(in_tree, tf.bool)

    root = tf.scatter_nd(tf.stack([items, words, tf.zeros_like(words)], axis=1), tf.ones([b], tf.bool), [b, n1, n1])
    _, in_tree = tf.while_loop(lambda length, _: length >= 2, read, (n1 - 1, root))
    start, end = tf.meshgrid(starts, starts, indexing="ij")  # back to (start i, end j)
    picked = tf.gather_nd(tf.transpose(in_tree, [1, 2, 0]), tf.stack([tf.maximum(end - start, 0), start], -1))
    return tf.transpose(picked, [2, 0, 1]) & (end > start)[None], total  # [B, N+1, N+1]


def inside(potentials, words):
    """potentials [B, N+1, N+1] float32 (log φ(i, j): what span (i, j) multiplies into a tree that holds it),
    words [B] int32 -> log Z [B]: the log of the sum over every binary tree of the n words of the product of its
    spans' φ. CKY's recursion with log-sum-exp in place of max (the inside algorithm; Zhang et al., 2020):

        inside(i, i+1) = log φ(i, i+1)
        inside(i, j)   = log φ(i, j) + log Σ_{i<k<j} exp(inside(i, k) + inside(k, j))

    Differentiable: the gradient of log Z by log φ(i, j) is the marginal probability that span (i, j) is in the
    tree. Only i < j <= n is read."""
    b, n1 = tf.shape(potentials)[0], tf.shape(potentials)[1]
    s = _by_length(potentials, 0.0)  # [B, N+1 (l), N+1 (i)]

    def fill(length, table):
        row = tf.equal(tf.range(n1), length)[None, :, None]  # [1, N+1, 1]
        value = s[:, length] + tf.reduce_logsumexp(_split_sums(table, length), axis=1)  # [B, N+1]
        return length + 1, tf.where(row, value[:, None, :], table)

    table = tf.where(tf.equal(tf.range(n1), 1)[None, :, None], s, 0.0)  # length 1: the words
    _, table = tf.while_loop(lambda length, _: length < n1, fill, (tf.constant(2), table))
    return tf.gather_nd(table, tf.stack([tf.range(b), words, tf.zeros_like(words)], axis=1))  # [B] inside(0, n)


def label_margins(first):
    """first [B, N+1, N+1, C] (a span's first chain row: logits or log-probabilities) -> [B, N+1, N+1, L]: each
    phrase label's margin over ∅, s(i, j, l) = first[l] - first[∅]."""
    return first[..., FIRST_LABEL:] - first[..., EMPTY:EMPTY + 1]


def crf_potentials(margins, words):
    """margins [B, N+1, N+1, L] (each label's margin over ∅, what a labeled span adds to a tree), words [B] ->
    log φ [B, N+1, N+1] = log Σ_{l or ∅} exp s(i, j, l) with ∅ scoring 0, and no ∅ at the root: the tree CRF's span
    potentials when labels are chosen per span (``tree_loss.tree_crf``)."""
    empty = tf.where(root_span(words, tf.shape(margins)[1]), -1e9, 0.0)[..., None]  # ∅'s score, none at the root
    return tf.reduce_logsumexp(tf.concat([empty, margins], axis=-1), axis=-1)


def marginals(margins, words):
    """margins [B, N+1, N+1, L] float32, words [B] -> μ [B, N+1, N+1]: the probability under the tree CRF of
    ``crf_potentials`` that span (i, j) is a labeled constituent of the tree, ∂ log Z / ∂ s(i, j, l) summed over the
    labels l (the inside-outside marginals by automatic differentiation; 0 outside i < j <= n)."""
    with tf.GradientTape() as tape:
        tape.watch(margins)
        log_z = inside(crf_potentials(margins, words), words)  # [B]
    return tf.reduce_sum(tape.gradient(log_z, margins), axis=-1)


def root_span(words, n1):
    """words [B], n1 = N+1 -> [B, N+1, N+1] bool: True at each item's root span (0, n)."""
    fence = tf.range(n1)
    return tf.equal(fence[None, :, None], 0) & tf.equal(fence[None, None, :], words[:, None, None])


def parse(span_logits, tag_logits, words, bonus=0.0, threshold=0.0) -> Parse:
    """The best tree of each item (module docstring); ``bonus`` δ: a scalar added to every span's margin;
    ``threshold`` τ (a Python float): > 0 scores spans by their CRF marginals less τ instead (minimum Bayes risk)."""
    log_p = tf.nn.log_softmax(span_logits, axis=-1)  # [B, N+1, N+1, CHAIN, C]
    first = log_p[..., 0, :]  # [B, N+1, N+1, C]
    label = tf.argmax(first[..., FIRST_LABEL:], axis=-1, output_type=tf.int32) + FIRST_LABEL
    margins = label_margins(first)  # [B, N+1, N+1, L]
    score = marginals(margins, words) - threshold if threshold else tf.reduce_max(margins, axis=-1)
    margin = score + tf.cast(bonus, first.dtype)  # [B, N+1, N+1]
    is_root = root_span(words, tf.shape(margin)[1])
    scores = tf.where(is_root, margin, tf.maximum(margin, 0.0))
    in_tree, total = best_tree(scores, words)
    constituent = in_tree & (is_root | (margin > 0.0))  # [B, N+1, N+1]
    inner = tf.argmax(log_p[..., 1:, EMPTY:], axis=-1, output_type=tf.int32) + EMPTY  # [B, N+1, N+1, CHAIN-1]
    ended = tf.cumsum(tf.cast(tf.equal(inner, EMPTY), tf.int32), axis=-1) > 0  # the chain stopped at or before
    chain = tf.concat([label[..., None], tf.where(ended, PADDING, inner)], axis=-1)
    chains = tf.where(constituent[..., None], chain, PADDING)  # [B, N+1, N+1, CHAIN]
    tags = tf.argmax(tag_logits[..., 1:], axis=-1, output_type=tf.int32) + 1  # [B, N]
    return Parse(chains, tags, total, words)


def linearize(chains, tags, words, label_texts: Sequence[str], tag_texts: Sequence[str]):
    """-> [B] string: each tree as the sequence-to-sequence parser writes it, "(S (NP @NNP @NNP ) (VP @VBZ ) @. )"
    (``trees.linearize`` with tag leaves), over the first ``words`` words. label_texts / tag_texts: by class."""
    labels = tf.constant(list(label_texts))
    opens = tf.where(chains > 0, tf.gather(labels, chains) + " ", "")  # [B, N+1, N+1, CHAIN]
    opens = tf.strings.reduce_join(opens, axis=-1)  # [B, N+1 (i), N+1 (j)]: "(S (VP "
    before = tf.strings.reduce_join(tf.reverse(opens, axis=[2]), axis=2)  # [B, N+1]: longest first
    count = tf.reduce_sum(tf.cast(chains > 0, tf.int32), axis=[1, 3])  # [B, N+1 (j)]: brackets that close at j
    most = tf.reduce_max(count) + 1
    closing = tf.strings.reduce_join(tf.where(tf.range(most)[None, :] < tf.range(most)[:, None], " )", ""),
                                     axis=1)  # [most]: "", " )", " ) )", ...
    n = tf.shape(tags)[1]
    leaves = tf.gather(tf.constant(list(tag_texts)), tags)  # [B, N]
    texts = before[:, :n] + leaves + tf.gather(closing, count[:, 1:])  # [B, N]
    return tf.strings.reduce_join(tf.RaggedTensor.from_tensor(texts, lengths=words), axis=1, separator=" ")
