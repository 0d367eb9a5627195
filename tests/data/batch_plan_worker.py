"""Run as ``python -m tests.data.batch_plan_worker TMPDIR`` (a fresh process with 4 logical CPUs; reads the
data directory's Multi30k).

For 1, 2 and 4 mirrored replicas: the batch plan of the multi30k recipe at 1,024 tokens per device, and the
training batches it makes of Multi30k train with a 400-piece tokenizer trained into TMPDIR. Prints one JSON line:
{replicas: {accumulation, replica_tokens, tokens_per_update, max_batch_tokens, rows_divisible}}.
"""

import json

from keras_transformer.tf_setup import init_devices

init_devices(cpu_devices=4)

import dataclasses  # noqa: E402
import sys  # noqa: E402

import tensorflow as tf  # noqa: E402

from keras_transformer import recipes  # noqa: E402
from keras_transformer import training  # noqa: E402
from keras_transformer.data import batching, corpora  # noqa: E402
from keras_transformer.data.tokenizer import Tokenizer  # noqa: E402


def main(tmp_dir):
    r = recipes.get("multi30k")
    r = dataclasses.replace(r, model=dataclasses.replace(r.model, vocab_size=400),
                            data=dataclasses.replace(r.data, tokens_per_batch=4096, max_tokens_per_device=1024,
                                                    tokenizer_sample_lines=2000))
    cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
    english, german = (corpora.read_lines(corpora.resolve_data_dir() / corpora.MULTI30K_DIR / f"train.{lang}.gz")
                       for lang in ("en", "de"))
    tok = Tokenizer.train(english + german, 400, tmp_dir + "/tok", sample_lines=2000)
    pairs = tf.data.Dataset.from_tensor_slices((english, german))
    out = {}
    for replicas in (1, 2, 4):
        plan = training.batch_plan(r, tf.distribute.MirroredStrategy(cpus[:replicas]))
        batches = batching.make_batches(pairs, tok, r.data, training=True, plan=plan, repeat=False,
                                        deterministic=True)
        stats = batching.measure_batches(batches, replicas)
        out[replicas] = {"accumulation": plan.accumulation, "replica_tokens": plan.replica_tokens,
                         "tokens_per_update": plan.tokens_per_update, "max_batch_tokens": stats.max_batch_tokens,
                         "rows_divisible": all(b % replicas == 0 for b, _, _ in stats.shapes)}
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
