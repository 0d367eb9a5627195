"""Explicit attention masks: boolean, True where a query may attend to a key.

Shapes broadcast to [B, H, T, S] in ``scaled_dot_product_attention``.
"""

from keras import ops

from keras_transformer import EOS_ID, PAD_ID


def padding_mask(ids):
    """ids [B, S] -> [B, 1, 1, S]: keys that are real tokens (not padding)."""
    return ops.not_equal(ids, PAD_ID)[:, None, None, :]


def causal_mask(length):
    """[1, 1, T, T]: position i attends to positions <= i (§3.2.3, "prevent leftward information flow")."""
    i = ops.arange(length)[:, None]
    j = ops.arange(length)[None, :]
    return ops.greater_equal(i, j)[None, None, :, :]


def decoder_self_mask(target_ids):
    """target_ids [B, T] -> [B, 1, T, T]: causal and not padding."""
    return ops.logical_and(causal_mask(ops.shape(target_ids)[1]), padding_mask(target_ids))



def text_pieces(ids):
    """ids [B, S] -> [B, S] bool: the sentence's pieces (not PAD, not EOS)."""
    return ops.logical_and(ops.not_equal(ids, PAD_ID), ops.not_equal(ids, EOS_ID))
