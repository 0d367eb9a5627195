"""Beam search and greedy decoding: hand-made log-prob tables with known answers, and a tiny Transformer."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import BOS_ID, EOS_ID, PAD_ID
from keras_transformer.decoding import (NEG_INF, beam_search, greedy_search, greedy_translate_ids, length_penalty,
                                        translate_ids)
from keras_transformer.decoding import model_step
from keras_transformer.decoding.log_probs import top_k_by_blocks
from tests.decoding import tables
from tests.decoding.tables import GARDEN_PATH, A, B_, C, V, table_step_fn


def run(step_fn, beam_size, max_lengths, alpha):
    """The search in graph mode (as in use), with a dummy per-beam cache."""
    cache = {"x": tf.zeros([len(max_lengths) * beam_size, 1])}
    result = tf.function(lambda: beam_search(step_fn, cache, beam_size, tf.constant(max_lengths), alpha))()
    return result.sequences.numpy(), result.scores.numpy(), int(result.num_steps)


def test_source_lengths_count_every_token_but_pad():
    source_ids = tf.constant([[5, 6, EOS_ID, PAD_ID], [EOS_ID, PAD_ID, PAD_ID, PAD_ID], [4, 5, 6, EOS_ID]])  # [3, 4]
    np.testing.assert_array_equal(model_step.source_lengths(source_ids), [3, 1, 4])
    # Each item may emit its source tokens + extra_length, at most the model's max_length (§6.1).
    np.testing.assert_array_equal(model_step.max_output_lengths(source_ids, 2, 5), [5, 3, 5])


def test_length_penalty_is_gnmt():
    np.testing.assert_allclose(length_penalty([1, 7, 3], 0.6), [1.0, 2.0**0.6, (8 / 6) ** 0.6], rtol=1e-6)
    np.testing.assert_allclose(length_penalty([4, 50], 0.0), [1.0, 1.0])


def test_beam_finds_the_best_sequence_greedy_misses():
    sequences, scores, steps = run(table_step_fn(GARDEN_PATH), beam_size=2, max_lengths=[10], alpha=0.0)
    np.testing.assert_array_equal(sequences[0], [[B_, EOS_ID], [A, EOS_ID]])  # n-best, best first
    np.testing.assert_allclose(scores[0], np.log([0.4 * 0.9, 0.6 * 0.4]), rtol=1e-6)
    # Both beams finished at step 1; the alive ones (A A, A B: log 0.18) cannot beat log 0.24: stop after 2 steps.
    assert steps == 2
    greedy = greedy_search(table_step_fn(GARDEN_PATH), {}, tf.constant([10]))
    np.testing.assert_array_equal(greedy.sequences[0, 0], [A, EOS_ID])
    np.testing.assert_allclose(greedy.scores[0, 0], np.log(0.24), rtol=1e-6)
    # Beam size 1 is greedy: A EOS finishes as the argmax; the alive A A (log 0.18) cannot beat it.
    sequences, scores, steps = run(table_step_fn(GARDEN_PATH), beam_size=1, max_lengths=[10], alpha=0.0)
    np.testing.assert_array_equal(sequences[0], greedy.sequences[0])
    np.testing.assert_allclose(scores[0], greedy.scores[0], rtol=1e-6)
    assert steps == int(greedy.num_steps) == 2


# Short: EOS at once, P = 0.5. Long: A B EOS, P = 0.5 * 0.95 * 0.95 = 0.45125.
SHORT_OR_LONG = {BOS_ID: {EOS_ID: 0.5, A: 0.5}, A: {B_: 0.95}, B_: {EOS_ID: 0.95}}


def test_length_penalty_changes_the_winner():
    short = np.log(0.5) / 1.0  # lp(1) = 1 for every alpha
    long = {alpha: np.log(0.5 * 0.95 * 0.95) / ((5 + 3) / 6) ** alpha for alpha in (0.0, 1.0)}
    assert short > long[0.0] and short < long[1.0]  # -0.693 vs -0.796 (alpha 0), -0.597 (alpha 1)

    sequences, scores, steps = run(table_step_fn(SHORT_OR_LONG), beam_size=2, max_lengths=[8], alpha=1.0)
    np.testing.assert_array_equal(sequences[0], [[A, B_, EOS_ID], [EOS_ID, PAD_ID, PAD_ID]])
    np.testing.assert_allclose(scores[0], [long[1.0], short], rtol=1e-5)

    # alpha = 0: EOS (log 0.5) wins; the search goes on until the second n-best slot holds A B EOS (log 0.45),
    # and no alive beam can beat either.
    sequences, scores, steps = run(table_step_fn(SHORT_OR_LONG), beam_size=2, max_lengths=[8], alpha=0.0)
    assert steps == 3
    np.testing.assert_array_equal(sequences[0], [[EOS_ID, PAD_ID, PAD_ID], [A, B_, EOS_ID]])
    np.testing.assert_allclose(scores[0], [short, long[0.0]], rtol=1e-5)


def test_the_best_alone_is_settled_in_fewer_steps():
    """num_hypotheses N = 1: the search stops once no alive beam can beat the best finished hypothesis."""
    def run_n(n):
        cache = {"x": tf.zeros([2, 1])}
        result = tf.function(lambda: beam_search(table_step_fn(SHORT_OR_LONG), cache, 2, tf.constant([8]), 0.0,
                                                 num_hypotheses=n))()
        return result.sequences.numpy(), result.scores.numpy(), int(result.num_steps)

    full, full_scores, full_steps = run_n(2)
    best, best_scores, best_steps = run_n(1)
    # After step 1 the alive A B (log 0.475) cannot beat EOS (log 0.5): the best is settled, 2 steps, not 3.
    assert (full_steps, best_steps) == (3, 2)
    assert strip(best[0, 0]) == strip(full[0, 0]) == [EOS_ID]
    np.testing.assert_allclose(best_scores[0, 0], full_scores[0, 0], rtol=1e-6)
    np.testing.assert_allclose(best_scores[0, 1], NEG_INF)  # A B EOS had not finished: an empty slot


def test_step_0_runs_one_row_per_item_and_every_beam_takes_its_items_cache_row():
    """Step 0 decodes B' rows (the K beams would all read BOS from the same state), later steps B'*K; the cache
    at step 1 holds each item's row K times. Items allowed no token are not searched at all."""
    seen = tf.Variable(tf.fill([10, 4], -1))  # [step, row]: the cache's item of each row the step decoded

    def step_fn(token_ids, step, cache, constants):
        seen.scatter_nd_update([[step]], tf.pad(cache["item"], [[0, 4 - tf.shape(cache["item"])[0]]],
                                                constant_values=-1)[None])
        return table_step_fn(GARDEN_PATH)(token_ids, step, cache, constants)

    cache = {"item": tf.repeat(tf.range(3), 2)}  # [B*K]: each beam's item
    result = tf.function(lambda: beam_search(step_fn, cache, 2, tf.constant([10, 0, 10]), 0.0))()
    np.testing.assert_array_equal(seen[:2], [[0, 2, -1, -1], [0, 0, 2, 2]])
    np.testing.assert_array_equal(result.sequences[0], [[B_, EOS_ID], [A, EOS_ID]])
    np.testing.assert_array_equal(result.sequences[1], 0)


