"""The hybrid search (a shrinking loop around an XLA-compiled step) against ``beam_search``: the same sequences,
the same scores, with rows compacted and the cache grown while items search."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import beam_search, translate_ids
from keras_transformer.decoding import hybrid_beam_search as hybrid
from tests.decoding import tables
from tests.decoding.tables import GARDEN_PATH, NEVER_EOS, table_step_fn


@pytest.mark.parametrize("table, k, max_lengths, alpha, n, stop_rule", [
    (GARDEN_PATH, 2, [10, 3, 0], 0.0, 2, "exact"),  # an item allowed no token: the start state; 3 -> 4 rows
    (GARDEN_PATH, 1, [10, 1, 10, 10, 2], 0.6, 1, "exact"),  # 5 items in 8 rows
    (NEVER_EOS, 3, [3, 6, 1], 0.6, 3, "exact"),  # per-item maximum lengths, fallback to alive beams
    (tables.DIP, 2, [8, 8], 2.0, 1, "exact"),
    (tables.DIP, 2, [8, 3], 2.0, 1, "heuristic"),
])
def test_hand_made_tables_give_beam_search_results(table, k, max_lengths, alpha, n, stop_rule):
    step_fn = table_step_fn(table)
    cache = {"x": tf.zeros([len(max_lengths) * k, 1])}
    want = tf.function(lambda: beam_search(step_fn, cache, k, tf.constant(max_lengths), alpha, num_hypotheses=n,
                                           stop_rule=stop_rule))()
    got = tf.function(lambda: hybrid.hybrid_beam_search(step_fn, cache, k, tf.constant(max_lengths), alpha,
                                                        num_hypotheses=n, stop_rule=stop_rule, positions=2,
                                                        grow_cache=lambda c, t: c))()
    assert int(got.num_steps) == int(want.num_steps)
    np.testing.assert_array_equal(got.sequences, want.sequences)
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-6)


def test_rows_for():
    assert [int(hybrid.rows_for(n)) for n in (0, 1, 2, 3, 4, 5, 17, 32, 33)] == [0, 1, 2, 4, 4, 8, 32, 32, 64]


# The compiled step reads the encoder's keys/values padded (masked) to source_positions: the same results for every
# source with a token (the tools always send EOS). An all-PAD source (row 3) attends evenly over every position, so
# its result depends on the padding: it is searched unpadded (source_positions 12 = S).
@pytest.mark.parametrize(
        "beam_size, alpha, extra_length, rows, n, stop_rule, positions, first_positions, jit_compile", [
    (4, 0.6, 6, [0, 1, 2, 4], 4, "exact", 16, 16, True),
    (4, 0.6, 6, [0, 1, 2, 3, 4], 4, "exact", 12, 16, True),
    (4, 0.6, 10, [0, 1, 2, 4], 4, "exact", 16, 2, True),  # the cache grown 2 -> 4 -> 8 -> 16 -> 32
    (4, 0.6, 10, [0, 1, 2, 3, 4], 4, "exact", 12, 2, False),  # the same loop, the step not compiled
    (1, 0.0, 5, [0, 1, 2, 3, 4], 1, "exact", 12, 4, True),
    (4, 1.2, 10, [2, 3, 4], 1, "exact", 12, 4, True),
    (4, 0.0, 3, [0], 4, "exact", 16, 16, True),
    (4, 1.2, 10, [0, 1, 2, 4], 1, "heuristic", 16, 4, True),
])
def test_model_search_equals_beam_search(eos_prone, sources, beam_size, alpha, extra_length, rows, n, stop_rule,
                                         positions, first_positions, jit_compile):
    src = sources[rows]
    want_seq, want_scores = translate_ids(eos_prone, src, beam_size, alpha, extra_length, num_hypotheses=n,
                                          stop_rule=stop_rule)
    got_seq, got_scores = hybrid.translate_ids(eos_prone, src, beam_size, alpha, extra_length, num_hypotheses=n,
                                               stop_rule=stop_rule, source_positions=positions,
                                               first_positions=first_positions, jit_compile=jit_compile)
    np.testing.assert_array_equal(got_seq, want_seq)
    np.testing.assert_allclose(got_scores, want_scores, atol=1e-5)
