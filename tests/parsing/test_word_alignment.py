"""ParsingConfig.align_words: the decoder input gets P · memory[word k], k the leaves written so far
(tasks/parsing/model.py)."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import recipes
from keras_transformer.config import ModelConfig, ParsingConfig, Recipe
from keras_transformer.decoding import model_step
from keras_transformer.model import Transformer, build_model, count_parameters
from keras_transformer.recipe_keys import MOVED_KEYS
from keras_transformer.tasks.parsing.model import ParsingTransformer

LEAF = 7  # the target's leaf piece in these made-up tables
OPEN, CLOSE = 20, 21  # with bracket_depth: the pieces that open and close a bracket
CONFIG = ModelConfig(vocab_size=50, d_model=16, d_ff=32, num_heads=2, num_encoder_layers=2, num_decoder_layers=2,
                     dropout=0.0, max_length=64)
ALIGN = ParsingConfig(align_words=True)
SPAN = ParsingConfig(align_words=True, word_span=True)
DEPTH = ParsingConfig(align_words=True, word_span=True, bracket_depth=True)
TAGGED = ParsingConfig(align_words=True, word_span=True, tag_loss=0.5)


def _recipe(parsing):
    """ptb_sample with CONFIG's small model and ``parsing``."""
    return dataclasses.replace(recipes.get("ptb_sample"), model=CONFIG, parsing=parsing)


def _model(leaves=(LEAF,), config=ALIGN):
    model = build_model(_recipe(config))
    is_leaf = np.zeros(50, np.float32)
    is_leaf[list(leaves)] = 1
    starts = (np.arange(50) % 2 == 0).astype(np.float32)  # even pieces start a word, odd ones continue it
    depth_change = None
    if config.bracket_depth:
        depth_change = np.zeros(50, np.int32)
        depth_change[[OPEN, CLOSE]] = 1, -1
    model.set_word_tables(is_leaf, starts, depth_change)
    return model


def test_word_memory_is_the_encoder_output_at_each_words_first_piece():
    model = _model()
    source = np.array([[10, 11, 12, 14, 15, 3, 0], [20, 3, 0, 0, 0, 0, 0]], np.int32)  # words start at 10, 12, 14
    memory = model.encode(source)
    words = np.asarray(model.word_memory(source, memory))
    np.testing.assert_allclose(words[0, :3], np.asarray(memory)[0, [0, 2, 3]], atol=1e-6)
    np.testing.assert_array_equal(words[0, 3:], 0)  # past the last word; EOS (3) and PAD start none
    np.testing.assert_allclose(words[1, 0], np.asarray(memory)[1, 0], atol=1e-6)
    np.testing.assert_array_equal(words[1, 1:], 0)


def test_word_span_adds_the_last_pieces_of_the_word_and_of_the_one_before():
    model = _model(config=SPAN)
    source = np.array([[10, 11, 12, 14, 15, 17, 3, 0]], np.int32)  # words: 10 11 | 12 | 14 15 17, then EOS
    memory = np.asarray(model.encode(source))[0]
    words = np.asarray(model.word_memory(source, memory[None]))[0]  # [S, 3D]
    first, last, before = words[:, :16], words[:, 16:32], words[:, 32:]
    np.testing.assert_allclose(first[:3], memory[[0, 2, 3]], atol=1e-6)
    np.testing.assert_allclose(last[:3], memory[[1, 2, 5]], atol=1e-6)
    np.testing.assert_array_equal(before[0], 0)  # nothing before the first word
    np.testing.assert_allclose(before[1:4], memory[[1, 2, 5]], atol=1e-6)  # row 3: after the last word
    np.testing.assert_array_equal(words[4:], 0)
    np.testing.assert_array_equal(last[3], 0)


def test_cached_steps_equal_the_full_pass_with_word_span():
    _cached_steps_equal_the_full_pass(_model(config=SPAN))


