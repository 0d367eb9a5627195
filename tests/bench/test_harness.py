"""bench/harness.py: the analytic FLOP count and the fixed batches both frameworks train on."""

import numpy as np

from bench import harness
from keras_transformer import BOS_ID, EOS_ID, PAD_ID
from keras_transformer.config import ModelConfig


def test_train_step_flops_by_hand():
    # D=4, F=8, H=2, d_k=d_v=2, V=10, one layer each; B=1, S=2, T=3.
    config = ModelConfig(vocab_size=10, d_model=4, d_ff=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1)
    # encoder: projections 2*2*(64 + 64) = 512, scores 2*1*2*(2*2)*(2+2) = 64                  -> 576
    # decoder: self + FFN 2*3*128 = 768, cross W^Q,W^O 2*3*32 = 192, W^K,W^V 2*2*32 = 128,
    #          self scores 2*1*2*9*4 = 144, cross scores 2*1*2*3*2*4 = 96                        -> 1328
    # softmax: 2*3*4*10 = 240;  step = 3 * (576 + 1328 + 240)
    assert harness.train_step_flops(config, 1, 2, 3) == 3 * (576 + 1328 + 240)


def test_train_step_flops_is_about_six_flops_per_matmul_weight_and_token():
    config = ModelConfig(vocab_size=8000, d_model=256, d_ff=1024, num_heads=4, num_encoder_layers=3,
                         num_decoder_layers=3)
    b, s, t = 160, 24, 26
    d, f = 256, 1024
    encoder_weights = 3 * (4 * d * d + 2 * d * f)  # per source token
    decoder_weights = 3 * (6 * d * d + 2 * d * f) + d * 8000  # per target token (cross W^K, W^V on the source)
    approx = 6 * (b * s * (encoder_weights + 3 * 2 * d * d) + b * t * decoder_weights)
    flops = harness.train_step_flops(config, b, s, t)
    assert approx < flops < 1.1 * approx  # the rest is attention scores: small at these lengths


def test_fixed_batch_is_deterministic_and_shaped_like_a_bucket():
    source, target_in, target_out = harness.fixed_batch(100, 8, 10, 12, seed=3)
    again = harness.fixed_batch(100, 8, 10, 12, seed=3)
    for x, y in zip((source, target_in, target_out), again):
        np.testing.assert_array_equal(x, y)
    assert source.shape == (8, 10) and target_in.shape == target_out.shape == (8, 12)
    assert source.dtype == np.int32
    for ids in (source, target_out):
        lengths = (ids != PAD_ID).sum(1)
        assert lengths.min() >= ids.shape[1] - 3
        np.testing.assert_array_equal(ids[np.arange(8), lengths - 1], EOS_ID)  # EOS ends each sentence
    np.testing.assert_array_equal(target_in[:, 0], BOS_ID)
    real = target_out != PAD_ID
    np.testing.assert_array_equal(target_in[:, 1:][real[:, 1:]], target_out[:, :-1][real[:, 1:]])
    np.testing.assert_array_equal(target_in != PAD_ID, real)  # as the data pipeline: [BOS] + y, y + [EOS]


def test_batch_shape_from_flag_or_table():
    assert harness.batch_shape("multi30k") == (160, 24, 26)
    assert harness.batch_shape("base", "8x16x18") == (8, 16, 18)
