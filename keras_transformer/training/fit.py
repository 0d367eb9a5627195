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
from typing import Dict, List, Optional

import keras
import tensorflow as tf
from absl import logging

from keras_transformer import _keras_compat, precision, tasks
from keras_transformer.checkpoints import health as checkpoint_health
from keras_transformer.checkpoints import state as checkpoints
from keras_transformer.config import STRATEGIES, Recipe
from keras_transformer.data import batching, build_datasets, source_piece_counts, tokenizer
from keras_transformer.schedules import noam_schedule, paper_adam
from keras_transformer.tf_setup import quietly
from keras_transformer.training import callbacks as kt_callbacks
from keras_transformer.training.progress import Progress, recipe_summary
from keras_transformer.training import data_fingerprint, init_from, preemption
from keras_transformer.training import lock as workdir_lock
from keras_transformer.training.train_step import TransformerTrainer, build_trainer
from keras_transformer.workdir import WorkDir


@dataclasses.dataclass(frozen=True)
class TrainSummary:
    """What one :func:`train` call did (the chief also writes it to ``<workdir>/train_summary.json``)."""

    steps: int  # parameter updates made so far (the optimizer's step)
    resumed_from: int  # the step the call started from (0: a fresh run)
    weights_sha256: str  # weights_digest() at the end: equal digests mean bit-identical weights
    train_seconds: float = 0.0  # wall time of model.fit
    stopped_by_time: bool = False  # recipe.train.max_train_minutes ended it
    past_budget: bool = False  # max_train_minutes ran out below recipe.train.min_train_steps, which ended it
    stopped_early: bool = False  # keep_best_by's early_stopping_patience ended it
    policy: str = "float32"  # the Keras dtype policy it trained under (precision.training_policy)
    history: Dict[str, List[float]] = dataclasses.field(default_factory=dict)  # Keras' logs, one per checkpoint


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
                  accumulation: Optional[int] = None, policy: Optional[str] = None) -> TransformerTrainer:
    """Build and compile the model of ``recipe`` in the strategy's scope (§5.3, §5.4).

    ``accumulation``: micro-batches per update; default from :func:`batch_plan`. ``policy``: the Keras dtype
    policy; default ``mixed_bfloat16`` if ``recipe.train.mixed_precision`` else ``float32``, as asked
    (:func:`train` asks ``precision.training_policy``, which grants reduced precision only where the hardware has
    it). Under ``mixed_float16`` Adam is wrapped in a ``LossScaleOptimizer`` (dynamic loss scaling).
    """
    strategy = strategy or tf.distribute.get_strategy()
    accumulation = accumulation or batch_plan(recipe, strategy).accumulation
    policy = policy or ("mixed_bfloat16" if recipe.train.mixed_precision else "float32")
    keras.mixed_precision.set_global_policy(policy)  # set every time, since the policy is process-global
    with strategy.scope():
        model = build_trainer(recipe, recipe.train.label_smoothing, accumulation, recipe.train.freeze)
        schedule = noam_schedule(recipe.model.d_model, recipe.train)
        optimizer = paper_adam(recipe.model.d_model, recipe.train, schedule)
        if policy == "mixed_float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        model.compile(optimizer=optimizer, jit_compile=recipe.train.jit_compile)
        model.optimizer.build(model.trainable_variables)
    model.lr_schedule = schedule  # Eq. 3, whose cooldown multiplier callbacks.Cooldown sets (not a weight)
    return model


def _cluster_task(strategy) -> tuple:
    """(task type or None outside a cluster, task index) of this process."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return None, 0
    return resolver.task_type, resolver.task_id or 0


def is_chief(strategy) -> bool:
    """Whether this process owns the work directory: the only process, a cluster's chief, or else worker 0."""
    task_type, index = _cluster_task(strategy)
    return task_type in (None, "chief") or (task_type == "worker" and index == 0)


def task_id(strategy) -> int:
    """This process's index among its cluster's tasks of the same type (0 outside a cluster)."""
    return _cluster_task(strategy)[1]


