"""bench/marian.py: our weights in a Hugging Face MarianMTModel (post-LN) or M2M100 model (pre-LN) give our
logits, and generate with our length penalty gives our beam search's output. Skipped without torch and
transformers (bench-only packages)."""

import dataclasses
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from bench import marian  # noqa: E402
from keras_transformer import BOS_ID, EOS_ID, PAD_ID  # noqa: E402
from keras_transformer.config import ModelConfig  # noqa: E402
from keras_transformer.decoding import translate_ids  # noqa: E402
from keras_transformer.model import build_model  # noqa: E402
from keras_transformer import artifacts
from tests.conftest import REPO_ROOT  # noqa: E402

SHIPPED = os.path.join(REPO_ROOT, "saved_models", "multi30k_en_de")
# test_2016_flickr sentences whose best hypothesis under |Y|^α differs from ours (GNMT) for the shipped model
# (lines 109 and 216 of test_2016_flickr.en: of the first 300, generate with our length penalty gives our
# output for all 300, and with its own penalty another for 8). Chosen again whenever the shipped model changes.
SENTENCES = ["A brown dog wades into a lake to retrieve a stick.", "People chilling in at forest next to canoes."]
CONFIG = ModelConfig(vocab_size=64, d_model=32, d_ff=64, num_heads=4, num_encoder_layers=2, num_decoder_layers=2,
                     max_length=48, dropout=0.0)


def _batch(rng, rows, length, vocab):
    """[rows, length] ids: 4..vocab-1, EOS, then PAD; lengths differ so padding masks matter."""
    ids = np.full((rows, length), PAD_ID, np.int32)
    for row, n in zip(ids, rng.integers(length // 2, length + 1, rows)):
        row[: n - 1] = rng.integers(EOS_ID + 1, vocab, n - 1)
        row[n - 1] = EOS_ID
    return ids


@pytest.fixture(scope="module", params=["post", "pre"])
def models(request, tmp_path_factory):
    import keras

    keras.utils.set_random_seed(7)
    model = build_model(dataclasses.replace(CONFIG, norm=request.param))
    rng = np.random.default_rng(0)
    for weight in model.weights:  # random LayerNorm gains and biases too, so a mis-mapped one shows
        if "norm" in weight.path or weight.path.endswith("bias"):
            weight.assign(weight.numpy() + rng.normal(0.0, 0.3, weight.shape).astype(np.float32))
    directory = tmp_path_factory.mktemp(f"hf_{request.param}")
    marian.save(marian.from_keras(model), directory)
    return model, directory


def _hf_logits(hf, source, target_in):
    with torch.no_grad():
        return hf(input_ids=torch.from_numpy(source).long(), attention_mask=torch.from_numpy(source != PAD_ID).long(),
                  decoder_input_ids=torch.from_numpy(target_in).long()).logits.numpy()


def test_saved_and_loaded_marian_gives_our_logits(models):
    model, directory = models
    rng = np.random.default_rng(1)
    source = _batch(rng, 3, 9, CONFIG.vocab_size)
    target_in = np.concatenate([np.full((3, 1), BOS_ID, np.int32), _batch(rng, 3, 7, CONFIG.vocab_size)], axis=1)
    ours = model((source, target_in), training=False).numpy()  # [B, T, V]
    real = target_in != PAD_ID  # [B, T]: positions after the target's end are padding (ours masks them as keys)
    hf = marian.load(directory)
    assert type(hf).__name__ == {"post": "MarianMTModel", "pre": "M2M100ForConditionalGeneration"}[model.config.norm]
    np.testing.assert_allclose(_hf_logits(hf, source, target_in)[real], ours[real], atol=1e-4, rtol=0)
    assert all(m.eps == CONFIG.layer_norm_epsilon for m in hf.modules() if isinstance(m, torch.nn.LayerNorm))
    # What load() restores matters: HF's own position table (sines, then cosines) moves the logits.
    embed = hf.model.decoder.embed_positions
    with torch.no_grad():
        if model.config.norm == "post":
            embed.weight.copy_(embed.create_weight())
        else:
            embed.make_weights(embed.weights.shape[0], CONFIG.d_model, embed.padding_idx)
    assert np.abs(_hf_logits(hf, source, target_in)[real] - ours[real]).max() > 1e-2


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """The shipped model (a random one rarely emits EOS), its tokenizer and its Marian directory."""

    model, _, tok = artifacts.load_model(SHIPPED)
    directory = tmp_path_factory.mktemp("shipped_marian")
    marian.save(marian.from_keras(model), directory)
    return model, tok, directory


def test_generate_with_our_length_penalty_finds_our_beams(shipped):
    model, tok, directory = shipped
    gnmt, stock = marian.load(directory, gnmt_length_penalty=True), marian.load(directory)
    for sentence in SENTENCES:  # one at a time: generate's maximum length is then each sentence's own
        source = np.array([tok.tokenize([sentence]).to_list()[0] + [EOS_ID]], np.int32)  # [1, S]
        sequences, _ = translate_ids(model, source, 4, 0.6, 50)  # [1, K, T]
        ours = [t for t in sequences.numpy()[0, 0].tolist() if t != PAD_ID]
        outputs = [[t for t in hf.generate(input_ids=torch.from_numpy(source).long(),
                                           **marian.generate_kwargs(source.shape[1] + 50))[0, 1:].tolist()
                    if t != PAD_ID] for hf in (gnmt, stock)]  # [1:]: without the decoder start (BOS)
        assert ours[-1] == EOS_ID and outputs[0] == ours
        assert outputs[1] != ours  # HF's own log P / |Y|^α picks another hypothesis for these sentences


def test_hf_config_takes_the_layer_norm_placement_and_refuses_what_hf_cannot_hold():
    assert type(marian.hf_config(CONFIG)).__name__ == "MarianConfig"
    pre = marian.hf_config(dataclasses.replace(CONFIG, norm="pre"))
    assert type(pre).__name__ == "M2M100Config" and (pre.encoder_layerdrop, pre.decoder_layerdrop) == (0.0, 0.0)
    with pytest.raises(ValueError, match="d_k"):
        marian.hf_config(dataclasses.replace(CONFIG, d_k=16))
