"""The training corpus a work directory was trained on, recorded, so a resumed run on other data is refused.

A resumed run continues the data stream where its checkpoint left it (``train_ds.skip(step * accumulation)``):
only right if the corpus is the one the stream came from. The first run records the training split's
fingerprint in ``<workdir>/corpus_fingerprint.json`` (``WorkDir.corpus_fingerprint``):

* local text (corpus ``text``, the Multi30k files): each file's resolved path, size, mtime and a SHA-256 of its
  first and last ``EDGE_BYTES`` (never a full read: a WMT-sized file is fingerprinted in milliseconds);
* a TFDS corpus: its builder name and split;
* another task's corpus (the parsing task's treebank): its reader's ``fingerprint`` (a treebank's path, size
  and the split's file names).

A later run whose corpus differs is refused, before anything in the work directory is written, with one line
naming the changed file (a ValueError, exit 2 from the command line). With ``allow_change``
(``kt-train --allow_data_change``) the run goes on, says in one line that the data position restarts, and
starts the new corpus's stream from its beginning; the file then records the new corpus and the step its
stream started at, so a later resume lands on the right batch of the new stream. The work directory keeps the
tokenizer it was trained with (the model's embeddings belong to it): where the new corpus's tokenizer name
differs, the old model is copied under the new name, as ``--init_from`` does.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from typing import Dict, Optional

from keras_transformer import tasks
from keras_transformer.checkpoints import list_checkpoints
from keras_transformer.config import Recipe
from keras_transformer.data import tokenizer
from keras_transformer.data.files import EDGE_BYTES
from keras_transformer.workdir import WorkDir


def fingerprint(recipe: Recipe, data_dir=None) -> dict:
    """The training split's fingerprint (its task's reader: ``Corpus.training_fingerprint``): {"files": {path:
    entry}} for local text, {"tfds": name} for TFDS, {"corpus": hash} for another task's corpus."""
    return tasks.get(recipe).corpus.training_fingerprint(recipe.data, data_dir)


def _tokenizer_names(recipe: Recipe, data_dir) -> Dict[str, str]:
    """{side: model file name} this recipe's data looks its tokenizer up by ("shared" for one vocabulary)."""
    sides = [None] if recipe.model.shared_vocabulary else list(tokenizer.SIDES)
    corpus = tasks.get(recipe).corpus
    return {side or "shared": f"{tokenizer.cache_key(recipe, data_dir, side, corpus=corpus)}.model"
            for side in sides}


def difference(old: dict, new: dict) -> Optional[str]:
    """What changed from ``old`` to ``new`` ("<file>: size 10 -> 12 bytes"), or None when nothing did."""
    if set(old) != set(new):
        return f"the corpus was {_describe(old)}, now {_describe(new)}"
    if "files" not in old:
        return None if old == new else f"the corpus was {_describe(old)}, now {_describe(new)}"
    before, after = old["files"], new["files"]
    for path in sorted(set(before) | set(after)):
        if path not in after:
            return f"{path}: no longer in the training corpus"
        if path not in before:
            return f"{path}: new in the training corpus"
        a, b = before[path], after[path]
        if a["size"] != b["size"]:
            return f"{path}: size {a['size']} -> {b['size']} bytes"
        if a["edges_sha256"] != b["edges_sha256"]:
            return f"{path}: its first or last {EDGE_BYTES} bytes differ"
        if a["mtime_ns"] != b["mtime_ns"]:
            return f"{path}: modified since (same size, mtime differs)"
    return None


def _describe(fp: dict) -> str:
    if "files" in fp:
        return f"local files ({', '.join(sorted(fp['files']))})"
    return f"TFDS {fp['tfds']}" if "tfds" in fp else f"corpus {fp.get('corpus')}"


@dataclasses.dataclass
class DataPosition:
    """Where the run's data stream starts: ``skip_steps(start_step)`` updates of batches to skip."""

    workdir: WorkDir
    fingerprint: dict
    tokenizers: Dict[str, str]
    stream_start: Optional[int]  # the step the recorded corpus's stream started at; None: restart at the resume step
    write: bool  # the chief records the corpus

    def skip_steps(self, start_step: int) -> int:
        """Updates to skip of the stream for a run resuming at ``start_step``; records the corpus (chief)."""
        stream_start = start_step if self.stream_start is None else min(self.stream_start, start_step)
        if self.write:
            path = self.workdir.corpus_fingerprint
            path.parent.mkdir(parents=True, exist_ok=True)
            part = path.with_name(path.name + ".part")
            part.write_text(json.dumps({"train": self.fingerprint, "stream_start_step": stream_start,
                                        "tokenizers": self.tokenizers}, indent=1, sort_keys=True) + "\n")
            part.replace(path)
        return start_step - stream_start


def check(recipe: Recipe, workdir, data_dir=None, allow_change: bool = False, is_chief: bool = True) -> DataPosition:
    """Compare the training corpus with the one ``workdir`` recorded; ValueError naming the changed file.

    Call before ``init_from.prepare_workdir`` (whose tokenizer check would otherwise refuse changed sizes with
    a less precise message). A work directory without checkpoints (a fresh run) records the corpus anew.
    """
    paths = WorkDir(workdir)
    new = fingerprint(recipe, data_dir)
    tokenizers = _tokenizer_names(recipe, data_dir)
    recorded = paths.corpus_fingerprint
    if not recorded.is_file() or not list_checkpoints(paths.checkpoints):
        return DataPosition(paths, new, tokenizers, 0, is_chief)
    try:
        saved = json.loads(recorded.read_text())
        old, stream_start, old_tokenizers = saved["train"], int(saved["stream_start_step"]), saved["tokenizers"]
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{recorded}: not a corpus fingerprint this version wrote ({type(e).__name__}: {e}); "
                         "remove it to record the current corpus") from None
    changed = difference(old, new)
    if changed is None:
        return DataPosition(paths, new, tokenizers, stream_start, is_chief)
    if not allow_change:
        raise ValueError(f"{changed}: the training corpus changed since {paths.root} recorded it in "
                         f"{recorded.name}, so its data position no longer applies; resume with the same data, "
                         "or pass --allow_data_change to continue training from the start of the new data")
    if is_chief:
        print(f"warning: {changed}: --allow_data_change: the data position restarts at the beginning of the new "
              "corpus", file=sys.stderr, flush=True)
        for side, name in tokenizers.items():  # keep the tokenizer the weights were trained with
            source, target = paths.tokenizer / old_tokenizers.get(side, name), paths.tokenizer / name
            if source.is_file() and not target.is_file():
                shutil.copyfile(source, target)
    return DataPosition(paths, new, tokenizers, None, is_chief)