def test_word_span_needs_align_words():
    with pytest.raises(ValueError, match="word_span: needs align_words"):
        ParsingConfig(word_span=True)


def test_the_teacher_forced_input_points_at_the_word_after_the_leaves_so_far():
    model = _model()
    source = np.array([[10, 12, 14, 3]], np.int32)
    words = model.word_memory(source, model.encode(source))
    target_in = np.array([[1, 20, LEAF, 21, LEAF, LEAF, 22, LEAF]], np.int32)  # BOS, then leaves at 2, 4, 5, 7
    aligned = np.asarray(model.context_inputs(target_in, words))[0]
    projected = np.asarray(model.alignment(words))[0]  # [S, D]: P · word k
    for t, k in enumerate([0, 0, 1, 1, 2, 3, 3, 4]):
        np.testing.assert_allclose(aligned[t], projected[k] if k < 3 else 0.0, atol=1e-6)


def test_cached_steps_equal_the_full_pass_with_alignment():
    _cached_steps_equal_the_full_pass(_model())


def test_cached_steps_equal_the_full_pass_with_bracket_depth():
    _cached_steps_equal_the_full_pass(_model(config=DEPTH))


def test_the_teacher_forced_input_adds_the_depth_after_each_token():
    model = _model(config=DEPTH)
    source = np.array([[10, 12, 14, 3]], np.int32)
    words = model.word_memory(source, model.encode(source))
    target_in = np.array([[1, OPEN, OPEN, LEAF, CLOSE, OPEN, LEAF, CLOSE, CLOSE]], np.int32)
    aligned = np.asarray(model.context_inputs(target_in, words))[0]  # [T, D]
    plain = np.asarray(model.alignment(tf.gather(words, [[0, 0, 0, 1, 1, 1, 2, 2, 2]], batch_dims=1)))[0]
    table = np.asarray(model.depth_embedding.embeddings)  # [64, D]
    np.testing.assert_allclose(aligned, plain + table[[0, 1, 2, 2, 1, 2, 2, 1, 0]], atol=1e-6)


def test_depths_past_the_table_share_its_last_row():
    model = _model(config=DEPTH)
    table = np.asarray(model.depth_embedding.embeddings)
    np.testing.assert_allclose(np.asarray(model._depth(np.array([62, 63, 64, 500]))), table[[62, 63, 63, 63]])


def test_bracket_depth_needs_align_words_and_its_table():
    with pytest.raises(ValueError, match="bracket_depth: needs align_words"):
        ParsingConfig(bracket_depth=True)
    with pytest.raises(ValueError, match="depth_change: given exactly when"):
        build_model(_recipe(DEPTH)).set_word_tables(np.zeros(50), np.zeros(50))


def _cached_steps_equal_the_full_pass(model):
    rng = np.random.default_rng(0)
    source = rng.integers(4, 50, (2, 9)).astype(np.int32)
    source[1, 6:] = 0
    target_in = rng.choice([LEAF, LEAF, 20, 31, 42], (2, 12)).astype(np.int32)
    target_in[:, 0] = 1
    full = np.asarray(model((source, target_in)))  # [B, T, V]
    step_fn, cache, constants = model_step.cached_step_fn(model, tf.constant(source), 1)
    steps = []
    for t in range(target_in.shape[1]):
        log_probs, cache = step_fn(tf.constant(target_in[:, t]), t, cache, constants)
        steps.append(np.asarray(log_probs.dense()))
    expected = tf.nn.log_softmax(full).numpy()
    np.testing.assert_allclose(np.stack(steps, 1)[..., 4:], expected[..., 4:], atol=1e-4)  # PAD, BOS banned


def test_the_tables_and_projection_are_weights_and_count():
    model = _model()
    names = [w.path for w in model.weights]
    assert "transformer/word_tables" in names and "transformer/word_alignment/kernel" in names
    align, span, depth = (count_parameters(_recipe(p)) for p in (ALIGN, SPAN, DEPTH))
    assert model.count_params() - 2 * 50 == align == count_parameters(CONFIG) + 16 * 16  # tables: no parameters
    assert build_model(_recipe(SPAN)).count_params() - 2 * 50 == span == align + 32 * 16
    assert build_model(_recipe(DEPTH)).count_params() - 3 * 50 == depth == span + 64 * 16


