"""The Transformer model: masks, incremental decoding, serialization."""

import dataclasses

import keras
import numpy as np
import pytest

from keras_transformer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, layers
from keras_transformer.config import ModelConfig
from keras_transformer.model import Transformer, build_model, count_parameters


def _batch(rng, vocab=100):
    src = rng.integers(4, vocab, (2, 7))
    src[1, 5:] = 0
    tgt = rng.integers(4, vocab, (2, 6))
    tgt[0, 4:] = 0
    return src, tgt


@pytest.fixture
def small_config():
    return ModelConfig(vocab_size=100, d_model=16, d_ff=32, num_heads=2, num_encoder_layers=2, num_decoder_layers=2,
                       dropout=0.1, max_length=32)


def test_logits_shape_and_dtype(small_config):
    model = build_model(small_config)
    src, tgt = _batch(np.random.default_rng(0))
    logits = model((src, tgt))
    assert tuple(logits.shape) == (2, 6, 100) and logits.dtype == "float32"


def test_causal_mask_blocks_the_future(small_config):
    model = build_model(small_config)
    src, tgt = _batch(np.random.default_rng(1))
    changed = tgt.copy()
    changed[:, 3] = 5  # change a later target token
    a = np.asarray(model((src, tgt)))
    b = np.asarray(model((src, changed)))
    np.testing.assert_allclose(a[:, :3], b[:, :3], atol=1e-6)  # positions before 3 are unchanged
    assert np.abs(a[:, 3:] - b[:, 3:]).max() > 1e-4


def test_source_padding_does_not_change_logits(small_config):
    model = build_model(small_config)
    src, tgt = _batch(np.random.default_rng(2))
    padded = np.concatenate([src, np.zeros((2, 4), src.dtype)], axis=1)
    np.testing.assert_allclose(model((src, tgt)), model((padded, tgt)), atol=1e-5)


@pytest.mark.filterwarnings("ignore:You are using a softmax over axis -1")  # one cached position
@pytest.mark.parametrize("variant", [{}, {"norm": "pre"}, {"positional": "learned"}, {"d_k": 4, "d_v": 12}])
def test_cached_incremental_decoding_equals_full_pass(small_config, variant):
    config = dataclasses.replace(small_config, **variant)
    model = build_model(config)
    src, tgt = _batch(np.random.default_rng(3))
    full = np.asarray(model((src, tgt)))
    memory = model.encode(src)
    memory_mask = layers.masks.padding_mask(src)
    cache = model.init_cache(memory)
    steps = []
    for t in range(tgt.shape[1]):
        logits, cache = model.decode_step(tgt[:, t], t, cache, memory_mask)
        steps.append(np.asarray(logits))
    incremental = np.stack(steps, axis=1)
    np.testing.assert_allclose(incremental[0, :4], full[0, :4], atol=1e-5)  # real positions of row 0
    np.testing.assert_allclose(incremental[1], full[1], atol=1e-5)


def test_tied_embedding_is_the_pre_softmax_projection(small_config):
    model = build_model(small_config)
    names = [w.path for w in model.trainable_weights if "embedding" in w.path]
    assert names == ["transformer/shared_embedding/embeddings"]
    y = np.random.default_rng(4).normal(size=(1, 1, 16)).astype("float32")
    np.testing.assert_allclose(model.embedding.logits(y)[0, 0], y[0, 0] @ np.asarray(model.embedding.embeddings).T,
                               rtol=1e-5, atol=1e-6)  # a sum of 16 float32 products: ~1e-7 apart by summation order