def train(recipe: Recipe, workdir: str, data_dir: Optional[str] = None, strategy="mirrored", datasets=None,
          verbose: Optional[int] = None, train_epochs: Optional[int] = None,
          allow_data_change: bool = False) -> TrainSummary:
    """Train ``recipe`` into ``workdir``; resumable. Returns what it did (steps, losses, timing).

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
    if train_epochs is not None and train_epochs <= 0:
        raise ValueError(f"train_epochs: must be positive, got {train_epochs}")
    if isinstance(strategy, str):
        strategy = make_strategy(strategy)
    best_by, metric = recipe.train.keep_best_by, tasks.get(recipe).metric
    if best_by not in ("", "val_loss", f"val_{metric}"):
        raise ValueError(f"keep_best_by: the {recipe.task} task's dev score is val_{metric}, not {best_by}")
    if best_by == f"val_{metric}" and isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        raise ValueError(f"keep_best_by: {best_by} is computed on the chief only; use val_loss with multi_worker")
    if not is_chief(strategy):  # every worker of a multi-worker run shares the chief's work directory, which it owns
        return _train(recipe, workdir, data_dir, strategy, datasets, verbose, train_epochs, allow_data_change)
    try:
        with workdir_lock.hold(workdir):
            return _train(recipe, workdir, data_dir, strategy, datasets, verbose, train_epochs, allow_data_change)
    except workdir_lock.WorkdirBusy as e:
        raise ValueError(f"workdir: {e}") from None


def _train(recipe: Recipe, workdir: str, data_dir: Optional[str], strategy: tf.distribute.Strategy, datasets,
           verbose: Optional[int], train_epochs: Optional[int], allow_data_change: bool = False) -> TrainSummary:
    chief, paths = is_chief(strategy), WorkDir(workdir)
    corpus = tasks.get(recipe).corpus
    position = data_fingerprint.check(recipe, workdir, data_dir, allow_data_change, chief) if datasets is None else None
    fresh = init_from.prepare_workdir(recipe, workdir, data_dir, corpus)
    policy = precision.training_policy(recipe.train.mixed_precision, strategy,
                                       lambda line: print(f"warning: {line}", file=sys.stderr, flush=True))
    if not fresh:
        init_from.check_resume(workdir, recipe, policy)
    # Every worker resumes from the chief's newest intact checkpoint (a worker's own copies are removed once
    # written); a ValueError when every checkpoint is damaged.
    resume = checkpoints.resume_point(workdir)
    if train_epochs is not None:
        steps = steps_for_epochs(recipe, workdir, data_dir, train_epochs)
        recipe = dataclasses.replace(recipe, train=dataclasses.replace(recipe.train, train_steps=steps))
    t = recipe.train
    plan = batch_plan(recipe, strategy)
    if chief and verbose != 0:
        print(precision.policy_reason(policy, strategy), flush=True)
        print("\n".join(recipe_summary(recipe, paths.recipe_file)), flush=True)
        print(f"tokens per update: {plan.tokens_per_update} per side = {plan.replicas} replica(s) x "
              f"{plan.accumulation} micro-batch(es) x {plan.replica_tokens} (tokens_per_batch="
              f"{recipe.data.tokens_per_batch}, max_tokens_per_device={recipe.data.max_tokens_per_device or 'none'})",
              flush=True)
    keras.utils.set_random_seed(t.seed)
    train_ds, eval_ds, tok = _datasets(recipe, workdir, data_dir, plan, corpus, datasets)
    if chief:  # the corpus has passed its check: from here on the run writes into the work directory
        paths.write_recipe(recipe)
        paths.write_policy(policy)
        for prefix, problem in resume.damaged:
            kept = checkpoint_health.set_aside(prefix, str(paths.damaged))
            print(f"warning: skipped checkpoint {prefix}: {problem}; its files are kept in {kept}; resuming from "
                  f"{resume.intact}", file=sys.stderr, flush=True)
    model = compile_model(recipe, strategy, plan.accumulation, policy)
    if t.freeze and chief and verbose != 0:
        frozen = [v for v in model.weights if v.path.split("/", 1)[-1] in model.frozen_paths]
        print(f"freeze: {len(frozen)} variables, {sum(math.prod(v.shape) for v in frozen):,} parameters kept as they "
              f"are (--freeze={t.freeze})", flush=True)
    state = checkpoints.CheckpointState(model, str(paths.checkpoints), t.keep_checkpoints, chief, task_id(strategy))
    start_step, tok = _start(recipe, model, state, resume, fresh, workdir, data_dir, corpus, tok)
    if start_step >= t.train_steps:
        logging.info("Already trained for %d steps; nothing to do.", start_step)
        return TrainSummary(steps=start_step, resumed_from=start_step, weights_sha256=weights_digest(model),
                            policy=policy)
    # Continue the data stream where the checkpoint left it: no batch seen twice, none skipped.
    train_ds = train_ds.skip((position.skip_steps(start_step) if position else start_step) * plan.accumulation)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    train_ds = train_ds.with_options(options)
    callbacks, stop, keep_best = _callbacks(recipe, model, state, chief, verbose, workdir, data_dir, corpus, tok)
    start = time.time()
    with preemption.catch_signals(state, strategy) as on_signal, _keras_compat.quiet_fit():  # SIGTERM, SIGINT
        history = model.fit(
            train_ds,
            validation_data=eval_ds,
            epochs=math.ceil(t.train_steps / t.checkpoint_every),
            initial_epoch=start_step // t.checkpoint_every,
            steps_per_epoch=t.checkpoint_every * plan.accumulation,  # one Keras "epoch" = one checkpoint interval
            shuffle=False,  # the tf.data pipeline shuffles (batching.py)
            callbacks=callbacks + on_signal,
            verbose=verbose or 0,
        )
    keras.mixed_precision.set_global_policy("float32")  # later models in this process (e.g. inference)
    summary = _summary(recipe, model, history, stop, keep_best, start_step, time.time() - start, policy)
    if chief:
        paths.train_summary.write_text(json.dumps(dataclasses.asdict(summary), indent=2))
    return summary


def _datasets(recipe: Recipe, workdir, data_dir, plan, corpus, datasets) -> tuple:
    """(training batches, validation batches or None, the tokenizer or None when ``datasets`` were given)."""
    if datasets is None:
        # deterministic: the same seed gives the same batches, so a resumed run continues the stream
        train_ds, eval_ds, tok = build_datasets(recipe, workdir, data_dir, plan=plan, deterministic=True,
                                                corpus=corpus)
    else:
        (train_ds, eval_ds), tok = datasets, None
    if recipe.train.eval_batches and eval_ds is not None:
        eval_ds = eval_ds.take(recipe.train.eval_batches)
    if eval_ds is not None:
        eval_ds = eval_ds.cache()  # tokenise and bucket the validation set once, not every epoch
    return train_ds, eval_ds, tok


def _start(recipe: Recipe, model, state, resume, fresh: bool, workdir, data_dir, corpus, tok) -> tuple:
    """(the step the run starts from, the tokenizer if it was needed): the task's word tables, then the newest
    intact checkpoint, else --init_from's weights, and the piece counts of word dropout by frequency."""
    if model.tokenizer_tables or recipe.model.source_token_dropout_alpha or recipe.train.new_vocabulary:
        tok = tok or tokenizer.get_or_train(recipe, workdir, data_dir, corpus)
    if model.tokenizer_tables:  # e.g. the parser's word tables, from the tokenizer (tasks/parsing/)
        tasks.get(recipe).prepare_model(model, tok)
    start_step = state.restore(resume.intact) if resume.intact else 0
    if start_step:
        logging.info("Resumed from step %d", start_step)
    elif fresh and recipe.train.init_from:
        init_from.initial_weights(recipe.train.init_from, model, recipe, tok, data_dir, corpus)
    # The piece counts of this run's training split, after --init_from; a resumed run's checkpoint holds them.
    if recipe.model.source_token_dropout_alpha and not start_step:
        model.set_piece_counts(source_piece_counts(recipe, workdir, tok, data_dir, corpus))
    return start_step, tok