def test_a_parsing_recipe_without_align_words_builds_the_papers_model_and_the_tasks_register_their_classes():
    plain = dataclasses.replace(recipes.get("ptb_sample"), model=CONFIG, parsing=ParsingConfig())
    assert type(build_model(plain)) is Transformer and type(build_model(_recipe(ALIGN))) is ParsingTransformer
    assert type(build_model(dataclasses.replace(recipes.get("tiny"), model=CONFIG))) is Transformer
    assert count_parameters(plain) == count_parameters(CONFIG)


def test_old_recipe_files_with_the_fields_in_model_still_load():
    """Recipe files written when these were ModelConfig fields (the shipped ptb_sample's export.json among them)."""
    old = _recipe(SPAN).to_dict()
    parsing = old.pop("parsing")  # the fields that were in model then (the chart parser's came later)
    old["model"].update({name: parsing[name] for name in MOVED_KEYS["model"]})
    assert Recipe.from_dict(old) == _recipe(SPAN)
    translation = recipes.get("tiny").to_dict()
    del translation["parsing"]  # a file from before the section: its defaults
    assert Recipe.from_dict(translation) == recipes.get("tiny")


def test_align_words_is_a_parsing_option():
    with pytest.raises(ValueError, match="align_words: applies to the parsing task only"):
        Recipe(name="x", model=CONFIG, parsing=ALIGN)


def test_an_aligned_parser_is_not_exported_to_ctranslate2():
    from keras_transformer.engines import ctranslate2_convert

    with pytest.raises(ValueError, match="align_words: CTranslate2's decoder has no input"):
        ctranslate2_convert._check_supported(_recipe(ALIGN), None, _model())


@pytest.mark.filterwarnings("ignore:You are using a softmax over axis -1")  # the one-token prefix at step 0
@pytest.mark.parametrize("config", [ALIGN, DEPTH], ids=["leaves", "leaves_and_depth"])
def test_the_beam_search_carries_each_hypothesis_leaf_count_and_depth(config):
    """The cached search (leaf counts and depths in the cache, reordered with the beams) equals the search over the
    no-cache baseline, which re-decodes every prefix (its leaves and depth counted from the prefix itself)."""
    from keras_transformer.decoding import translate_ids
    from keras_transformer.decoding.beam_search import beam_search

    leaves = range(4, 50, 2)  # half the pieces, so that an untrained model writes leaves
    model = _model(leaves, config)
    pieces = np.arange(50)
    if config.bracket_depth:  # the other half open or close
        model.set_word_tables(np.isin(pieces, leaves), pieces % 2 == 0,
                              np.where(pieces % 4 == 1, 1, np.where(pieces % 4 == 3, -1, 0)))
    rng = np.random.default_rng(1)
    sources = rng.integers(4, 50, (2, 6)).astype(np.int32)
    sources[1, 3:] = 0
    sequences, scores = translate_ids(model, sources, beam_size=3, alpha=0.6, extra_length=6)
    max_lengths = model_step.max_output_lengths(sources, 6, 64)
    step_fn, cache, constants = model_step.redecode_step_fn(model, sources, 3, int(tf.reduce_max(max_lengths)))
    uncached = beam_search(step_fn, cache, 3, max_lengths, 0.6, constants)
    np.testing.assert_array_equal(uncached.sequences, sequences)
    np.testing.assert_allclose(uncached.scores, scores, atol=1e-4)
    written = np.asarray(sequences)
    if config.bracket_depth:
        assert (written % 2 == 1).sum() > 10  # brackets were written, so the depths mattered
    else:
        assert np.isin(written, leaves).sum() > 10  # leaves were written, so the counts mattered