def test_separate_vocabularies_give_the_source_its_own_embedding(small_config):
    config = dataclasses.replace(small_config, shared_vocabulary=False)
    model = build_model(config)
    names = [w.path for w in model.trainable_weights if "embedding" in w.path]
    assert names == ["transformer/shared_embedding/embeddings", "transformer/source_embedding/embeddings"]
    assert model.count_params() == count_parameters(config) == count_parameters(small_config) + 100 * 16
    src, tgt = _batch(np.random.default_rng(8))
    memory, logits = np.asarray(model.encode(src)), np.asarray(model((src, tgt)))
    # The target's matrix embeds the decoder's input and is the pre-softmax projection; the source's feeds the
    # encoder only: changing it changes the memory, and the logits only through the memory.
    y = np.random.default_rng(9).normal(size=(1, 1, 16)).astype("float32")
    np.testing.assert_allclose(model.embedding.logits(y)[0, 0], y[0, 0] @ np.asarray(model.embedding.embeddings).T,
                               rtol=1e-5, atol=1e-6)
    model.source_embedding.embeddings.assign(np.asarray(model.source_embedding.embeddings) * 2.0)
    assert np.abs(np.asarray(model.encode(src)) - memory).max() > 1e-3
    model.source_embedding.embeddings.assign(np.asarray(model.source_embedding.embeddings) / 2.0)
    np.testing.assert_allclose(model((src, tgt)), logits, atol=1e-6)
    model.embedding.embeddings.assign(np.asarray(model.embedding.embeddings) * 2.0)  # the target's only
    np.testing.assert_allclose(model.encode(src), memory, atol=1e-6)


def test_separate_vocabularies_reload_from_a_keras_file(small_config, tmp_path):
    config = dataclasses.replace(small_config, shared_vocabulary=False)
    model = build_model(config)
    src, tgt = _batch(np.random.default_rng(10))
    model.save(tmp_path / "model.keras")
    reloaded = keras.saving.load_model(tmp_path / "model.keras")
    assert reloaded.config == config
    np.testing.assert_array_equal(model((src, tgt)), reloaded((src, tgt)))


def test_embedding_is_scaled_by_sqrt_d_model(small_config):
    model = build_model(small_config)
    np.testing.assert_allclose(model.embedding(np.array([[5]]))[0, 0],
                               np.asarray(model.embedding.embeddings)[5] * 4.0, rtol=1e-6)


def test_dropout_only_in_training(small_config):
    model = build_model(small_config)
    src, tgt = _batch(np.random.default_rng(5))
    np.testing.assert_array_equal(model((src, tgt)), model((src, tgt)))
    assert np.abs(np.asarray(model((src, tgt), training=True)) - np.asarray(model((src, tgt)))).max() > 1e-4


def test_source_token_dropout_reads_real_pieces_as_unknown(small_config):
    model = build_model(dataclasses.replace(small_config, source_token_dropout=0.3))
    ids = np.random.default_rng(7).integers(4, 100, (64, 200)).astype(np.int32)
    ids[:, 150] = EOS_ID
    ids[:, 151:] = PAD_ID
    read = np.asarray(model.read_as_unknown(ids))
    np.testing.assert_array_equal(read[:, 150:], ids[:, 150:])  # EOS and PAD stay
    changed = read != ids
    assert np.all(read[changed] == UNK_ID)
    assert abs(changed[:, :150].mean() - 0.3) < 0.02  # 9,600 pieces: 0.3 within 4 standard deviations
    assert (np.asarray(model.read_as_unknown(ids)) != read).any()  # a new draw each call


def test_source_token_dropout_alpha_drops_a_piece_by_its_training_count(small_config):
    """alpha / (alpha + c): a piece never seen is always UNK, one seen alpha times half the time, and one seen
    10^9 times never; EOS and PAD stay."""
    alpha = 3.0
    model = build_model(dataclasses.replace(small_config, source_token_dropout_alpha=alpha))
    counts = np.full(100, 1e9)
    counts[10], counts[11] = 0, alpha
    model.set_piece_counts(counts)
    ids = np.full((64, 200), 12, np.int32)
    ids[:, 0::3], ids[:, 1::3] = 10, 11
    ids[:, 150] = EOS_ID
    ids[:, 151:] = PAD_ID
    read = np.asarray(model.read_as_unknown(ids))
    np.testing.assert_array_equal(read[:, 150:], ids[:, 150:])
    text = read[:, :150]
    assert np.all(text[ids[:, :150] == 10] == UNK_ID)
    np.testing.assert_array_equal(text[ids[:, :150] == 12], 12)
    half = text[ids[:, :150] == 11]  # 3,200 pieces: 0.5 within 4 standard deviations
    assert set(np.unique(half)) == {UNK_ID, 11} and abs((half == UNK_ID).mean() - 0.5) < 0.036


