"""Run as ``python -m tests.training.cluster_worker WORKDIR ACCUMULATION [STEPS [EVERY]]`` with ``TF_CONFIG``
naming this worker of a loopback cluster; every worker of the cluster runs it at once.

Trains a small model (``tests.synthetic.small_recipe`` of tiny) for STEPS (4) updates of ACCUMULATION
micro-batches each under the multi-worker strategy, a checkpoint every EVERY (2) updates, writing to WORKDIR.
Prints one JSON line: the steps trained and the SHA-256 of the final weights.
"""

import json

from keras_transformer.tf_setup import init_devices

init_devices()

import sys  # noqa: E402

from keras_transformer import recipes  # noqa: E402
from keras_transformer import training  # noqa: E402
from tests.synthetic import as_dataset, copy_batches, fit_without_autotune, small_recipe  # noqa: E402

fit_without_autotune()


def main(workdir, accumulation, steps=4, every=2):
    tiny = recipes.get("tiny")
    r = small_recipe(tiny, dropout=tiny.model.dropout, train_steps=steps, checkpoint_every=every, eval_batches=1,
                     gradient_accumulation_steps=accumulation)
    strategy = training.make_strategy("multi_worker")  # before any op runs
    batches = copy_batches(batch_size=8, num_batches=4)
    summary = training.train(r, workdir, strategy=strategy,
                             datasets=(as_dataset(batches), as_dataset(batches[:1], repeat=False)), verbose=0)
    print(json.dumps({"steps": summary.steps, "weights_sha256": summary.weights_sha256}))


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:]))