def test_word_tag_logits_read_the_first_piece_of_the_word_each_output_stands_for():
    model = _model(config=TAGGED)
    source = np.array([[10, 11, 12, 14, 3]], np.int32)  # words start at 10, 12, 14
    target_in = np.array([[1, 20, LEAF, 21, LEAF, LEAF, 22, LEAF]], np.int32)  # k_t = 0 0 1 1 2 3 3 4
    memory = model.encode(source)
    tags = np.asarray(model.word_tag_logits(target_in, model.word_memory(source, memory)))[0]  # [T, V]
    first = np.asarray(memory)[0, [0, 2, 3]]  # [3 words, D]
    expected = np.asarray(model.embedding.logits(model.word_tagger(first)))  # [3, V]
    for t, k in enumerate([0, 0, 1, 1, 2, 3, 3, 4]):
        np.testing.assert_allclose(tags[t], expected[k] if k < 3 else 0.0, atol=1e-5)
    logits, context = model.forward((source, target_in))
    np.testing.assert_allclose(np.asarray(logits), np.asarray(model((source, target_in))), atol=1e-6)
    np.testing.assert_allclose(np.asarray(model.word_tag_logits(target_in, context))[0], tags, atol=1e-6)


def test_the_tag_loss_adds_lambda_times_the_smoothed_loss_of_the_leaves_to_the_training_sum():
    from keras_transformer import losses
    from keras_transformer.training.train_step import build_trainer

    model = build_trainer(_recipe(TAGGED), label_smoothing=0.1)
    assert isinstance(model, ParsingTransformer) and model.inference_class is ParsingTransformer
    is_leaf = np.zeros(50, np.float32)
    is_leaf[LEAF] = 1
    model.set_word_tables(is_leaf, (np.arange(50) % 2 == 0).astype(np.float32))
    source = np.array([[10, 11, 12, 14, 3]], np.int32)
    target_in = np.array([[1, 20, LEAF, 21, LEAF, LEAF, 22, LEAF]], np.int32)
    target_out = np.array([[20, LEAF, 21, LEAF, LEAF, 22, LEAF, 2]], np.int32)  # leaves at 1, 3, 4, 6
    stats, term = model._statistics(((source, target_in), target_out), training=True)  # dropout 0: deterministic
    _, context = model.forward((source, target_in))
    tags = model.word_tag_logits(target_in, context)
    leaves = np.where(target_out == LEAF, target_out, 0)
    expected = 0.5 * np.sum(np.asarray(losses.token_statistics(leaves, tags, 0.1))[..., losses.SMOOTHED])
    np.testing.assert_allclose(float(term), expected, rtol=1e-5)
    assert expected > 0 and np.count_nonzero(leaves) == 4
    _, evaluated = model._statistics(((source, target_in), target_out), training=False)
    assert evaluated == 0.0  # validation loss and metrics: the translation loss alone
    np.testing.assert_allclose(np.asarray(stats), np.asarray(losses.token_statistics(
        target_out, model((source, target_in)), 0.1)), atol=1e-5)


def test_tag_loss_needs_aligned_tag_leaves_and_counts_its_map():
    with pytest.raises(ValueError, match="tag_loss: needs align_words"):
        ParsingConfig(tag_loss=1.0)
    with pytest.raises(ValueError, match="tag_loss: must be >= 0"):
        dataclasses.replace(ALIGN, tag_loss=-1.0)
    ptb = recipes.get("ptb_sample")
    with pytest.raises(ValueError, match="tag_loss: needs tree_leaves='tag'"):
        dataclasses.replace(ptb, parsing=dataclasses.replace(ptb.parsing, tag_loss=1.0),
                            data=dataclasses.replace(ptb.data, tree_leaves="slot"))
    tagged = _recipe(TAGGED)
    assert build_model(tagged).count_params() - 2 * 50 == count_parameters(tagged) == count_parameters(
        _recipe(SPAN)) + 16 * 16
