"""A batch dealt to P independent searches that TensorFlow runs at the same time.

    in_parallel(search, source_ids [B, S], parts=P) -> (sequences [B, K, T] int32, scores [B, K] float32)

Every item's search is independent of the other items of its batch (its own
beams, cache rows, maximum length and stop), so a batch can be cut into parts
searched separately with the same result for every item. Item i goes to part
i mod P (a batch sorted by length gives every part a like share of long and
short items); each part is its own ``tf.while_loop``, so the graph holds P
loops with no edge between them and TensorFlow's inter-op threads run them at
once. Results come back in the batch's order, the shorter parts' sequences
PAD-padded to the longest part's T (the T one search of the whole batch has:
the steps its slowest item ran).

Why: a decoder step is hundreds of small ops on [B*K, D] tensors, too small for
intra-op threads to share without losing more to handing work over than they
gain (on the 2-core benchmark machine, 2 intra-op threads decode a batch of 32
slower than 1). Two searches of 16 items on one thread each keep both cores
busy (docs/benchmarks.md). Serve such an export with
intra-op parallelism 1 and inter-op parallelism >= P (TF Serving:
``--tensorflow_intra_op_parallelism=1 --tensorflow_inter_op_parallelism=P``).
"""

from __future__ import annotations

import tensorflow as tf

from keras_transformer import PAD_ID


def in_parallel(search, source_ids, parts: int, *per_item):
    """``search(source_ids [B', S], *per_item [B', ...]) -> (sequences [B', K, T'], scores [B', K])`` over P =
    ``parts`` shares of the batch (item i in share i mod P; a share may be empty; ``per_item``: more inputs with a
    row per item, dealt with it), merged back in order: ([B, K, T], [B, K])."""
    if parts < 1:
        raise ValueError(f"parallel_searches: {parts}; expected >= 1")
    if parts == 1:
        return search(source_ids, *per_item)
    items = tf.range(tf.shape(source_ids)[0])  # [B]
    shares = tf.dynamic_partition(items, items % parts, parts)  # P x [B_p] item indices, ascending
    results = [search(*(tf.gather(x, share) for x in (source_ids, *per_item)))
               for share in shares]  # P x ([B_p, K, T_p], [B_p, K])
    steps = tf.reduce_max(tf.stack([tf.shape(sequences)[2] for sequences, _ in results]))  # T = max T_p
    padded = [tf.pad(sequences, [[0, 0], [0, 0], [0, steps - tf.shape(sequences)[2]]], constant_values=PAD_ID)
              for sequences, _ in results]
    return tf.dynamic_stitch(shares, padded), tf.dynamic_stitch(shares, [scores for _, scores in results])
