"""Data parallelism: 2 replicas == 1 replica on the same global batch; 2 workers end identical.

Each case runs in a fresh process: logical CPU devices and TF_CONFIG must be
set before TensorFlow initialises.
"""

import json
import os
import socket
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

REPLICA_SCRIPT = r"""
import json, dataclasses
import numpy as np
import keras_transformer, recipes
from keras_transformer.runtime import init_devices
init_devices(cpu_devices=2)
import keras
import tensorflow as tf
from keras_transformer import training
from tests.synthetic import copy_batches

r = recipes.get("tiny")
r = dataclasses.replace(r, model=dataclasses.replace(r.model, dropout=0.0))
(src, tin), tout = copy_batches(batch_size=8, length=12, num_batches=1)[0]
tout = tout.copy(); tin = tin.copy()
tout[:4, 5:] = 0; tin[:4, 6:] = 0  # replica 0 sees far fewer real target tokens than replica 1
ds = tf.data.Dataset.from_tensors(((src, tin), tout))
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
                         "max_weight_diff": float(np.abs(update_diff).max()), "max_update": float(np.abs(update).max()),
                         "relative_update_diff": float(np.linalg.norm(update_diff) / np.linalg.norm(update))}
print(json.dumps(result))
"""

WORKER_SCRIPT = r"""
import dataclasses, hashlib, json, sys
import numpy as np
import keras_transformer, recipes
from keras_transformer.runtime import init_devices
init_devices()
from keras_transformer import training
from tests.synthetic import as_dataset, copy_batches

r = recipes.get("tiny")
r = dataclasses.replace(r, train=dataclasses.replace(r.train, train_steps=4, checkpoint_every=2, eval_batches=1,
                                                    gradient_accumulation_steps=int(sys.argv[2])))
strategy = training.make_strategy("multi_worker")  # before any op runs
batches = copy_batches(batch_size=8, num_batches=4)
summary = training.train(r, sys.argv[1], strategy=strategy,
                         datasets=(as_dataset(batches), as_dataset(batches[:1], repeat=False)), verbose=0)
print(json.dumps({"steps": summary["steps"], "weights_sha256": summary["weights_sha256"]}))
"""


def _run(script, *args, env=None, timeout=600):
    env = dict(os.environ, **(env or {}))
    return subprocess.Popen([sys.executable, "-c", script, *args], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _last_json(proc, timeout=600):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def test_two_replicas_equal_one_replica_on_the_same_global_batch():
    result = _last_json(_run(REPLICA_SCRIPT))
    for case in result.values():
        assert case["replicas"] == 2
        assert case["loss_1"] == pytest.approx(case["loss_2"], rel=1e-5)
    # SGD(lr=1): the update is the gradient, so this is the all-reduced gradient == single-replica gradient.
    assert result["sgd"]["relative_update_diff"] < 1e-5, result
    assert result["sgd"]["max_weight_diff"] < 1e-6, result
    # Adam's first step is ~lr * g/|g|: entries with |g| near 0 amplify float noise, so its tolerance is wider.
    assert result["adam"]["relative_update_diff"] < 1e-2, result
    assert result["adam"]["max_weight_diff"] < 0.5 * result["adam"]["max_update"], result


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.mark.slow
@pytest.mark.parametrize("accumulation", [1, 2])
def test_two_workers_on_loopback_finish_with_identical_weights(tmp_path, accumulation):
    workers = [f"127.0.0.1:{p}" for p in _free_ports(2)]
    procs = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        procs.append(_run(WORKER_SCRIPT, str(tmp_path), str(accumulation), env={"TF_CONFIG": json.dumps(tf_config)}))
    results = [_last_json(p) for p in procs]
    assert [r["steps"] for r in results] == [4, 4]  # updates, each of `accumulation` micro-batches
    assert results[0]["weights_sha256"] == results[1]["weights_sha256"]
    assert (tmp_path / "checkpoints" / "ckpt-4.index").exists()
    assert not (tmp_path / "checkpoints" / ".worker_1").exists() or not any(
        p.name.endswith(".index") for p in (tmp_path / "checkpoints" / ".worker_1").iterdir())
