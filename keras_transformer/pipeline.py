"""The whole job in one call, for either task: train -> average checkpoints -> choose α on dev -> evaluate on the
test split -> export -> decode samples with the export.

This is what the README's main command runs (``kt-pipeline``): a newcomer sees
every stage of §5-§6 on real data, and the exported SavedModel is the artefact
TF Serving loads. Each stage is the same library call its own entry point makes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from keras_transformer import artifacts, inference, tasks, training
from keras_transformer.checkpoints import averaging
from keras_transformer.config import DecodeConfig, Recipe
from keras_transformer.data import corpora, multilingual
from keras_transformer.serving import loading, writer
from keras_transformer.workdir import WorkDir

METADATA_FILE = "metadata.json"
SHIPPED_DIR = Path(__file__).resolve().parent.parent / "saved_models"  # the repository's committed exports


def shipped_results(recipe: Recipe, export_dir: str, shipped_dir: Path = SHIPPED_DIR) -> List[dict]:
    """The metadata of every committed export scored on this recipe's test set, with the command that made it.

    Same corpus, languages and test split; ``export_dir`` itself and exports without a recorded
    ``command`` are left out. A newcomer's short run is shown next to what the full recipe reaches.
    """
    data = recipe.data
    wanted = (data.corpus, data.source_lang, data.target_lang, data.test_split)
    found = []
    for path in sorted(shipped_dir.glob(f"*/{METADATA_FILE}")):
        if path.parent.resolve() == Path(export_dir).resolve():
            continue
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
            shipped = meta["recipe_config"]["data"]
            key = (shipped["corpus"], shipped["source_lang"], shipped["target_lang"], meta["test_split"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not one of ours, or written before metadata recorded these
        if key == wanted and meta.get("command"):
            found.append(dict(meta, export_dir=str(path.parent)))
    return found


def run_job(recipe: Recipe, workdir: str, export_dir: str, data_dir: Optional[str] = None,
            strategy: str = "mirrored", eval_sentences: Optional[int] = None,
            samples: Optional[Sequence[str]] = None, log=print, command: Optional[str] = None) -> dict:
    """Runs every stage for the recipe's task and returns (and writes next to the export) a metadata dict of
    what it measured. ``samples`` default to the task's; ``command`` (the command line that ran it) is recorded
    in the metadata, so a later run on the same test set can print how to reproduce this one.
    """
    task = tasks.get(recipe)
    samples = list(task.sample_sentences if samples is None else samples)
    if recipe.data.target_langs:  # one model, several targets: each sample into each
        samples = [multilingual.tagged(lang, line) for lang in recipe.data.target_langs for line in samples]
    data_dir = str(corpora.resolve_data_dir(data_dir))
    stages = Stages(workdir, recipe, eval_sentences)
    if stages.get("trained") and Path(f"{stages.get('trained')['averaged']}.index").is_file():
        averaged, trained = stages.get("trained")["averaged"], stages.get("trained")["record"]
        log(f"[1/5] already trained {recipe.name} to step {trained['step']} ({stages.path} records it)")
        log(f"[2/5] already averaged steps {trained['averaged_steps']} into {averaged}")
    else:
        averaged, trained = train_and_average(recipe, workdir, data_dir, strategy, log)
        stages.finish("trained", {"averaged": averaged, "record": trained})

    inputs, references = task.read_split(recipe, recipe.data.test_split, data_dir)
    if eval_sentences:  # the first N of each direction (read_split gives a multi-target recipe's in turn)
        size, directions = len(inputs) // (len(recipe.data.target_langs) or 1), len(recipe.data.target_langs) or 1
        inputs, references = ([x for i in range(directions) for x in part[i * size:i * size + eval_sentences]]
                              for part in (inputs, references))
    evaluated = stages.get("evaluated")
    if evaluated and evaluated["averaged"] == averaged:
        decode = dataclasses.replace(recipe.decode, **evaluated["decode"])
        alpha_scores, scores = evaluated["alpha_scores"], evaluated["scores"]
        by_direction = evaluated.get("by_direction", {})
        log(f"[3/5] already evaluated on {recipe.data.test_split} ({len(inputs)} sentences, α {decode.alpha:g}): "
            f"{task.format_scores(scores)}")
    else:
        averaged_model = inference.load(workdir, "averaged", data_dir)
        decode, alpha_scores = choose_alpha(recipe, averaged_model, data_dir, log)
        scores, decoded = task.evaluate(averaged_model, inputs, references, alpha=decode.alpha)
        log(f"[3/5] {recipe.data.test_split} ({len(inputs)} sentences, beam {decode.beam_size}, α {decode.alpha:g}, "
            f"{scores['seconds']:.0f} s): {task.format_scores(scores)}")
        by_direction = _by_direction(task, recipe, decoded.outputs, references)
        stages.finish("evaluated", {"averaged": averaged, "alpha_scores": alpha_scores, "scores": scores,
                                    "by_direction": by_direction, "decode": {"alpha": decode.alpha}})
    for pair, (line, _) in by_direction.items():
        log(f"      {pair}: {line}")
    for shipped in shipped_results(recipe, export_dir):
        log(f"      shipped {os.path.relpath(shipped['export_dir'])} ({shipped['recipe']}, "
            f"{shipped['train_seconds'] / 60:.0f} min of training): {task.metric.upper()} {shipped[task.metric]:.2f}; "
            f"reproduce: {shipped['command']}")

    if exported_from(export_dir) == checkpoint_name(workdir, averaged):
        log(f"[4/5] already exported to {export_dir} (its export.json names {checkpoint_name(workdir, averaged)})")
    else:
        export_averaged(workdir, averaged, export_dir, data_dir, log, decode)

    outputs = task.decode(inference.load(export_dir), samples).outputs
    log("[5/5] outputs of the exported model:")
    for source, target in zip(samples, outputs):
        log(f"  {source}\n    -> {target}")

    return write_metadata(export_dir, recipe, command, trained, {
        "test_split": recipe.data.test_split,
        "test_sentences": len(inputs),
        **task.results(scores),
        **({"by_direction": {pair: results for pair, (_, results) in by_direction.items()}} if by_direction else {}),
        "decode": {"beam_size": decode.beam_size, "alpha": decode.alpha, "extra_length": decode.extra_length,
                   **({f"alpha_val_{task.metric}": alpha_scores} if alpha_scores else {})},
        "samples": dict(zip(samples, outputs)),
    })


def _by_direction(task, recipe: Recipe, outputs: Sequence[str], references: Sequence) -> dict:
    """{source-target: (its scores' line, its results)} of a multi-target recipe's test outputs, which
    ``read_split`` gives each direction's in turn ({} for one target)."""
    langs = recipe.data.target_langs
    size = len(references) // max(len(langs), 1)
    found = {}
    for i, lang in enumerate(langs):
        scores = task.score(outputs[i * size:(i + 1) * size], references[i * size:(i + 1) * size])
        found[f"{recipe.data.source_lang}-{lang}"] = (task.format_scores(scores), task.results(scores))
    return found


def choose_alpha(recipe: Recipe, loaded, data_dir: str, log=print, grid: Optional[Tuple[float, ...]] = None
                 ) -> Tuple[DecodeConfig, Dict[str, float]]:
    """The decoding settings for the test set and the export: with ``recipe.decode.alpha_grid`` (or ``grid``),
    the α whose outputs for the eval split score best by the task's metric (§6.1: chosen on the development
    set; ties: the first); the test set is never decoded to choose it. ``loaded`` decodes with α as its own
    length penalty reads it (a CTranslate2 directory's native search: log P / |Y|^α).

    Returns those settings and the eval split's score for each α tried ({} without a grid).
    """
    grid = recipe.decode.alpha_grid if grid is None else grid
    if not grid:
        return recipe.decode, {}
    task = tasks.get(recipe)
    inputs, references = task.read_split(recipe, recipe.data.eval_split, data_dir)
    score = {alpha: task.evaluate(loaded, inputs, references, alpha=alpha)[0][task.metric] for alpha in grid}
    best = max(grid, key=score.get)  # max keeps the first of equal scores
    scores = "  ".join(f"α {alpha:g}: {value:.2f}" for alpha, value in score.items())
    log(f"      {recipe.data.eval_split} {task.metric.upper()} by length penalty α: {scores}; decoding with α {best:g}")
    return dataclasses.replace(recipe.decode, alpha=best), {f"{alpha:g}": round(s, 2) for alpha, s in score.items()}


def train_and_average(recipe: Recipe, workdir: str, data_dir: str, strategy: str, log=print) -> Tuple[str, dict]:
    """Stages 1-2 of every task's pipeline: train (resuming the work directory), then average the last
    ``recipe.decode.average_checkpoints`` checkpoints (§6.1), or the best by validation if the recipe keeps them.

    Returns the averaged checkpoint's path and what the metadata records of training: step, train_seconds,
    stopped_by_time, policy (the dtype policy it trained under), averaged_steps.
    """
    start = time.time()
    summary = training.train(recipe, workdir, data_dir, strategy)
    train_seconds = time.time() - start
    budget = ""
    if summary.past_budget:
        budget = (f"; past its {recipe.train.max_train_minutes:g}-minute budget (--max_train_minutes) it trained on "
                  f"to the {recipe.train.min_train_steps:,} steps of --min_train_steps")
    elif summary.stopped_by_time:
        budget = f"; its {recipe.train.max_train_minutes:g}-minute budget (--max_train_minutes) stopped it"
    log(f"[1/5] trained {recipe.name} to step {summary.steps} in {train_seconds:.0f} s ({summary.policy}{budget})")
    best = bool(recipe.train.keep_best_by)  # the best checkpoints by validation, else the last ones
    averaged = averaging.average_checkpoints(workdir, recipe.decode.average_checkpoints, best=best)
    with open(f"{averaged}.json") as f:
        averaged_steps = json.load(f)["steps"]
    chosen = f"best by {recipe.train.keep_best_by}" if best else "last"
    log(f"[2/5] averaged the {chosen} checkpoints, steps {averaged_steps}, into {averaged} (§6.1)")
    return averaged, {"step": summary.steps, "train_seconds": round(train_seconds, 1),
                      "stopped_by_time": summary.stopped_by_time, "policy": summary.policy,
                      "averaged_steps": averaged_steps}


def export_averaged(workdir: str, averaged: str, export_dir: str, data_dir: str, log=print,
                    decode: Optional[DecodeConfig] = None) -> None:
    """Stage 4 of every task's pipeline: the averaged checkpoint as a SavedModel (the task's module), whose
    default decoding settings are ``decode`` (None: the recipe's)."""
    task = tasks.get(WorkDir(workdir).read_recipe())
    model, loaded_recipe, tokenizer = artifacts.load_model(workdir, "averaged", data_dir, task.corpus)
    if decode is not None:
        loaded_recipe = dataclasses.replace(loaded_recipe, decode=decode)
    info = {"checkpoint": checkpoint_name(workdir, averaged), "training_policy": WorkDir(workdir).read_policy()}
    writer.write(task.module(model, tokenizer, loaded_recipe), export_dir, info=info)
    log(f"[4/5] exported the SavedModel to {export_dir}")


def checkpoint_name(workdir: str, averaged: str) -> str:
    """The averaged checkpoint named under ``workdir`` as given (relative stays relative), as an export records it."""
    return os.path.join(workdir, os.path.relpath(averaged, os.path.abspath(workdir)))


def exported_from(export_dir: str) -> Optional[str]:
    """The checkpoint an export in ``export_dir`` was made from (its export.json), None where there is none."""
    try:
        return loading.read_info(export_dir).get("checkpoint")
    except (OSError, ValueError):
        return None


def export_in_the_way(workdir: str, export_dir: str) -> Optional[str]:
    """Why ``export_dir`` cannot take this job's export (a non-empty directory that is not an export of
    ``workdir``'s averaged checkpoints), or None: a re-run after success finds its own export there."""
    if not os.path.exists(export_dir) or (os.path.isdir(export_dir) and not os.listdir(export_dir)):
        return None
    source = exported_from(export_dir)
    ours = os.path.join(os.path.normpath(workdir), "averaged", "")
    if source is not None and os.path.normpath(source).startswith(ours):
        return None
    return (f"{export_dir} exists and is not an empty directory{f' (an export of {source})' if source else ''}; an "
            "export is never written over another: remove it or choose another")


class Stages:
    """What the pipeline has finished in a work directory (``<workdir>/pipeline.json``): the same command run
    again, after an interruption or after success, skips what is done and says so. A record is kept only for
    the same recipe and ``eval_sentences``; it is written whole or not at all, after its stage."""

    def __init__(self, workdir: str, recipe: Recipe, eval_sentences: Optional[int]):
        self.path = WorkDir(workdir).pipeline_state
        self.key = json.loads(json.dumps({"recipe": recipe.to_dict(), "eval_sentences": eval_sentences}))  # as read
        try:
            saved = json.loads(self.path.read_text())
        except (OSError, ValueError):
            saved = {}
        self.done = saved.get("done", {}) if saved.get("key") == self.key else {}

    def get(self, stage: str) -> Optional[dict]:
        return self.done.get(stage)

    def finish(self, stage: str, record: dict) -> None:
        self.done[stage] = record
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f"{self.path.name}.partial-{os.getpid()}")
        partial.write_text(json.dumps({"key": self.key, "done": self.done}, indent=1, ensure_ascii=False) + "\n")
        os.replace(partial, self.path)


def write_metadata(export_dir: str, recipe: Recipe, command: Optional[str], trained: dict, results: dict) -> dict:
    """Writes (and returns) ``metadata.json`` beside an export: the recipe, the command, training, results."""
    metadata = {"recipe": recipe.name, **({"command": command} if command else {}), **trained, **results,
                "recipe_config": recipe.to_dict()}
    path = os.path.join(export_dir, METADATA_FILE)
    with open(f"{path}.partial-{os.getpid()}", "w") as f:  # whole or not at all, as every file the job writes
        json.dump(metadata, f, indent=2, ensure_ascii=False)
        f.write("\n")
    os.replace(f"{path}.partial-{os.getpid()}", path)
    return metadata
