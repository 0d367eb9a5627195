"""The static-shape search (XLA) against ``beam_search``: the same sequences, the same scores."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import EOS_ID, PAD_ID
from keras_transformer.decoding import beam_search, model_step, translate_ids
from keras_transformer.decoding import static_beam_search as static
from tests.decoding import tables
from tests.decoding.tables import GARDEN_PATH, NEVER_EOS, table_step_fn




@pytest.mark.parametrize("segments", [None, (1, 2, 4, 12)])  # one loop; loops of 1, 1, 2 and 8 steps
@pytest.mark.parametrize("table, k, max_lengths, alpha, n, stop_rule", [
    (GARDEN_PATH, 2, [10, 3, 0], 0.0, 2, "exact"),  # stops after 2 steps; an item allowed no token: start state
    (GARDEN_PATH, 2, [10, 3], 0.0, 1, "exact"),  # the best alone
    (GARDEN_PATH, 1, [10, 1], 0.6, 1, "exact"),
    (NEVER_EOS, 3, [3, 6], 0.6, 3, "exact"),  # per-item maximum lengths, fallback to alive beams
    (tables.DIP, 2, [8, 8], 2.0, 1, "exact"),  # 4 steps
    (tables.DIP, 2, [8, 3], 2.0, 1, "heuristic"),  # 1 step
])
def test_hand_made_tables_give_beam_search_results_under_xla(table, k, max_lengths, alpha, n, stop_rule, segments):
    step_fn, t_max = table_step_fn(table), 12
    cache = {"x": tf.zeros([len(max_lengths) * k, 1])}
    want = tf.function(lambda: beam_search(step_fn, cache, k, tf.constant(max_lengths), alpha, num_hypotheses=n,
                                           stop_rule=stop_rule))()
    got = tf.function(lambda: static.static_beam_search(step_fn, cache, k, tf.constant(max_lengths), alpha, t_max,
                                                        segments=segments, grow_cache=lambda c, t: c,
                                                        num_hypotheses=n, stop_rule=stop_rule),
                      jit_compile=True)()
    steps = int(want.num_steps)
    assert int(got.num_steps) == steps and got.sequences.shape == (len(max_lengths), k, t_max)
    np.testing.assert_array_equal(got.sequences[:, :, :steps], want.sequences)
    assert (got.sequences.numpy()[:, :, steps:] == PAD_ID).all()
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-6)


@pytest.mark.filterwarnings("ignore:You are using a softmax over axis -1")  # one position at step 0
def test_self_attention_on_a_preallocated_cache_equals_the_growing_one(model):
    attention = model.decoder.blocks[0].self_attention
    x = tf.random.stateless_normal([5, 6, 16], seed=[1, 2])  # [N, steps, D]
    k = v = tf.zeros([6, 2, 0, 8])[:5]  # [N, H, 0, d]
    k_fixed = v_fixed = tf.zeros([5, 2, 9, 8])  # [N, H, T_max, d]
    for step in range(6):
        out, k, v = attention.self_attend_step(x[:, step], k, v)
        out_fixed, k_fixed, v_fixed = attention.self_attend_at(x[:, step], k_fixed, v_fixed, step)
        np.testing.assert_allclose(out_fixed, out, atol=1e-6)
        np.testing.assert_array_equal(k_fixed[:, :, : step + 1], k)
        assert (k_fixed.numpy()[:, :, step + 1:] == 0).all()


@pytest.mark.parametrize("beam_size, alpha, extra_length, rows, n, jit_compile, stop_rule", [
    (4, 0.6, 6, [0, 1, 2, 3, 4], 4, True, "exact"),
    (4, 0.6, 6, [0, 1, 2, 3, 4], 4, False, "exact"),  # the same search as a plain tf.function
    (4, 0.6, 6, [0, 1, 2, 3, 4], 1, True, "exact"),
    (1, 0.0, 5, [0, 1, 2, 3, 4], 1, True, "exact"),
    (1, 0.0, 5, [0, 1, 2, 3, 4], 1, False, "exact"),
    (4, 1.2, 10, [2, 3, 4], 4, True, "exact"),
    (4, 0.0, 3, [0], 4, True, "exact"),
    (1, 1.2, 8, [1, 4], 1, True, "exact"),
    (4, 1.2, 10, [0, 1, 2, 3, 4], 1, True, "heuristic"),
])
def test_model_search_equals_beam_search(eos_prone, sources, beam_size, alpha, extra_length, rows, n, jit_compile,
                                         stop_rule):
    src = sources[rows]
    want_seq, want_scores = translate_ids(eos_prone, src, beam_size, alpha, extra_length, num_hypotheses=n,
                                          stop_rule=stop_rule)
    got_seq, got_scores = static.translate_ids(eos_prone, src, beam_size, alpha, extra_length, jit_compile=jit_compile,
                                               num_hypotheses=n, stop_rule=stop_rule)
    np.testing.assert_array_equal(got_seq, want_seq)
    np.testing.assert_allclose(got_scores, want_scores, atol=1e-5)


@pytest.mark.parametrize("beam_size, alpha, extra_length, rows, first_segment", [
    (4, 0.6, 10, [0, 1, 2, 3, 4], 2),
    (1, 1.2, 10, [1, 4], 4),
    (4, 1.2, 10, [0], 2),
])
def test_search_in_segments_equals_beam_search(eos_prone, sources, beam_size, alpha, extra_length, rows,
                                               first_segment):
    """Cache and beam buffers grown 2 -> 4 -> 8 -> 16 -> 22 (or 4 -> 8 -> 16 -> 22) positions while items search;
    a search that ends before T_max = 22 skips the loops left."""
    src = sources[rows]
    want_seq, want_scores = translate_ids(eos_prone, src, beam_size, alpha, extra_length)
    got_seq, got_scores = static.translate_ids(eos_prone, src, beam_size, alpha, extra_length,
                                               first_segment=first_segment)
    assert first_segment < want_seq.shape[2]  # outputs cross a segment boundary
    np.testing.assert_array_equal(got_seq, want_seq)
    np.testing.assert_allclose(got_scores, want_scores, atol=1e-5)


def test_segment_sizes():
    assert static.segment_sizes(66, 16) == (16, 32, 66)
    assert static.segment_sizes(130, 16) == (16, 32, 64, 130)
    assert static.segment_sizes(98, 16) == (16, 32, 64, 98)
    assert static.segment_sizes(22, 2) == (2, 4, 8, 16, 22)
    assert static.segment_sizes(20, 16) == static.segment_sizes(20, None) == (20,)


def test_items_stop_at_different_steps(eos_prone, sources):
    """The coverage the equivalence above relies on: finished and unfinished items, different lengths."""
    sequences, _ = static.translate_ids(eos_prone, sources, 4, 0.6, 6)
    best = sequences.numpy()[:, 0]  # [B, T]
    finished = (best == EOS_ID).any(axis=1)
    assert finished.any() and not finished.all()
    assert len(set((best != PAD_ID).sum(axis=1))) >= 3


def test_xla_search_compiles_once_per_shape(model, sources):
    search = static.compiled_search(model, 4, 20, jit_compile=True)
    lengths = model_step.max_output_lengths(sources, 4, 128)
    search(sources, lengths, 0.6, 4)
    search(sources, lengths, 1.0, 1)  # a new alpha and N: no new trace, no new compilation
    assert search.experimental_get_tracing_count() == 1
