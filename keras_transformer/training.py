"""Training (§5): the model, Adam on Eq. 3, label smoothing, under a ``tf.distribute`` strategy.

``train(recipe, workdir)`` is the whole job behind ``kt-train``: it takes the
work directory's lock, writes the resolved recipe into it, restores the newest
intact checkpoint if there is one (so a killed run resumes where it was), and
runs ``model.fit`` until the optimizer has made ``recipe.train.train_steps`` updates.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
import time
import warnings
from typing import Optional

import keras
import tensorflow as tf
from absl import logging

from keras_transformer import callbacks as kt_callbacks
from keras_transformer.config import Recipe
from keras_transformer.data import batching
from keras_transformer.runtime import quietly
from keras_transformer.schedules import paper_adam
from keras_transformer.train_step import TransformerTrainer, build_trainer

STRATEGIES = ("mirrored", "one_device", "multi_worker", "tpu")
RECIPE_FILE = "recipe.json"


def make_strategy(name: str) -> tf.distribute.Strategy:
    """``mirrored`` (all local GPUs, or the CPU), ``one_device``, ``multi_worker`` (TF_CONFIG), ``tpu``."""
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise ValueError("--strategy=multi_worker needs the TF_CONFIG environment variable (cluster and task)")
        with quietly():
            return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"--strategy: unknown strategy {name!r}; expected one of {', '.join(STRATEGIES)}")


def batch_plan(recipe: Recipe, strategy: Optional[tf.distribute.Strategy] = None) -> batching.BatchPlan:
    """How the recipe's global token budget splits over the strategy's replicas and micro-batches."""
    strategy = strategy or tf.distribute.get_strategy()
    return batching.plan_batches(recipe.data, strategy.num_replicas_in_sync, recipe.train.gradient_accumulation_steps)


def compile_model(recipe: Recipe, strategy: Optional[tf.distribute.Strategy] = None,
                  accumulation: Optional[int] = None) -> TransformerTrainer:
    """Build and compile the model of ``recipe`` in the strategy's scope (§5.3, §5.4).

    ``accumulation``: micro-batches per update; default from :func:`batch_plan`.
    """
    strategy = strategy or tf.distribute.get_strategy()
    accumulation = accumulation or batch_plan(recipe, strategy).accumulation
    # bfloat16 compute with float32 variables (mixed_bfloat16): 1.4x the float32 step on this CPU
    # (bench/bench_train.py); set every time, since the policy is process-global.
    keras.mixed_precision.set_global_policy("mixed_bfloat16" if recipe.train.mixed_precision else "float32")
    with strategy.scope():
        model = build_trainer(recipe.model, recipe.train.label_smoothing, accumulation)
        model.compile(optimizer=paper_adam(recipe.model.d_model, recipe.train), jit_compile=recipe.train.jit_compile)
        model.optimizer.build(model.trainable_variables)
    return model


def _is_chief(strategy) -> tuple:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True, 0
    task_type, task_id = resolver.task_type, resolver.task_id or 0
    return task_type == "chief" or (task_type == "worker" and task_id == 0), task_id


def write_recipe(recipe: Recipe, workdir: str) -> None:
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, RECIPE_FILE), "w") as f:
        f.write(recipe.to_json() + "\n")


def read_recipe(workdir: str) -> Recipe:
    path = os.path.join(workdir, RECIPE_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no recipe.json; is {workdir} a training work directory?")
    with open(path) as f:
        return Recipe.from_dict(json.load(f))


def train(recipe: Recipe, workdir: str, data_dir: Optional[str] = None, strategy="mirrored", datasets=None,
          verbose: Optional[int] = None, train_epochs: Optional[int] = None) -> dict:
    """Train ``recipe`` into ``workdir``; resumable. Returns a summary dict (steps, losses, timing).

    ``strategy`` is a name for ``make_strategy`` or a ``tf.distribute.Strategy``.
    ``datasets`` = (train, validation) may be given directly (tests); by default
    they are built from the recipe's corpus with ``keras_transformer.data``.
    ``train_epochs``: train that many passes over the corpus instead of ``recipe.train.train_steps``.

    The run owns ``workdir`` while it lives (``workdir_lock``: a second run exits with a ValueError naming
    the owner). A run the work directory cannot take (another model shape or tokenizer, every checkpoint
    damaged) is refused with a ValueError before anything in it is written. Resuming starts from the
    newest checkpoint that reads back whole; damaged newer ones are named and moved to
    ``checkpoints/damaged/``, never deleted.
    """
    from keras_transformer import workdir_lock

    if isinstance(strategy, str):
        strategy = make_strategy(strategy)
    is_chief, _ = _is_chief(strategy)
    if recipe.train.keep_best_by == "val_bleu" and isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        raise ValueError("keep_best_by: val_bleu is computed on the chief only; use val_loss with multi_worker")
    if not is_chief:  # every worker of a multi-worker run shares the chief's work directory; the chief owns it
        return _train(recipe, workdir, data_dir, strategy, datasets, verbose, train_epochs)
    try:
        with workdir_lock.hold(workdir):
            return _train(recipe, workdir, data_dir, strategy, datasets, verbose, train_epochs)
    except workdir_lock.WorkdirBusy as e:
        raise ValueError(f"workdir: {e}") from None


def _train(recipe: Recipe, workdir: str, data_dir: Optional[str], strategy: tf.distribute.Strategy, datasets,
           verbose: Optional[int], train_epochs: Optional[int]) -> dict:
    from keras_transformer import checkpoint_health, checkpoints

    is_chief, task_id = _is_chief(strategy)
    fresh = checkpoints.prepare_workdir(recipe, workdir, data_dir)
    resume = checkpoints.resume_point(workdir) if is_chief else None  # refuses when every checkpoint is damaged
    if train_epochs is not None:
        steps = steps_for_epochs(recipe, workdir, data_dir, train_epochs)
        recipe = dataclasses.replace(recipe, train=dataclasses.replace(recipe.train, train_steps=steps))
    t = recipe.train
    if is_chief and verbose != 0:
        print(f"resolved recipe (also in {os.path.join(workdir, RECIPE_FILE)}):\n{recipe.to_json()}", flush=True)
    keras.utils.set_random_seed(t.seed)
    plan = batch_plan(recipe, strategy)
    if is_chief and verbose != 0:
        print(f"tokens per update: {plan.tokens_per_update} per side = {plan.replicas} replica(s) x "
              f"{plan.accumulation} micro-batch(es) x {plan.replica_tokens} (tokens_per_batch="
              f"{recipe.data.tokens_per_batch}, max_tokens_per_device={recipe.data.max_tokens_per_device or 'none'})",
              flush=True)

    if datasets is None:
        from keras_transformer.data import build_datasets

        # deterministic: the same seed gives the same batches, so a resumed run continues the stream
        train_ds, eval_ds, tok = build_datasets(recipe, workdir, data_dir, plan=plan, deterministic=True)
    else:
        train_ds, eval_ds = datasets
        tok = None
    if is_chief:  # the corpus has passed its check: from here on the run writes into the work directory
        write_recipe(recipe, workdir)
        checkpoint_dir = os.path.join(workdir, checkpoints.CHECKPOINT_DIR)
        for prefix, problem in resume.damaged:
            kept = checkpoint_health.set_aside(prefix, checkpoint_dir)
            print(f"warning: skipped checkpoint {prefix}: {problem}; its files are kept in {kept}; resuming from "
                  f"{resume.intact}", file=sys.stderr, flush=True)
    if t.eval_batches and eval_ds is not None:
        eval_ds = eval_ds.take(t.eval_batches)
    if eval_ds is not None:
        eval_ds = eval_ds.cache()  # tokenise and bucket the validation set once, not every epoch

    model = compile_model(recipe, strategy, plan.accumulation)
    state = kt_callbacks.CheckpointState(model, os.path.join(workdir, "checkpoints"), t.keep_checkpoints, is_chief,
                                         task_id)
    start_step = (state.restore(resume.intact) if resume.intact else 0) if is_chief else state.restore_latest()
    if start_step:
        logging.info("Resumed from step %d", start_step)
    elif fresh and t.init_from:
        checkpoints.initial_weights(t.init_from, model, recipe)
    if start_step >= t.train_steps:
        logging.info("Already trained for %d steps; nothing to do.", start_step)
        return {"steps": start_step, "resumed_from": start_step, "history": {}}
    # Continue the data stream where the checkpoint left it: no batch seen twice, none skipped.
    train_ds = train_ds.skip(start_step * plan.accumulation)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    train_ds = train_ds.with_options(options)

    batches_per_epoch = t.checkpoint_every * plan.accumulation  # one Keras "epoch" = one checkpoint interval
    epochs = math.ceil(t.train_steps / t.checkpoint_every)
    interactive = sys.stdout.isatty()
    stop = kt_callbacks.StopAtStep(t.train_steps, t.max_train_minutes * 60)
    callbacks = [
        stop,
        keras.callbacks.TerminateOnNaN(),
        kt_callbacks.TensorBoardScalars(os.path.join(workdir, "tensorboard"), every=max(1, min(50, t.checkpoint_every)),
                                        log_lines=not interactive and verbose != 0),
        kt_callbacks.SaveCheckpoints(state, t.checkpoint_every),
    ]
    if t.bleu_samples and is_chief:  # after TensorBoardScalars, which would otherwise log val_bleu twice
        from keras_transformer.bleu_callback import DevBleu
        from keras_transformer.data import tokenizer as tokenizer_lib

        tok = tok or tokenizer_lib.get_or_train(recipe, workdir, data_dir)
        callbacks.append(DevBleu.from_eval_split(recipe, tok, os.path.join(workdir, "tensorboard"), t.bleu_samples,
                                                 data_dir))
    keep_best = None
    if t.keep_best_by:  # after DevBleu, whose val_bleu it may rank by
        keep_best = kt_callbacks.KeepBest(state, os.path.join(workdir, checkpoints.BEST_DIR), t.keep_best_by,
                                          t.keep_best, t.early_stopping_patience)
        callbacks.append(keep_best)
    start = time.time()
    # Keras warns when a dataset of unknown length ends (our validation pass) and about `shuffle`.
    warnings.filterwarnings("ignore", message=".*ran out of data.*")
    warnings.filterwarnings("ignore", message=".*`shuffle=True` was passed.*")
    history = model.fit(
        train_ds,
        validation_data=eval_ds,
        epochs=epochs,
        initial_epoch=start_step // t.checkpoint_every,
        steps_per_epoch=batches_per_epoch,
        callbacks=callbacks,
        verbose=(1 if interactive else 0) if verbose is None else verbose,
    )
    keras.mixed_precision.set_global_policy("float32")  # later models in this process (e.g. inference)
    steps = kt_callbacks.optimizer_step(model.optimizer)
    if stop.stopped_by_time:
        logging.info("Stopped at step %d: --max_train_minutes=%g reached.", steps, t.max_train_minutes)
    stopped_early = bool(keep_best and keep_best.stopped_early)
    if stopped_early:
        logging.info("Stopped at step %d: %s has not improved for %d validations.", steps, t.keep_best_by,
                     t.early_stopping_patience)
    summary = {
        "steps": steps,
        "weights_sha256": weights_digest(model),
        "resumed_from": start_step,
        "train_seconds": time.time() - start,
        "stopped_by_time": stop.stopped_by_time,
        "stopped_early": stopped_early,
        "history": {k: [float(x) for x in v] for k, v in history.history.items()},
    }
    if is_chief:
        with open(os.path.join(workdir, "train_summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
    return summary


def steps_for_epochs(recipe: Recipe, workdir: str, data_dir: Optional[str], epochs: int) -> int:
    """Parameter updates in ``epochs`` passes over the training corpus (batches per pass counted once)."""
    from keras_transformer.data import corpora, tokenizer

    plan = batch_plan(recipe)  # tokens per update do not depend on the replica count
    tok = tokenizer.get_or_train(recipe, workdir, data_dir)
    pairs, _ = corpora.load_split(recipe.data, recipe.data.train_split, data_dir)
    one_pass = batching.make_batches(pairs, tok, recipe.data, training=True, plan=plan, repeat=False)
    micro_batches = int(one_pass.reduce(0, lambda n, _: n + 1))
    return max(1, epochs * micro_batches // plan.accumulation)


def weights_digest(model) -> str:
    """SHA-256 of all weights' bytes: equal digests mean bit-identical models (e.g. across workers)."""
    digest = hashlib.sha256()
    for weight in model.weights:
        digest.update(weight.numpy().tobytes())
    return digest.hexdigest()
