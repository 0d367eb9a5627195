"""A batch dealt to parallel searches: the same results as one search, in the batch's order, in P loops."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import EOS_ID, PAD_ID
from keras_transformer.decoding import model_step, translate_ids
from keras_transformer.decoding.parallel import in_parallel

K = 3


def fake_search(source_ids):
    """Item i of source_ids [B', S] -> K hypotheses of length (its first id) filled with that id, EOS last; scores
    -id. T' is the longest of the part, so parts differ in T."""
    first = source_ids[:, 0]  # [B']
    steps = tf.reduce_max(tf.concat([first, [0]], 0))
    positions = tf.range(steps)[None, None, :]  # [1, 1, T']
    length = first[:, None, None]  # [B', 1, 1]
    sequences = tf.where(positions < length - 1, length, tf.where(positions == length - 1, EOS_ID, PAD_ID))
    sequences = tf.tile(sequences, [1, K, 1])  # [B', K, T']
    return sequences, tf.tile(-tf.cast(first, tf.float32)[:, None], [1, K])  # [B', K]


@pytest.mark.parametrize("parts", [1, 2, 3, 7])
def test_parts_give_the_one_search_result_in_batch_order(parts):
    source_ids = tf.constant([[5, 9], [2, 9], [8, 9], [3, 9], [6, 9]])  # [5, 2]; lengths 5, 2, 8, 3, 6
    expected_sequences, expected_scores = fake_search(source_ids)
    fn = tf.function(lambda x: in_parallel(fake_search, x, parts))  # as in use: inside a traced function
    sequences, scores = fn(source_ids)
    np.testing.assert_array_equal(sequences, expected_sequences)  # T = 8, the longest part's, PAD-padded
    np.testing.assert_array_equal(scores, expected_scores)
    assert sequences.shape == (5, K, 8)


def test_items_are_dealt_round_robin():
    seen = []

    def recording_search(source_ids):
        seen.append(source_ids)
        return fake_search(source_ids)

    in_parallel(recording_search, tf.constant([[5, 1], [2, 2], [8, 3], [3, 4], [6, 5]]), 2)  # eagerly
    assert [part[:, 1].numpy().tolist() for part in seen] == [[1, 3, 5], [2, 4]]  # item i in part i mod 2


@pytest.fixture(scope="module")
def sources():
    src = np.random.default_rng(3).integers(4, 50, (5, 10)).astype(np.int32)
    for row, length in enumerate([10, 3, 7, 1, 5]):
        src[row, length:] = PAD_ID
    return src


@pytest.mark.parametrize("parts", [2, 6])  # the export's 2 (parts of 3 and 2 items); 6: one part empty
def test_parallel_searches_translate_as_one_search(model, sources, parts):
    sequences, scores = translate_ids(model, sources, 4, 0.6, 6)
    parallel_sequences, parallel_scores = translate_ids(model, sources, 4, 0.6, 6, parallel_searches=parts)
    np.testing.assert_array_equal(parallel_sequences, sequences)
    # Equal up to float rounding: the matmuls round by a batch's row count, as between any two batches.
    np.testing.assert_allclose(parallel_scores, scores, atol=1e-5)


def test_the_graph_holds_one_loop_per_search(model, sources):
    translate_ids(model, sources, 4, 0.6, 6, parallel_searches=6)  # traced by the test above
    compiled = model_step.compiled_for(model, "beam_search/6/exact", None, None)
    graph = compiled.get_concrete_function(*[tf.TensorSpec(s.shape, s.dtype) for s in compiled.input_signature]).graph
    loops = [op for op in graph.get_operations() if op.type in ("While", "StatelessWhile")]
    assert len(loops) == 6  # the searches' loops, independent of one another


def test_parallel_searches_must_be_positive(model, sources):
    with pytest.raises(ValueError, match="parallel_searches: 0; expected >= 1"):
        translate_ids(model, sources, 4, 0.6, 6, parallel_searches=0)


@pytest.mark.parametrize("env, expected", [({}, "1"), ({"TF_NUM_INTRAOP_THREADS": "3"}, "0")])
def test_a_decoding_process_runs_each_op_on_one_thread(env, expected):
    """Intra-op parallelism 1, unless TF_NUM_INTRAOP_THREADS sets it (then left unset: 0, TensorFlow reads it)."""
    code = ("from keras_transformer.tf_setup import init_devices; init_devices(decoding=True); "
            "import tensorflow as tf; print(tf.config.threading.get_intra_op_parallelism_threads())")
    environment = {k: v for k, v in os.environ.items() if k != "TF_NUM_INTRAOP_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], env={**environment, **env}, capture_output=True, text=True,
                         check=True).stdout
    assert out.split()[-1] == expected