def test_source_token_dropout_alpha_trains_under_mixed_bfloat16(small_config):
    """The counts stay float32 inside a mixed_bfloat16 forward pass (no bfloat16 rate against float32 draws)."""
    model = build_model(dataclasses.replace(small_config, source_token_dropout_alpha=3.0), "mixed_bfloat16")
    counts = np.full(100, 1e9)
    counts[10] = 0
    model.set_piece_counts(counts)
    src, tgt = _batch(np.random.default_rng(5))
    src[:, 0] = 10
    assert np.isfinite(np.asarray(model((src, tgt), training=True), np.float32)).all()
    assert model.piece_counts.dtype == "float32"
    np.testing.assert_array_equal(model.read_as_unknown(src)[:, 0], UNK_ID)


def test_source_token_dropout_alpha_is_an_option_of_its_own(small_config):
    with pytest.raises(ValueError, match="source_token_dropout_alpha.*not both"):
        dataclasses.replace(small_config, source_token_dropout=0.2, source_token_dropout_alpha=1.0)
    with pytest.raises(ValueError, match="source_token_dropout_alpha.*>= 0"):
        dataclasses.replace(small_config, source_token_dropout_alpha=-1.0)
    with pytest.raises(ValueError, match="no source_token_dropout_alpha"):
        build_model(small_config).set_piece_counts(np.ones(100))


def _aligned_with_and_without(small_config, **option):
    """Two word-aligning models with the same weights and word tables (piece 7 a leaf, even pieces start words),
    without dropout: one with ``option``, one without."""
    from keras_transformer import recipes
    from keras_transformer.config import ParsingConfig

    recipe = dataclasses.replace(recipes.get("ptb_sample"), model=dataclasses.replace(small_config, dropout=0.0),
                                 parsing=ParsingConfig(align_words=True, word_span=True))
    with_option = dataclasses.replace(recipe, model=dataclasses.replace(recipe.model, **option))
    model, plain = build_model(with_option), build_model(recipe)
    plain.set_weights(model.get_weights())
    for m in (model, plain):
        m.set_word_tables(np.isin(np.arange(100), [7]), np.arange(100) % 2 == 0)
    return model, plain


def test_source_token_dropout_only_in_training_and_only_in_the_embedding(small_config):
    """Training encodes the pieces read_as_unknown returns under the real pieces' mask, and aligns words by the
    real pieces; inference encodes the real pieces, as a model without the option does."""
    model, plain = _aligned_with_and_without(small_config, source_token_dropout=0.5)
    src, tgt = _batch(np.random.default_rng(8))
    src[:, :2] = 10, 11  # one two-piece word first
    read = src.copy()
    read[:, 0] = UNK_ID  # the first piece of every row, whatever the draw
    model.read_as_unknown = lambda ids: read
    np.testing.assert_array_equal(model((src, tgt)), plain((src, tgt)))
    memory = plain.encode(read)
    expected = plain.decode(tgt, memory, layers.masks.padding_mask(src), context=plain.word_memory(src, memory))
    np.testing.assert_allclose(model((src, tgt), training=True), expected, atol=1e-5)
    assert np.abs(np.asarray(expected) - np.asarray(plain((src, tgt)))).max() > 1e-4


def test_target_token_dropout_keeps_bos_and_draws_its_own_rate(small_config):
    model = build_model(dataclasses.replace(small_config, source_token_dropout=0.3, target_token_dropout=0.1))
    ids = np.random.default_rng(9).integers(4, 100, (64, 200)).astype(np.int32)
    ids[:, 0] = BOS_ID
    ids[:, 151:] = PAD_ID
    read = np.asarray(model.read_as_unknown(ids, side="target"))
    np.testing.assert_array_equal(read[:, 0], BOS_ID)
    np.testing.assert_array_equal(read[:, 151:], PAD_ID)
    changed = read != ids
    assert np.all(read[changed] == UNK_ID)
    assert abs(changed[:, 1:151].mean() - 0.1) < 0.02  # 9,600 pieces: 0.1 within 6 standard deviations


