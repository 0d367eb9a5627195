"""Run as ``python -m tests.training.accumulation_worker`` (a fresh process with 2 logical CPUs).

For each strategy (one_device, mirrored on 1 CPU, mirrored on 2 CPUs) and each optimizer (SGD with
learning rate 1, whose update is minus the gradient; the paper's Adam on Eq. 3): one update accumulated
over 4 micro-batches of very different real-token counts against one update on their concatenation.
Prints one JSON line.
"""

import json

import numpy as np

from keras_transformer.tf_setup import init_devices

init_devices(cpu_devices=2)

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_transformer import recipes  # noqa: E402
from keras_transformer import training  # noqa: E402
from tests.synthetic import as_dataset, copy_batches, fit_without_autotune, small_recipe  # noqa: E402

fit_without_autotune()

TARGET_LENGTHS = (12, 2, 7, 1)  # real target tokens per row in each micro-batch: 96, 16, 56, 8 per batch


def micro_batches():
    batches = []
    for ((src, tin), tout), length in zip(copy_batches(batch_size=8, length=12, num_batches=4), TARGET_LENGTHS):
        tin, tout = tin.copy(), tout.copy()
        tout[:, length:] = 0
        tin[:, length:] = 0
        tout[::2, max(1, length // 2):] = 0  # and uneven rows: replicas see different counts
        batches.append(((src, tin), tout))
    return batches


def concatenated(batches):
    return ((np.concatenate([b[0][0] for b in batches]), np.concatenate([b[0][1] for b in batches])),
            np.concatenate([b[1] for b in batches]))


def one_update(recipe, strategy, accumulation, batches, optimizer, initial):
    model = training.compile_model(recipe, strategy, accumulation)
    if optimizer == "sgd":
        with strategy.scope():
            model.compile(optimizer=keras.optimizers.SGD(1.0))
            model.optimizer.build(model.trainable_variables)
    model.set_weights(initial)
    history = model.fit(as_dataset(batches, repeat=False), epochs=1, steps_per_epoch=len(batches), verbose=0).history
    return model.get_weights(), int(model.optimizer.iterations.numpy()), history["loss"][0]


def main():
    recipe = small_recipe(recipes.get("tiny"))  # d_model 32, no dropout; tiny's Eq. 3 (warmup 100, scale 2)
    batches = micro_batches()
    initial = training.compile_model(recipe, tf.distribute.OneDeviceStrategy("/cpu:0"), 1).get_weights()
    strategies = {
        "one_device": lambda: tf.distribute.OneDeviceStrategy("/cpu:0"),
        "mirrored_1": lambda: tf.distribute.MirroredStrategy(["/cpu:0"]),
        "mirrored_2": lambda: tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]),
    }
    result = {"tokens": [int((b[1] != 0).sum()) for b in batches]}
    for optimizer in ("sgd", "adam"):
        reference, updates, loss = one_update(recipe, strategies["one_device"](), 1, [concatenated(batches)],
                                              optimizer, initial)
        update = np.concatenate([(a - b).ravel() for a, b in zip(reference, initial)])
        for name, make in strategies.items():
            weights, steps, _ = one_update(recipe, make(), 4, batches, optimizer, initial)
            diff = np.concatenate([(a - b).ravel() for a, b in zip(weights, reference)])
            result[f"{optimizer}/{name}"] = {
                "updates": steps, "relative_update_diff": float(np.linalg.norm(diff) / np.linalg.norm(update)),
                "max_abs_diff": float(np.abs(diff).max()), "max_update": float(np.abs(update).max())}
        # The average of per-micro-batch token means (what accumulating by mean would give), for contrast.
        if optimizer == "sgd":
            means = [one_update(recipe, strategies["one_device"](), 1, [b], "sgd", initial)[0] for b in batches]
            averaged = np.concatenate([np.mean([(m[i] - initial[i]).ravel() for m in means], 0)
                                       for i in range(len(initial))])
            result["sgd/mean_of_micro_batch_means_relative_diff"] = float(
                np.linalg.norm(averaged - update) / np.linalg.norm(update))
            result["sgd/cosine_mean_of_means"] = float(averaged @ update / np.linalg.norm(averaged)
                                                       / np.linalg.norm(update))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
