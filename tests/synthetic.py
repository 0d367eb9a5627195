"""Synthetic batches for tests that need training data without a corpus, and a small model to train on them."""

import dataclasses

import numpy as np
import tensorflow as tf

from keras_transformer import BOS_ID, EOS_ID


def copy_batches(vocab_size=1000, batch_size=16, length=12, num_batches=8, seed=0):
    """A fixed list of ((source, target_in), target_out) batches of a copy task."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(num_batches):
        x = rng.integers(4, vocab_size, (batch_size, length)).astype("int32")
        x[:, -1] = EOS_ID
        target_in = np.concatenate([np.full((batch_size, 1), BOS_ID, "int32"), x[:, :-1]], 1)
        batches.append(((x, target_in), x))
    return batches


def as_dataset(batches, repeat=True):
    ds = tf.data.Dataset.from_generator(
        lambda: iter(batches),
        output_signature=((tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None], tf.int32)),
                          tf.TensorSpec([None, None], tf.int32)))
    return without_autotune(ds.repeat() if repeat else ds)


def without_autotune(dataset):
    """``dataset`` with tf.data's autotuning off (see ``fit_without_autotune``)."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def fit_without_autotune():
    """Turns tf.data's autotuning off in the datasets a tf.distribute strategy makes for each device, in this process.

    A fit under a strategy reads its dataset through a multi-device iterator, and with autotuning each of its
    iterators (the host's over the given dataset, one per device) has a thread that wakes at an interval that
    doubles up to 60 s. Freeing such an iterator waits for that thread's next wake-up (TensorFlow 2.21): when a fit
    ends, or when a garbage collection finds a finished fit's iterator long after, a stall of up to a minute. In a
    test process that fits many models those stalls added up to minutes (docs/notes.md, "Test-suite timings").
    The host's iterator follows its dataset's options (``without_autotune``); the devices' datasets are made
    inside TensorFlow, so the function that makes them is wrapped here.
    """
    from tensorflow.python.data.ops import multi_device_iterator_ops

    make = getattr(multi_device_iterator_ops, "_create_device_dataset", None)
    if make is None or getattr(make, "without_autotune", False):
        return  # wrapped already, or a TensorFlow that makes them otherwise: the tests run, only slower

    def make_without_autotune(*args, **kwargs):
        return without_autotune(make(*args, **kwargs))

    make_without_autotune.without_autotune = True
    multi_device_iterator_ops._create_device_dataset = make_without_autotune


def small_recipe(recipe, dropout=0.0, **train):
    """``recipe`` with a 1+1-layer model of d_model 32 (d_ff 64, 2 heads) and ``dropout``, ``train`` replacing fields
    of its training config.

    For the training-loop tests on copy batches, which check steps, files, resumption and equalities, not what is
    learned: tracing the training step is most of such a test's time, and this model traces in about half the
    time of tiny's 2+2 layers of d_model 64.
    """
    model = dataclasses.replace(recipe.model, d_model=32, d_ff=64, num_heads=2, num_encoder_layers=1,
                                num_decoder_layers=1, dropout=dropout)
    return dataclasses.replace(recipe, model=model, train=dataclasses.replace(recipe.train, **train))
