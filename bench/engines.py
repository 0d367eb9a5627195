"""The decoders bench_engines.py compares, each served from its artifact on disk in a worker process of its own.

    python bench/engines.py --kind=KIND --artifact=DIR [--spm=MODEL] --threads=2 --inter_threads=1 ...

Kinds (strings in -> strings out; each times its own tokenization and detokenization):

    saved_model   tf.saved_model.load + ``serving_default`` (tokenizes and detokenizes in the graph, §6.1 defaults
                  baked in); TensorFlow intra-op --threads, inter-op --inter_threads; an export's warm-up requests
                  (kt-export --jit_compile) are replayed at load, as TF Serving does
    hf, hf_gnmt   transformers ``generate`` of MarianMTModel (post-LN) or M2M100 (pre-LN) on the mapped weights
                  (bench/marian.py); hf_gnmt swaps in our length penalty; torch.set_num_threads(--threads),
                  set_num_interop_threads(--inter_threads)
    ctranslate2   ``ctranslate2.Translator(dir, "cpu", intra_threads=--threads, inter_threads=--inter_threads)``
                  and ``translate_batch`` (with --inter_threads P > 1: max_batch_size ceil(B / P), the P parts
                  decoded at once)
    kt_ctranslate2  keras_transformer.engines.ctranslate2_translate over the same directory, as kt-translate
                  serves it: CTranslate2's own search with length penalty --alpha and per-sentence maximum
                  lengths (its docstring); --inter_threads replicas, as ctranslate2
    kt_ctranslate2_gnmt  the same with ``search="gnmt"``: our length penalty, by running every sentence to its
                  maximum length and rescoring what finished

HF and CTranslate2 tokenize with the SentencePiece Python package and the model's .model file, as our
export does in the graph: subwords + EOS, a source longer than --max_source_length tokens keeps its first
max_source_length - 1 subwords then EOS (export.truncate_source), the output stops at the first EOS.

A worker loads its system, prints {"ready": ...} and answers one JSON line per command on stdin:
{"cmd": "batches", "batches": [[str]]} (the batches to translate), {"cmd": "warmup"} (first and last batch,
untimed), {"cmd": "run"} -> {"seconds", "translations": [[str]]} (every batch in order, timed as a whole),
{"cmd": "quit"}. One process per system keeps thread pools and OpenMP settings apart, and an idle worker only
waits on its stdin while another is timed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Callable, List

from absl import app, flags

PAD_ID, BOS_ID, EOS_ID = 0, 2, 3  # keras_transformer's reserved ids

KINDS = ("saved_model", "hf", "hf_gnmt", "ctranslate2", "kt_ctranslate2", "kt_ctranslate2_gnmt")

flags.DEFINE_enum("kind", None, KINDS, "Which decoder to serve.")
flags.DEFINE_string("artifact", None, "Its directory: SavedModel, save_pretrained output or CTranslate2 model.")
flags.DEFINE_string("spm", None, "SentencePiece model (hf, ctranslate2).")
flags.DEFINE_integer("threads", 2, "Intra-op threads.")
flags.DEFINE_integer("inter_threads", 1, "Inter-op threads (TensorFlow, torch) / parallel batches (CTranslate2).")
flags.DEFINE_integer("beam_size", 4, "Beam size (hf, ctranslate2; the SavedModel has it baked in).")
flags.DEFINE_float("alpha", 0.6, "Length penalty α.")
flags.DEFINE_integer("extra_length", 50, "Maximum output length = source length + extra_length.")
flags.DEFINE_integer("max_source_length", 80, "Longest source, EOS included (export.max_source_length).")
flags.DEFINE_integer("max_length", 256, "The model's longest sequence (ModelConfig.max_length).")
FLAGS = flags.FLAGS

Translate = Callable[[List[str]], List[str]]


class SentencePiece:
    """Source ids as our export builds them, and text from output ids."""

    def __init__(self, path, max_source_length):
        import sentencepiece

        self.processor = sentencepiece.SentencePieceProcessor(model_file=path)
        self.max_source_length = max_source_length

    def source_ids(self, lines: List[str]) -> List[List[int]]:
        ids = [x[: self.max_source_length - 1] + [EOS_ID] for x in self.processor.encode(lines)]
        return ids

    def text(self, ids_batch) -> List[str]:
        out = []
        for ids in ids_batch:
            ids = list(ids)
            ids = ids[: ids.index(EOS_ID)] if EOS_ID in ids else ids
            out.append(self.processor.decode([i for i in ids if i not in (PAD_ID, BOS_ID)]))
        return out


def saved_model_system() -> Translate:
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.inter_threads)
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops of the text signatures)

    loaded = tf.saved_model.load(FLAGS.artifact)
    if os.path.isfile(os.path.join(FLAGS.artifact, "assets.extra", "tf_serving_warmup_requests")):
        from keras_transformer.serving import warmup

        warmup.replay(loaded, FLAGS.artifact)  # as TF Serving does at load time: an XLA export compiles here
    signature = loaded.signatures["serving_default"]

    def translate(lines):
        out = signature(inputs=tf.constant(lines, tf.string))["translations"].numpy()
        return [x.decode("utf-8", errors="replace") for x in out]

    translate.owner = loaded  # keeps the variables alive
    return translate


def hf_system(gnmt: bool) -> Translate:
    import torch

    torch.set_num_threads(FLAGS.threads)
    torch.set_num_interop_threads(FLAGS.inter_threads)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from bench import marian

    model = marian.load(FLAGS.artifact, gnmt_length_penalty=gnmt)
    spm = SentencePiece(FLAGS.spm, FLAGS.max_source_length)

    @torch.inference_mode()
    def translate(lines):
        ids = spm.source_ids(lines)
        longest = max(map(len, ids))
        source = torch.full((len(ids), longest), PAD_ID, dtype=torch.long)  # [B, S]
        for row, x in zip(source, ids):
            row[: len(x)] = torch.tensor(x)
        max_new = min(longest + FLAGS.extra_length, FLAGS.max_length)  # per batch (ours: per sentence)
        out = model.generate(input_ids=source, attention_mask=source.ne(PAD_ID),
                             **marian.generate_kwargs(max_new, FLAGS.beam_size, FLAGS.alpha))  # [B, 1 + T]
        return spm.text(out[:, 1:].tolist())  # drop the decoder start (BOS)

    return translate


def ctranslate2_system() -> Translate:
    import ctranslate2

    translator = ctranslate2.Translator(FLAGS.artifact, device="cpu", intra_threads=FLAGS.threads,
                                       inter_threads=FLAGS.inter_threads)
    spm = SentencePiece(FLAGS.spm, FLAGS.max_source_length)
    source_pieces, target_pieces = (_vocabulary(side) for side in ("source", "target"))
    target_ids = {piece: i for i, piece in enumerate(target_pieces)}
    suppress = [[target_pieces[PAD_ID]], [target_pieces[BOS_ID]]]  # as ours (CTranslate2: before its log-softmax)

    def translate(lines):
        ids = spm.source_ids(lines)
        tokens = [[source_pieces[i] for i in x] for x in ids]  # EOS included, in the directory's spelling
        longest = max(map(len, ids))
        parts = -(-len(tokens) // FLAGS.inter_threads)  # with inter_threads P > 1, P parts decoded at once
        results = translator.translate_batch(
            tokens, beam_size=FLAGS.beam_size, length_penalty=FLAGS.alpha, max_input_length=0,
            max_decoding_length=min(longest + FLAGS.extra_length, FLAGS.max_length), suppress_sequences=suppress,
            max_batch_size=parts if FLAGS.inter_threads > 1 else 0)
        return spm.text([[target_ids[t] for t in r.hypotheses[0]] for r in results])

    return translate


def _vocabulary(side: str) -> List[str]:
    """The CTranslate2 directory's {side} vocabulary (pieces in id order), or its shared one."""
    for name in (f"{side}_vocabulary.json", "shared_vocabulary.json"):
        path = os.path.join(FLAGS.artifact, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                return json.load(f)
    raise FileNotFoundError(f"{FLAGS.artifact}: no {side}_vocabulary.json or shared_vocabulary.json")


def kt_ctranslate2_system(search: str) -> Translate:
    from keras_transformer.engines import ctranslate2_translate

    translator = ctranslate2_translate.load(FLAGS.artifact, device="cpu", intra_threads=FLAGS.threads, search=search,
                                            inter_threads=FLAGS.inter_threads)
    return lambda lines: [str(x) for x in translator.translate(lines, FLAGS.beam_size, FLAGS.alpha,
                                                               FLAGS.extra_length)["translations"]]


def build() -> Translate:
    if FLAGS.kind == "saved_model":
        return saved_model_system()
    if FLAGS.kind in ("hf", "hf_gnmt"):
        return hf_system(gnmt=FLAGS.kind == "hf_gnmt")
    if FLAGS.kind == "ctranslate2":
        return ctranslate2_system()
    return kt_ctranslate2_system("gnmt" if FLAGS.kind == "kt_ctranslate2_gnmt" else "native")


def serve(translate: Translate, commands, reply) -> None:
    """Answer ``commands`` (an iterator of JSON lines) through ``reply(dict)`` (the protocol above)."""
    batches: List[List[str]] = []
    for line in commands:
        command = json.loads(line)
        cmd = command["cmd"]
        if cmd == "batches":
            batches = command["batches"]
            reply({"ok": True, "batches": len(batches)})
        elif cmd == "warmup":
            for batch in {0: batches[0], len(batches) - 1: batches[-1]}.values():
                translate(batch)
            reply({"ok": True})
        elif cmd == "run":
            start = time.perf_counter()
            translations = [translate(batch) for batch in batches]
            reply({"seconds": time.perf_counter() - start, "translations": translations})
        elif cmd == "quit":
            return
        else:
            reply({"error": f"unknown command {cmd!r}"})


def main(argv):
    del argv
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")  # protocol lines only
    os.dup2(2, 1)  # library chatter on stdout goes to stderr

    def reply(payload):
        out.write(json.dumps(payload) + "\n")

    start = time.perf_counter()
    try:
        translate = build()
    except Exception as e:  # reported to the orchestrator, which skips this system with a note
        reply({"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]})
        return
    reply({"ready": True, "load_seconds": round(time.perf_counter() - start, 2)})
    serve(translate, sys.stdin, reply)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    app.run(main)
