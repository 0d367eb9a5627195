"""The chart parser's fused bidirectional LSTM (tasks/parsing/word_lstm.py) against Keras's own, weight for weight."""

import numpy as np
import tensorflow as tf
import keras

from keras_transformer.tasks.parsing.word_lstm import BidirectionalLSTM


def test_both_directions_in_one_loop_equal_keras_bidirectional_lstm_under_a_mask():
    rng = np.random.default_rng(0)
    lengths = np.array([5, 2, 7, 1], np.int32)
    x = rng.normal(size=(4, 7, 6)).astype(np.float32)
    fused = BidirectionalLSTM(3)
    forward, backward = fused(tf.constant(x), tf.constant(lengths))
    reference = keras.layers.Bidirectional(keras.layers.LSTM(3, return_sequences=True))
    mask = np.arange(7)[None, :] < lengths[:, None]
    reference(x, mask=mask)
    kernel, recurrent, bias = (w.numpy() for w in (fused.kernel, fused.recurrent_kernel, fused.bias))
    for d, layer in enumerate((reference.forward_layer, reference.backward_layer)):
        layer.cell.kernel.assign(kernel[d])
        layer.cell.recurrent_kernel.assign(recurrent[d])
        layer.cell.bias.assign(bias[d])
    expected = reference(x, mask=mask).numpy()  # [4, 7, 6]: forward, backward
    np.testing.assert_allclose(forward.numpy()[mask], expected[..., :3][mask], atol=1e-5)
    np.testing.assert_allclose(backward.numpy()[mask], expected[..., 3:][mask], atol=1e-5)
    assert (forward.numpy()[~mask] == 0).all() and (backward.numpy()[~mask] == 0).all()
    np.testing.assert_array_equal(bias[:, 3:6], 1.0)  # the forget gate's bias starts at 1, as Keras's
    assert BidirectionalLSTM.from_config(fused.get_config()).units == 3


def test_gradients_reach_both_directions_weights():
    fused = BidirectionalLSTM(4)
    x = tf.random.normal([2, 5, 3])
    with tf.GradientTape() as tape:
        forward, backward = fused(x, tf.constant([5, 3]))
        loss = tf.reduce_sum(forward[:, 2]) + tf.reduce_sum(backward[:, 0])  # each after a recurrent step
    grads = tape.gradient(loss, [fused.kernel, fused.recurrent_kernel])
    for g in grads:
        assert (tf.reduce_sum(tf.abs(g), axis=[1, 2]).numpy() > 0).all()  # both directions learn
