"""Word alignments from the decoder's cross-attention (kt-translate --alignment; the ``align`` and
``translate_with_alignment`` signatures), in the Pharaoh format fast_align and Marian write: "i-j" pairs, source
word i aligned to target word j, both counted from 0, sorted by i then j.

    cross_attention(model, source_ids, target_ids, layer, head) -> [B, T, S] float32
    aligned_positions(attention, source_ids) -> [B, T] int32
    word_indices(pieces, real) -> [B, L] int32
    pharaoh(source_pieces, source_ids, target_pieces, target_ids, positions) -> [B] string
    alignment(model, tokenizer, source_ids, target_ids, layer, head) -> [B] string   the four together

Each target token y_t is aligned to the source token x_s that the query predicting it (the decoder reading
BOS y_1 ... y_t-1, teacher-forced: the same attention the search saw when it chose y_t) attends to most in
one cross-attention layer, its heads averaged or one head alone: the alignment Garg et al. (2019, "Jointly
Learning to Align and Translate with Transformer Models", §3-4) read from a Transformer, whose penultimate
layer they find aligns best; fairseq's --print-alignment takes the same argmax. EOS is aligned to nothing and
nothing is aligned to the source's EOS.

Subwords map to words as SentencePiece writes them: a piece that starts with "▁" (U+2581) starts a word, the
others continue it, so word indices count the whitespace-separated words of the text (``line.split()`` of the
input as the tokenizer normalizes it, and of the output). Source word i and target word j are aligned when any
subword of j is aligned to a subword of i: each target word gets at least one link, a source word may get none.
"""

from __future__ import annotations

import tensorflow as tf

from keras_transformer import EOS_ID, PAD_ID
from keras_transformer.scoring import teacher_inputs

WORD_START = "\u2581"  # SentencePiece's whitespace mark, the first character of a piece that starts a word


def cross_attention(model, source_ids, target_ids, layer, head):
    """Teacher-forced cross-attention weights of ``layer`` (an index into the decoder's layers, negative from the
    last) averaged over heads (``head`` -1) or of one head: source_ids [B, S] (EOS, PAD after), target_ids [B, T]
    (no BOS; EOS, PAD after) -> [B, T, S] float32, row t the query that predicts y_t."""
    maps = model.attention_maps(source_ids, teacher_inputs(target_ids))["cross"]  # L x [B, H, T, S]
    weights = tf.gather(tf.stack(maps), tf.math.floormod(layer, len(maps)))  # [B, H, T, S]
    weights = tf.cast(weights, tf.float32)
    chosen = tf.gather(weights, tf.maximum(head, 0), axis=1)  # [B, T, S]
    return tf.where(head < 0, tf.reduce_mean(weights, axis=1), chosen)


def aligned_positions(attention, source_ids):
    """attention [B, T, S], source_ids [B, S] -> [B, T] int32: the source position each target position attends to
    most among the source's subwords (its EOS and PAD left out)."""
    real = tf.not_equal(source_ids, PAD_ID) & tf.not_equal(source_ids, EOS_ID)  # [B, S]
    weights = tf.where(real[:, None, :], attention, -1.0)  # [B, T, S]
    # one column below every weight: an empty batch's S = 0 leaves argmax an axis to reduce
    weights = tf.pad(weights, [[0, 0], [0, 0], [0, 1]], constant_values=-2.0)  # [B, T, S + 1]
    best = tf.argmax(weights, axis=-1, output_type=tf.int32)  # [B, T]
    return tf.minimum(best, tf.maximum(tf.shape(source_ids)[1] - 1, 0))


def word_indices(pieces, real):
    """pieces [B, L] string, real [B, L] bool (the pieces of the text) -> [B, L] int32: the word each piece belongs
    to (a piece starting with "▁" starts the next word; one before any such piece is in word 0)."""
    starts = tf.strings.regex_full_match(pieces, WORD_START + ".*") & real  # [B, L]
    return tf.maximum(tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1, 0)


def pharaoh(source_pieces, source_ids, target_pieces, target_ids, positions):
    """The word alignment of each pair as one Pharaoh string "i-j i-j ..." ("" when the target has no word).

    source_pieces [B, S] / target_pieces [B, T] string: the subwords of source_ids / target_ids; positions [B, T]
    int32 (``aligned_positions``) -> [B] string, the pairs unique and sorted by source word, then target word.
    """
    source_real = tf.not_equal(source_ids, PAD_ID) & tf.not_equal(source_ids, EOS_ID)  # [B, S]
    target_real = tf.not_equal(target_ids, PAD_ID) & tf.not_equal(target_ids, EOS_ID)  # [B, T]
    source_words = tf.gather(word_indices(source_pieces, source_real), positions, batch_dims=1)  # [B, T]
    target_words = word_indices(target_pieces, target_real)  # [B, T]
    width = tf.shape(target_ids)[1] + 1  # more than any target word index: (i, j) <-> i * width + j
    last = tf.int32.max  # sorts after every pair: a position that is no target word
    keys = tf.sort(tf.where(target_real, source_words * width + target_words, last), axis=1)  # [B, T]
    previous = tf.pad(keys[:, :-1], [[0, 0], [1, 0]], constant_values=-1)  # [B, T]
    kept = tf.not_equal(keys, last) & tf.not_equal(keys, previous)  # [B, T]: each pair once
    pairs = tf.strings.as_string(keys // width) + "-" + tf.strings.as_string(keys % width)  # [B, T]
    return tf.strings.reduce_join(tf.ragged.boolean_mask(pairs, kept), axis=1, separator=" ")  # [B]


def alignment(model, tokenizer, source_ids, target_ids, layer, head):
    """The Pharaoh word alignment [B] string of source_ids [B, S] and target_ids [B, T] (as ``cross_attention``'s),
    the subwords' strings from ``tokenizer`` (a shared one, or a pair: its source and target sides)."""
    positions = aligned_positions(cross_attention(model, source_ids, target_ids, layer, head), source_ids)
    return pharaoh(tokenizer.source.id_to_piece(source_ids), source_ids, tokenizer.target.id_to_piece(target_ids),
                   target_ids, positions)