def test_the_heuristic_rule_stops_sooner_and_can_miss_the_best():
    """stop_rule "heuristic" scores the alive beams as if they ended at this step: after step 0 the alive A looks
    worse than EOS and the search stops. The exact rule bounds A by log 0.49 / lp(8) and goes on to the better
    A B C EOS (tables.DIP)."""
    def run_rule(stop_rule):
        cache = {"x": tf.zeros([2, 1])}
        result = tf.function(lambda: beam_search(table_step_fn(tables.DIP), cache, 2, tf.constant([8]), 2.0,
                                                 num_hypotheses=1, stop_rule=stop_rule))()
        return strip(result.sequences[0, 0]), float(result.scores[0, 0]), int(result.num_steps)

    assert run_rule("exact") == ([A, B_, C, EOS_ID], pytest.approx(np.log(0.49 * 0.6 * 0.999**2) / 1.5**2), 4)
    assert run_rule("heuristic") == ([EOS_ID], pytest.approx(np.log(0.5)), 1)
    with pytest.raises(ValueError, match="stop_rule: 'soon'; expected one of exact, heuristic"):
        run_rule("soon")


def test_an_item_that_reaches_its_maximum_length_keeps_empty_slots():
    sequences, scores, steps = run(table_step_fn(SHORT_OR_LONG), beam_size=2, max_lengths=[2], alpha=0.0)
    assert steps == 2
    np.testing.assert_array_equal(sequences[0], [[EOS_ID, PAD_ID], [PAD_ID, PAD_ID]])  # A B EOS needs 3 tokens
    np.testing.assert_allclose(scores[0], [np.log(0.5), NEG_INF], rtol=1e-5)


def test_early_stop_when_every_beam_emits_eos():
    def step_fn(token_ids, step, cache, constants):  # uniform over A, B, C for two steps, then EOS for sure
        row = tf.where(step < 2, tf.constant(np.log([1e-9] * 4 + [1 / 3] * 3), tf.float32),
                       tf.constant(np.log([1e-9] * 3 + [1.0] + [1e-9] * 3), tf.float32))
        return tf.tile(row[None, :], [tf.shape(token_ids)[0], 1]), cache

    sequences, scores, steps = run(step_fn, beam_size=4, max_lengths=[20, 30], alpha=0.6)
    assert steps == 3 and sequences.shape == (2, 4, 3)
    assert (sequences[:, :, 2] == EOS_ID).all() and (sequences[:, :, :2] >= A).all()
    assert len({tuple(s) for s in sequences[0]}) == 4  # four distinct hypotheses
    np.testing.assert_allclose(scores, np.full((2, 4), 2 * np.log(1 / 3) / (8 / 6) ** 0.6), rtol=1e-5)


