"""Run as ``python -m tests.data.replica_batches_worker TOKENIZER_MODEL DATA_DIR`` (a fresh process with 2
logical CPUs; reads Multi30k val).

Distributes 12 training batches of val, planned for 1,024 tokens per update, over 2 mirrored replicas. Prints
one JSON line: {"replicas": 2, "batches": [[[rows, source length, target length] per replica] per batch]}.
"""

import json
import sys

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

from keras_transformer.config import DataConfig  # noqa: E402
from keras_transformer.data import batching, corpora  # noqa: E402
from keras_transformer.data.tokenizer import Tokenizer  # noqa: E402


def main(tokenizer_model, data_dir):
    cfg = DataConfig(corpus="multi30k", max_length=80, tokens_per_batch=1024)
    pairs, _ = corpora.load_split(cfg, "val", data_dir)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    R = strategy.num_replicas_in_sync
    plan = batching.plan_batches(cfg, num_replicas=R)
    ds = batching.make_batches(pairs, Tokenizer(tokenizer_model), cfg, training=True, plan=plan).take(12)
    out = []
    for (x, _), y in strategy.experimental_distribute_dataset(ds):
        xs, ys = strategy.experimental_local_results(x), strategy.experimental_local_results(y)
        out.append([[int(a.shape[0]), int(a.shape[1]), int(b.shape[1])] for a, b in zip(xs, ys)])
    print(json.dumps({"replicas": R, "batches": out}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