def test_target_token_dropout_only_in_training_and_aligned_by_the_real_pieces(small_config):
    """Training embeds the decoder input read_as_unknown returns, while the word alignment, the causal mask and
    the padding mask read the real pieces; inference decodes the real pieces, as a model without the option."""
    model, plain = _aligned_with_and_without(small_config, target_token_dropout=0.5)
    src, tgt = _batch(np.random.default_rng(10))
    tgt[:, 1] = 7  # a leaf, read as UNK: the alignment must still count it
    read = tgt.copy()
    read[:, 1] = UNK_ID
    model.read_as_unknown = lambda ids, side="source": read if side == "target" else ids
    np.testing.assert_array_equal(model((src, tgt)), plain((src, tgt)))
    memory, memory_mask = plain.encode(src), layers.masks.padding_mask(src)
    y = plain._embed(read, extra=plain.context_inputs(tgt, plain.word_memory(src, memory)))
    expected = plain.embedding.logits(plain.decoder(y, memory, layers.masks.decoder_self_mask(tgt), memory_mask))
    np.testing.assert_allclose(model((src, tgt), training=True), expected, atol=1e-5)
    assert np.abs(np.asarray(expected) - np.asarray(plain((src, tgt)))).max() > 1e-4


def test_save_and_reload_keras_file(small_config, tmp_path):
    model = build_model(small_config)
    src, tgt = _batch(np.random.default_rng(6))
    path = tmp_path / "model.keras"
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert isinstance(reloaded, Transformer) and reloaded.config == small_config
    np.testing.assert_array_equal(model((src, tgt)), reloaded((src, tgt)))


def test_model_config_round_trip(small_config):
    model = build_model(small_config)
    clone = Transformer.from_config(model.get_config())
    assert clone.config == model.config


@pytest.mark.parametrize("layer", [
    layers.SharedEmbedding(50, 8, name="e"),
    layers.SinusoidalPositionalEncoding(10, 8, name="p"),
    layers.PositionwiseFeedForward(8, 16, relu_dropout=0.1, name="f"),
    layers.SublayerConnection(0.2, "pre", 1e-5, name="s"),
    layers.EncoderLayer(d_model=8, d_ff=16, num_heads=2, norm="pre", name="el"),
    layers.DecoderLayer(d_model=8, d_ff=16, num_heads=2, d_k=3, d_v=5, name="dl"),
    layers.Encoder(num_layers=2, d_model=8, d_ff=16, num_heads=2, name="enc"),
    layers.Decoder(num_layers=2, d_model=8, d_ff=16, num_heads=2, norm="pre", name="dec"),
], ids=lambda layer: type(layer).__name__)
def test_every_layer_config_round_trips(layer):
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config


def test_ffn_is_equation_2():
    ffn = layers.PositionwiseFeedForward(4, 6)
    x = np.random.default_rng(7).normal(size=(1, 2, 4)).astype("float32")
    y = np.asarray(ffn(x))
    w1, b1 = (np.asarray(w) for w in ffn.inner.weights)
    w2, b2 = (np.asarray(w) for w in ffn.outer.weights)
    np.testing.assert_allclose(y, np.maximum(0, x @ w1 + b1) @ w2 + b2, rtol=1e-5, atol=1e-6)


def test_attention_maps_shapes(small_config):
    model = build_model(small_config)
    src, tgt = _batch(np.random.default_rng(8))
    maps = model.attention_maps(src, tgt)
    assert [tuple(m.shape) for m in maps["encoder"]] == [(2, 2, 7, 7)] * 2
    assert [tuple(m.shape) for m in maps["decoder"]] == [(2, 2, 6, 6)] * 2
    assert [tuple(m.shape) for m in maps["cross"]] == [(2, 2, 6, 7)] * 2
    np.testing.assert_allclose(np.asarray(maps["cross"][0]).sum(-1), 1.0, rtol=1e-5)