def test_per_item_max_length_and_fallback_to_alive():
    never_eos = table_step_fn({prev: {A: 0.7, B_: 0.2, C: 0.1} for prev in range(V)})
    sequences, scores, steps = run(never_eos, beam_size=3, max_lengths=[3, 6], alpha=0.6)
    assert steps == 6 and not (sequences == EOS_ID).any()
    np.testing.assert_array_equal(sequences[0, 0], [A, A, A, PAD_ID, PAD_ID, PAD_ID])  # stopped at its own limit
    np.testing.assert_array_equal(sequences[1, 0], [A] * 6)
    np.testing.assert_allclose(scores[:, 0], [3 * np.log(0.7) / (8 / 6) ** 0.6, 6 * np.log(0.7) / (11 / 6) ** 0.6],
                               rtol=1e-5)
    np.testing.assert_allclose(scores[0, 1], (2 * np.log(0.7) + np.log(0.2)) / (8 / 6) ** 0.6, rtol=1e-5)


@pytest.mark.parametrize("v, k", [(8000, 8), (640, 8), (576, 9), (576, 8), (37, 8), (8000, 1)])
def test_top_k_by_blocks_equals_top_k_with_its_ties(v, k):
    """Values and indices as tf.math.top_k, ties to the lower index: few distinct values (ties across blocks),
    a row of one value, a row of banned tokens; blocked (V = 8000, 640, 576 with k < 9 blocks) or plain."""
    rng = np.random.default_rng(v + k)
    x = rng.integers(-6, 0, (5, v)).astype(np.float32)  # six values: every top-k ends in a tie
    x[1] = -1.0
    x[2, ::3] = NEG_INF
    x[3] = rng.normal(size=v)
    want = tf.math.top_k(x, k=k)
    for got in (top_k_by_blocks(tf.constant(x), k),
                tf.function(lambda x: top_k_by_blocks(x, tf.constant(k)))(tf.constant(x))):
        np.testing.assert_array_equal(got[0].numpy(), want.values.numpy())
        np.testing.assert_array_equal(got[1].numpy(), want.indices.numpy())


# -- a real tiny Transformer -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sources():
    src = np.random.default_rng(0).integers(4, 50, (3, 12)).astype(np.int32)
    src[0, 2:] = PAD_ID  # very different lengths: 2, 12, 7
    src[2, 7:] = PAD_ID
    return src


def strip(sequence):
    return [int(t) for t in sequence if t != PAD_ID]


@pytest.fixture(params=["random", "eos_prone"])
def variant(request, model, sources):
    """The random model rarely ends a sentence; "eos_prone" adds 0.12 x the embeddings of the tokens it favours
    to EOS's (the tied softmax, §3.4), so that some items finish (at once) and others fall back to alive beams."""
    if request.param == "random":
        yield request.param
        return
    with tables.eos_prone(model, sources):
        yield request.param


def check_coverage(variant, sequences):
    finished = (np.asarray(sequences) == EOS_ID).any(axis=(1, 2))  # [B]
    if variant == "eos_prone":  # otherwise the checks below would miss the finished and the mixed paths
        assert finished.any() and not finished.all(), "the eos_prone model no longer mixes finished/unfinished"


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.2])
def test_the_best_alone_equals_the_best_of_the_full_n_best(model, sources, variant, alpha):
    sequences, scores = (x.numpy() for x in translate_ids(model, sources, 4, alpha, 6))
    best, best_scores = (x.numpy() for x in translate_ids(model, sources, 4, alpha, 6, num_hypotheses=1))
    check_coverage(variant, sequences)
    assert best.shape[2] <= sequences.shape[2]
    assert [strip(s) for s in best[:, 0]] == [strip(s) for s in sequences[:, 0]]
    # Equal up to float rounding: the best-only search drops an input once its best is final, so its later steps
    # run on fewer rows, and the matmuls round by a batch's row count (1 ulp on an AVX-512 CPU).
    np.testing.assert_allclose(best_scores[:, 0], scores[:, 0], rtol=1e-6, atol=1e-5)


def test_beam_size_1_with_alpha_0_equals_greedy(model, sources):
    beam, beam_scores = translate_ids(model, sources, beam_size=1, alpha=0.0, extra_length=6)
    greedy, greedy_scores = greedy_translate_ids(model, sources, alpha=0.0, extra_length=6)
    np.testing.assert_array_equal(beam, greedy)
    np.testing.assert_allclose(beam_scores, greedy_scores, rtol=1e-6)
    assert beam.shape == (3, 1, 12 + 6)


