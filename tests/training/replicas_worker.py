"""Run as ``python -m tests.training.replicas_worker`` (a fresh process with 2 logical CPUs).

For each optimizer (the paper's Adam; SGD with learning rate 1, whose update is minus the gradient): one step
on the same global batch under one device and under 2 mirrored replicas, from the same weights. Replica 0
sees far fewer real target tokens than replica 1. Prints one JSON line: both losses, the replica count and
how far the two updates are apart.
"""

import json

from keras_transformer.tf_setup import init_devices

init_devices(cpu_devices=2)

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_transformer import recipes  # noqa: E402
from keras_transformer import training  # noqa: E402
from tests.synthetic import copy_batches, fit_without_autotune, small_recipe, without_autotune  # noqa: E402

fit_without_autotune()


def main():
    r = small_recipe(recipes.get("tiny"))
    (src, tin), tout = copy_batches(batch_size=8, length=12, num_batches=1)[0]
    tout = tout.copy()
    tin = tin.copy()
    tout[:4, 5:] = 0
    tin[:4, 6:] = 0  # replica 0 sees far fewer real target tokens than replica 1
    ds = without_autotune(tf.data.Dataset.from_tensors(((src, tin), tout)))
    result = {}
    for optimizer in ("adam", "sgd"):
        one = training.compile_model(r, tf.distribute.OneDeviceStrategy("/cpu:0"))
        two = training.compile_model(r, tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
        if optimizer == "sgd":  # update = -gradient: compares the all-reduced gradients directly
            for m in (one, two):
                with m.distribute_strategy.scope():
                    m.compile(optimizer=keras.optimizers.SGD(1.0))
                    m.optimizer.build(m.trainable_variables)
        two.set_weights(one.get_weights())
        w0 = one.get_weights()
        h1, h2 = one.fit(ds, verbose=0).history, two.fit(ds, verbose=0).history
        w1, w2 = one.get_weights(), two.get_weights()
        update = np.concatenate([(a - b).ravel() for a, b in zip(w1, w0)])
        update_diff = np.concatenate([(a - b).ravel() for a, b in zip(w1, w2)])
        result[optimizer] = {"loss_1": h1["loss"][0], "loss_2": h2["loss"][0],
                             "replicas": two.distribute_strategy.num_replicas_in_sync,
                             "max_weight_diff": float(np.abs(update_diff).max()),
                             "max_update": float(np.abs(update).max()),
                             "relative_update_diff": float(np.linalg.norm(update_diff) / np.linalg.norm(update))}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
