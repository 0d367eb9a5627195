"""Attention heatmaps and the Eq. 3 curve: the plotted numbers are the model's and the schedule's, PNGs are written."""

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from keras_transformer import recipes
from keras_transformer import BOS_ID, EOS_ID, PAD_ID, plotting
from keras_transformer.decoding import translate_ids

SOURCE = "two men play football in the park ."
REFERENCE = "zwei männer spielen fußball im park ."
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _pieces(tokenizer, ids):
    return [p.decode() for p in tokenizer.id_to_piece(ids).numpy().tolist()]


def test_attention_data_with_a_reference_equals_attention_maps(small_model, small_tokenizer):
    data = plotting.attention_data(small_model, small_tokenizer, SOURCE, REFERENCE)
    source_ids = np.append(small_tokenizer.tokenize([SOURCE])[0].numpy(), EOS_ID)
    target_in_ids = np.append(BOS_ID, small_tokenizer.tokenize([REFERENCE])[0].numpy())
    np.testing.assert_array_equal(data.source_ids, source_ids)
    np.testing.assert_array_equal(data.target_in_ids, target_in_ids)
    s, t = len(source_ids), len(target_in_ids)
    assert data.source_pieces == _pieces(small_tokenizer, source_ids) and data.source_pieces[-1] == "</s>"
    assert data.target_pieces == _pieces(small_tokenizer, target_in_ids) and data.target_pieces[0] == "<s>"
    assert data.target_text == REFERENCE

    maps = small_model.attention_maps(tf.constant(source_ids[None]), tf.constant(target_in_ids[None]))
    shapes = {"encoder": (4, s, s), "decoder": (4, t, t), "cross": (4, t, s)}
    assert {k: len(v) for k, v in data.weights.items()} == {"encoder": 2, "decoder": 1, "cross": 1}
    for kind in plotting.KINDS:
        for layer, weights in enumerate(data.weights[kind]):
            assert weights.shape == shapes[kind]
            np.testing.assert_array_equal(weights, maps[kind][layer].numpy()[0])
            np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)  # softmax rows
    assert np.all(np.triu(data.weights["decoder"][0], k=1) < 1e-6)  # masked: no attention to later positions
    assert data.axes("cross") == (data.target_pieces, data.source_pieces)


def test_attention_data_without_reference_uses_the_beam_translation(small_model, small_tokenizer):
    data = plotting.attention_data(small_model, small_tokenizer, SOURCE, beam_size=2, alpha=0.6, extra_length=3)
    sequences, _ = translate_ids(small_model, data.source_ids[None], 2, 0.6, 3)  # [1, 2, T]
    best = [i for i in sequences[0, 0].numpy().tolist() if i not in (PAD_ID, EOS_ID)]
    assert data.target_in_ids.tolist() == [BOS_ID] + best
    assert 1 <= len(best) <= len(data.source_ids) + 3
    assert data.target_text == small_tokenizer.detokenize(sequences[:, 0]).numpy()[0].decode()
    assert data.weights["cross"][0].shape == (4, len(best) + 1, len(data.source_ids))


def test_heads_figure_draws_each_heads_matrix_with_token_labels(small_model, small_tokenizer):
    data = plotting.attention_data(small_model, small_tokenizer, SOURCE, REFERENCE)
    rows, cols = data.axes("cross")
    weights = data.weights["cross"][0]
    fig = plotting.heads_figure(weights, rows, cols, "cross")
    heads = [ax for ax in fig.axes if ax.images]
    assert len(heads) == 4
    for h, ax in enumerate(heads):
        np.testing.assert_array_equal(np.asarray(ax.images[0].get_array()), weights[h])
        assert ax.images[0].get_clim() == (0.0, pytest.approx(float(weights.max())))
    assert [t.get_text() for t in heads[0].get_yticklabels()] == rows  # queries: BOS + target pieces
    assert [t.get_text() for t in heads[0].get_xticklabels()] == cols  # keys: source pieces + EOS


def test_plot_attention_writes_one_png_per_kind_and_layer(small_model, small_tokenizer, tmp_path):
    data = plotting.attention_data(small_model, small_tokenizer, SOURCE, REFERENCE)
    paths = plotting.plot_attention(data, str(tmp_path / "out"))
    names = [p.rsplit("/", 1)[-1] for p in paths]
    assert names == ["encoder_layer1.png", "encoder_layer2.png", "decoder_layer1.png", "cross_layer1.png"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(names)
    for path in paths:
        with open(path, "rb") as f:
            assert f.read(8) == PNG_SIGNATURE
        image = np.asarray(Image.open(path).convert("RGB"))
        height, width, _ = image.shape
        assert 600 <= width <= 2500 and 250 <= height <= 1200, (path, width, height)
        assert width > height  # four heads side by side
        assert image.std() > 10  # not blank


def _eq3(d_model, warmup, scale, step_num):
    return scale * d_model**-0.5 * min(step_num**-0.5, step_num * warmup**-1.5)


@pytest.mark.parametrize("name", ["tiny", "base"])
def test_learning_rate_curve_is_eq3(name):
    recipe = recipes.get(name)
    m, t = recipe.model, recipe.train
    curve = plotting.learning_rate_curve(recipe, num_points=500)
    steps = curve.step_nums.tolist()
    assert steps[0] == 1 and steps[-1] == t.train_steps and t.warmup_steps in steps
    for step_num in (1, 2, t.warmup_steps // 2, t.warmup_steps, t.warmup_steps + 1, t.train_steps):
        if step_num in steps:
            got = curve.learning_rates[steps.index(step_num)]
            assert got == pytest.approx(_eq3(m.d_model, t.warmup_steps, t.learning_rate_scale, step_num), rel=1e-6)
    assert curve.peak_step == t.warmup_steps
    assert curve.peak_learning_rate == pytest.approx(t.learning_rate_scale * (m.d_model * t.warmup_steps) ** -0.5,
                                                     rel=1e-6)
    assert curve.peak_learning_rate == curve.learning_rates.max()
    i = steps.index(curve.peak_step)
    assert np.all(np.diff(curve.learning_rates[: i + 1]) > 0) and np.all(np.diff(curve.learning_rates[i:]) < 0)


def test_base_peak_is_the_papers_value():
    curve = plotting.learning_rate_curve(recipes.get("base"))
    assert curve.peak_learning_rate == pytest.approx(6.98771e-4, rel=1e-5)  # 512^-0.5 * 4000^-0.5


def test_peak_is_the_last_step_when_training_ends_during_warmup():
    import dataclasses

    recipe = recipes.get("tiny")
    short = dataclasses.replace(recipe, train=dataclasses.replace(recipe.train, train_steps=60))
    curve = plotting.learning_rate_curve(short)
    assert curve.peak_step == 60 and curve.step_nums[-1] == 60
    assert curve.peak_learning_rate == pytest.approx(2.0 * 64**-0.5 * 60 * 100**-1.5, rel=1e-6)


def test_plot_learning_rate_writes_a_png(tmp_path):
    (path,) = plotting.plot_learning_rate(recipes.get("tiny"), str(tmp_path))
    assert path == str(tmp_path / "learning_rate_tiny.png")
    with open(path, "rb") as f:
        assert f.read(8) == PNG_SIGNATURE
    assert Image.open(path).size == (700, 400)
