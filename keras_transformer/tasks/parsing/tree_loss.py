"""The chart parser's tree-level losses (``chart.py``; ``ParsingConfig.chart_hinge``, ``chart_crf``): Kitaev &
Klein's (2018) hinge and the tree CRF of Zhang et al. (2020), over the first chain row's logits
[B, N+1, N+1, C] and the gold classes [B, N+1, N+1] (``chart.gold_labels``). A span's labels score their margin
over ∅, s(i, j, l) = logit_l - logit_∅: the scores ``cky.parse`` maximises."""

from __future__ import annotations

import tensorflow as tf

from keras_transformer.tasks.parsing import cky
from keras_transformer.tasks.parsing.cky import FIRST_LABEL


def tree_hinge(logits, gold, words):
    """Kitaev & Klein's (2018) tree hinge, per sentence [B]: max over binary trees T of s(T) + Δ(T, T*), less s(T*).

    logits [B, N+1, N+1, C]: each span's first chain row; gold [B, N+1, N+1]: its gold class there (PADDING,
    EMPTY or a label; ``chart.gold_labels``); words [B]. A span's labels score their margins over ∅, s(i, j, l) =
    logit_l - logit_∅ (∅ scores 0, ``cky.parse``'s scores); Δ counts the spans whose class differs from the gold
    one. The loss-augmented tree is found by CKY on each span's best augmented score (the root must be labeled);
    the gradient reaches the margins of that tree's labels and of the gold tree's."""
    margins = cky.label_margins(logits)  # [B, N+1, N+1, L]
    labels = tf.shape(margins)[-1]
    is_gold = gold >= FIRST_LABEL  # [B, N+1, N+1]
    gold_label = tf.one_hot(tf.maximum(gold - FIRST_LABEL, 0), labels) * tf.cast(is_gold, tf.float32)[..., None]
    best_label = tf.reduce_max(margins + 1.0 - gold_label, axis=-1)  # [B, N+1, N+1]: Δ = 1 off the gold label
    is_root = cky.root_span(words, tf.shape(gold)[1])
    augmented = tf.where(is_root, best_label, tf.maximum(best_label, tf.cast(is_gold, tf.float32)))  # ∅: 0 + Δ
    in_tree, _ = cky.best_tree(tf.stop_gradient(augmented), words)
    predicted = tf.reduce_sum(tf.where(in_tree, augmented, 0.0), axis=[1, 2])  # [B]
    gold_score = tf.reduce_sum(margins * gold_label, axis=[1, 2, 3])  # [B]
    return tf.nn.relu(predicted - gold_score)


def tree_crf(logits, gold, words):
    """A tree CRF's loss per sentence [B] (Finkel et al., 2008; Zhang et al., 2020, the outside parser's):
    -log p(T* | x) = log Z - log Σ_{T ~ T*} exp s(T).

    logits, gold, words as ``tree_hinge``'s. A labeled binary tree scores Σ over its spans of s(i, j, l), the
    label's margin over ∅ (∅ scores 0, the root is labeled): the scores ``cky.parse`` maximises, so its tree is this
    CRF's most probable one. Labels are chosen per span, so Z sums over the binary trees with
    log φ(i, j) = log Σ_{l or ∅} exp s(i, j, l) (no ∅ at the root), by the inside algorithm (``cky.inside``). The
    gold tree is n-ary and has many binarizations, all of the same score: the second term sums over them, the inside
    algorithm again with log ψ = s(i, j, gold label) on gold constituents, 0 on spans that cross none, -1e9 on
    spans that cross one."""
    margins = cky.label_margins(logits)  # [B, N+1, N+1, L]
    n1 = tf.shape(gold)[1]
    phi = cky.crf_potentials(margins, words)  # [B, N+1, N+1]
    is_gold = gold >= FIRST_LABEL
    g = tf.cast(is_gold, tf.float32)  # [B, N+1 (a), N+1 (c)]
    fence = tf.range(n1)
    between = tf.cast((fence[:, None, None] < fence[None, :, None]) & (fence[None, :, None] < fence[None, None, :]),
                      tf.float32)  # [N+1 (i), N+1 (x), N+1 (j)]: i < x < j
    ends_after = tf.cumsum(g, axis=2, exclusive=True, reverse=True)  # [B, a, j]: gold (a, c) with c > j
    starts_before = tf.cumsum(g, axis=1, exclusive=True)  # [B, i, c]: gold (a, c) with a < i
    crossing = (tf.einsum("iaj,baj->bij", between, ends_after)  # i < a < j < c
                + tf.einsum("icj,bic->bij", between, starts_before))  # a < i < c < j
    gold_margin = tf.gather(margins, tf.maximum(gold - FIRST_LABEL, 0), batch_dims=3)  # [B, N+1, N+1]
    psi = tf.where(is_gold, gold_margin, tf.where(crossing > 0, -1e9, 0.0))
    return cky.inside(phi, words) - cky.inside(psi, words)