def _callbacks(recipe: Recipe, model, state, chief: bool, verbose, workdir, data_dir, corpus, tok) -> tuple:
    """(the run's callbacks in order, its StopAtStep, its KeepBest or None)."""
    t, paths = recipe.train, WorkDir(workdir)
    floor = min(t.min_train_steps, t.train_steps)  # the steps to make even past max_train_minutes
    stop = kt_callbacks.StopAtStep(t.train_steps, t.max_train_minutes * 60, floor)
    every = max(1, min(50, t.checkpoint_every))
    callbacks = [
        stop,
        keras.callbacks.TerminateOnNaN(),
        kt_callbacks.TensorBoardScalars(str(paths.tensorboard), every=every),
        kt_callbacks.SaveCheckpoints(state, t.checkpoint_every),
    ]
    if t.cooldown:
        callbacks.insert(0, kt_callbacks.Cooldown(model.lr_schedule.multiplier, t.cooldown, t.train_steps,
                                                  t.max_train_minutes * 60, floor))
    if t.bleu_samples and chief:  # after TensorBoardScalars, which would otherwise log val_bleu twice
        tok = tok or tokenizer.get_or_train(recipe, workdir, data_dir, corpus)
        callbacks.append(tasks.get(recipe).dev_callback(recipe, tok, str(paths.tensorboard), t.bleu_samples, data_dir))
    keep_best = None
    if t.keep_best_by:  # after DevBleu, whose val_bleu it may rank by
        keep_best = kt_callbacks.KeepBest(state, str(paths.best), t.keep_best_by, t.keep_best,
                                          t.early_stopping_patience, min_gap=t.checkpoint_every // 2)
        callbacks.append(keep_best)
    if verbose is None and chief:  # the run's one progress line (Keras's own bars with verbose=1 or 2)
        callbacks.append(Progress(t.train_steps, t.max_train_minutes * 60, every=every, min_steps=floor))
    return callbacks, stop, keep_best


def _summary(recipe: Recipe, model, history, stop, keep_best, start_step: int, seconds: float,
             policy: str) -> TrainSummary:
    """What the run did, with its reasons for stopping logged."""
    t, steps = recipe.train, kt_callbacks.optimizer_step(model.optimizer)
    if stop.stopped_by_time:
        logging.info("Stopped at step %d: --max_train_minutes=%g reached.", steps, t.max_train_minutes)
    stopped_early = bool(keep_best and keep_best.stopped_early)
    if stopped_early:
        logging.info("Stopped at step %d: %s has not improved for %d validations.", steps, t.keep_best_by,
                     t.early_stopping_patience)
    return TrainSummary(steps=steps, resumed_from=start_step, weights_sha256=weights_digest(model),
                        train_seconds=seconds, stopped_by_time=stop.stopped_by_time, past_budget=stop.past_budget,
                        stopped_early=stopped_early, policy=policy,
                        history={k: [float(x) for x in v] for k, v in history.history.items()})


def steps_for_epochs(recipe: Recipe, workdir: str, data_dir: Optional[str], epochs: int) -> int:
    """Parameter updates in ``epochs`` passes over the training corpus (batches per pass counted once)."""
    plan = batch_plan(recipe)  # tokens per update do not depend on the replica count
    corpus = tasks.get(recipe).corpus
    tok = tokenizer.get_or_train(recipe, workdir, data_dir, corpus)
    pairs, _ = corpus.load_split(recipe.data, recipe.data.train_split, data_dir)
    one_pass = batching.make_batches(pairs, tok, recipe.data, training=True, plan=plan, repeat=False)
    micro_batches = int(one_pass.reduce(0, lambda n, _: n + 1))
    return max(1, epochs * micro_batches // plan.accumulation)


def weights_digest(model) -> str:
    """SHA-256 of all weights' bytes: equal digests mean bit-identical models (e.g. across workers)."""
    digest = hashlib.sha256()
    for weight in model.weights:
        digest.update(weight.numpy().tobytes())
    return digest.hexdigest()