def full_pass_scores(model, source, hypotheses, alpha):
    """Score hypotheses [N, T] of one source with the full teacher-forced pass: sum log P / lp."""
    lengths = (hypotheses != PAD_ID).sum(axis=1)  # EOS included; PAD and BOS are never generated
    target_in = np.concatenate([np.full((len(hypotheses), 1), BOS_ID), hypotheses[:, :-1]], axis=1)
    log_probs = tf.nn.log_softmax(model((np.repeat(source[None], len(hypotheses), 0), target_in))).numpy()
    token_log_probs = np.take_along_axis(log_probs, hypotheses[:, :, None], axis=2)[:, :, 0]  # [N, T]
    log_p = np.where(hypotheses != PAD_ID, token_log_probs, 0.0).sum(axis=1)
    return log_p / ((5 + lengths) / 6) ** alpha


def test_scores_equal_the_full_teacher_forced_pass(model, sources, variant):
    sequences, scores = (x.numpy() for x in translate_ids(model, sources, beam_size=4, alpha=0.6, extra_length=6))
    check_coverage(variant, sequences)
    assert (scores[:, :-1] >= scores[:, 1:]).all()  # best first
    for b in range(len(sources)):
        real = scores[b] > -1e8  # filled n-best slots
        np.testing.assert_allclose(full_pass_scores(model, sources[b], sequences[b][real], 0.6), scores[b][real],
                                   atol=1e-4)


@pytest.mark.filterwarnings("ignore:You are using a softmax over axis -1")  # the one-token prefix at step 0
def test_cached_search_equals_search_over_the_redecoding_baseline(model, sources):
    """The same search over the no-cache step function (the whole prefix re-decoded at each step)."""
    sources = sources[[0, 2], :7]  # lengths 2 and 7: a short eager loop
    sequences, scores = translate_ids(model, sources, beam_size=4, alpha=0.6, extra_length=4)
    max_lengths = model_step.max_output_lengths(sources, 4, 128)
    step_fn, cache, constants = model_step.redecode_step_fn(model, sources, 4, int(tf.reduce_max(max_lengths)))
    uncached = beam_search(step_fn, cache, 4, max_lengths, 0.6, constants)  # eagerly: the loop runs in Python
    np.testing.assert_array_equal(uncached.sequences, sequences)
    np.testing.assert_allclose(uncached.scores, scores, atol=1e-4)


def test_items_decode_the_same_alone_as_in_a_batch(model, sources, variant):
    sequences, scores = translate_ids(model, sources, beam_size=4, alpha=0.6, extra_length=5)
    check_coverage(variant, sequences)
    for b in range(len(sources)):
        alone = sources[b:b + 1, : max(1, int((sources[b] != PAD_ID).sum()))]  # no source padding
        seq_b, scores_b = translate_ids(model, alone, beam_size=4, alpha=0.6, extra_length=5)
        assert [strip(s) for s in seq_b[0]] == [strip(s) for s in sequences[b]]
        np.testing.assert_allclose(scores_b[0], scores[b], atol=1e-4)


class Translator(tf.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32),
                                  tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.int32)])
    def translate(self, source_ids, beam_size, alpha, extra_length):
        sequences, scores = translate_ids(self.model, source_ids, beam_size, alpha, extra_length)
        return {"sequences": sequences, "scores": scores}


def test_search_traces_once_for_every_batch_size_length_and_beam(model, sources):
    translate_ids(model, sources, 4, 0.6, 4)
    compiled = model_step.compiled_for(model, "beam_search/1/exact", None, None)  # the per-model tf.function
    traces = compiled.experimental_get_tracing_count()
    assert traces >= 1  # the function the search ran
    translate_ids(model, sources[1:, :9], 2, 0.0, 3)
    translate_ids(model, sources[:1], 5, 1.0, 7)
    assert compiled.experimental_get_tracing_count() == traces


def test_saved_model_reloads_with_the_same_output(model, sources, tmp_path):
    module = Translator(model)
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": module.translate})
    serve = tf.saved_model.load(str(tmp_path)).signatures["serving_default"]
    for src, k in ((sources, 4), (sources[1:, :9], 2)):  # another batch size, source length and beam size
        expected_seq, expected_scores = translate_ids(model, src, k, 0.6, 4)
        out = serve(source_ids=tf.constant(src), beam_size=tf.constant(k), alpha=tf.constant(0.6),
                    extra_length=tf.constant(4))
        np.testing.assert_array_equal(out["sequences"], expected_seq)
        np.testing.assert_allclose(out["scores"], expected_scores, atol=1e-5)
    assert module.translate.experimental_get_tracing_count() == 1
