"""Flags shared by the inference entry points (kt-translate, kt-evaluate, kt-parse, ...): which model, how to
decode, and how their input lines are read, checked and answered."""

from __future__ import annotations

import sys
from typing import Callable, Iterable, List, Sequence

from absl import flags

from keras_transformer.cli import common

FLAGS = flags.FLAGS


def define_model_flags(required: bool = True, ensemble: bool = False) -> None:
    flags.DEFINE_string("model", None, "An exported SavedModel directory (kt-export) or a training work directory"
                        + ("; 'a,b,...': an ensemble of models of one tokenizer (translation models: "
                           "log-probabilities averaged per step; chart parsers: per span)." if ensemble else ".")
                        + ("" if required else " Not needed with --hypothesis_file."))
    flags.DEFINE_string("checkpoint", "latest", "For a work directory: 'latest', 'averaged' (kt-average), "
                        "'best' (--keep_best_by) or a "
                        "checkpoint path prefix.")
    if ensemble:
        define_ensemble_weights_flag()
    common.define_data_dir_flag()


def define_ensemble_weights_flag() -> None:
    """--ensemble_weights (kt-translate, kt-evaluate, kt-parse, kt-evaluate-parser, kt-export)."""
    flags.DEFINE_list("ensemble_weights", None, "With --model=a,b,...: each model's weight in the average of the "
                      "log-probabilities (numbers >= 0, normalised to sum to 1); default equal.")


def ensemble_weights():
    """--ensemble_weights as floats (None when the tool has no such flag or it is not given), or exit naming it."""
    if "ensemble_weights" not in FLAGS or FLAGS.ensemble_weights is None:
        return None
    try:
        return [float(w) for w in FLAGS.ensemble_weights]
    except ValueError:
        common.fail(f"--ensemble_weights: expected numbers, got {','.join(FLAGS.ensemble_weights)}")


def define_decode_flags() -> None:
    flags.DEFINE_integer("beam_size", None, "Beam size K (default: the recipe's, 4 as in §6.1).")
    flags.DEFINE_float("alpha", None, "Length penalty α (default: the recipe's, 0.6 as in §6.1; for a CTranslate2 "
                      "directory's native search, CTranslate2's length penalty, as kt-export chose it).")
    flags.DEFINE_integer("extra_length", None, "Max output length = source length + this (default: 50, §6.1).")
    flags.DEFINE_integer("batch_size", 32, "Sentences per batch (batches are formed by length; order is kept).")
    flags.DEFINE_enum("ctranslate2_search", None, ["native", "gnmt"],
                      "For a CTranslate2 directory: native (the default; CTranslate2's own beam search, score "
                      "log P / |Y|^α, α its length penalty, by default the one kt-export chose on the eval split) "
                      "or gnmt (exactly the SavedModel's search and scores, about half as fast).")
    define_max_input_length_flag()


def define_max_input_length_flag() -> None:
    flags.DEFINE_integer("max_input_length", None, "Refuse (exit 2, naming the line) an input line of more than "
                         "this many subwords instead of reading its first ones; at most what the model reads. "
                         "Default: a line longer than the model reads is cut to its first subwords, with a line "
                         "on stderr.")


def check_decode_flags() -> None:
    """Exit with one line naming the flag when a decoding option breaks its rule (config.DECODE_OPTIONS, the
    rules the exported signatures check in the graph)."""
    for name in ("beam_size", "alpha", "extra_length"):
        check_decode_option(name)
    if FLAGS.batch_size < 1:
        common.fail(f"--batch_size: must be >= 1, got {FLAGS.batch_size}")
    check_max_input_length()


def check_max_input_length() -> None:
    if FLAGS.max_input_length is not None and FLAGS.max_input_length < 1:
        common.fail(f"--max_input_length: must be >= 1, got {FLAGS.max_input_length}")


def check_decode_option(name: str) -> None:
    """Exit naming --``name`` when the flag is set to a value config.DECODE_OPTIONS refuses (NaN, inf, < least)."""
    from keras_transformer.config import decode_option_error

    value = FLAGS[name].value
    problem = None if value is None else decode_option_error(name, value)
    if problem:
        common.fail(f"--{name}: {problem}")


def check_nbest(nbest: int, translator=None) -> None:
    """Exit naming --nbest unless 1 <= nbest <= K: K from --beam_size, else (given the loaded translator) the
    recipe's beam size."""
    if nbest < 1:
        common.fail(f"--nbest: must be >= 1, got {nbest}")
    beam_size, source = FLAGS.beam_size, "--beam_size"
    if beam_size is None and translator is not None:
        beam_size, source = translator.defaults[0], "the model's default"
    if beam_size is not None and nbest > beam_size:
        common.fail(f"--nbest: must be <= the beam size K = {beam_size} ({source}), got {nbest}")


def load_model(task: str = ""):
    """The model named by --model/--checkpoint (``inference.load``: a SavedModel, a CTranslate2 directory or a
    work directory, of either task), or exit with one line naming the problem. ``task``: the one task this tool
    serves ("" for any)."""
    if not FLAGS.model:
        common.fail("--model: required (a SavedModel directory or a training work directory)")
    from keras_transformer import inference

    try:
        loaded = inference.load(FLAGS.model, FLAGS.checkpoint, FLAGS.data_dir,
                                getattr(FLAGS, "ctranslate2_search", None), ensemble_weights())
    except (ValueError, FileNotFoundError) as e:
        common.fail(str(e) if str(e).startswith("--") else f"--model: {e}")
    found = inference.task_of(loaded).name
    if task and found != task:
        tools = {"translation": "kt-translate and kt-evaluate", "parsing": "kt-parse and kt-evaluate-parser"}
        common.fail(f"--model: {FLAGS.model} is a {found} model, not {task}; {tools[found]} serve it")
    return loaded


def decode(loaded, lines):
    """The task's ``Decoded`` outputs of lines (translations or trees) with the decoding flags."""
    from keras_transformer import inference

    return inference.task_of(loaded).decode(loaded, lines, FLAGS.batch_size, FLAGS.beam_size, FLAGS.alpha,
                                            FLAGS.extra_length)


def input_chunks(flag: str = "input") -> Iterable[List[str]]:
    """The lines of --``flag``: a file's (or redirected stdin's) all at once, read now, so that a bad file is
    named before the model loads; stdin on a terminal or a pipe a chunk at a time as they arrive
    (``files.stream_chunks``), so that each is answered before the next is typed. Exits naming the flag when
    the text cannot be read."""
    from keras_transformer.data import files

    path = getattr(FLAGS, flag)
    try:
        if not files.is_stream(path):
            return [files.read_input(path)]
    except (ValueError, FileNotFoundError) as e:
        common.fail(f"--{flag}: {e}")

    def chunks():
        try:
            yield from files.stream_chunks()
        except ValueError as e:
            common.fail(f"--{flag}: {e}")

    return chunks()


def decode_input(loaded, chunks: Iterable[List[str]], decode_chunk: Callable[[List[str], int], List[str]],
                 verb: str) -> tuple:
    """Decodes --input's ``chunks`` with ``decode_chunk(lines, lines before them) -> output lines`` and writes
    --output: to stdout each chunk as it is done, to a file whole at the end. Each line longer than the model
    reads is reported (``report_long_lines``, ``verb`` saying what was done to it). Returns (lines, lines cut)."""
    to_stdout, kept, done, cut = FLAGS.output == "-", [], 0, 0
    for chunk in chunks:
        cut += check_long_lines(loaded, chunk, verb, done + 1)
        output = decode_chunk(chunk, done)
        if to_stdout:
            common.write_output_flag("output", output)
        else:
            kept.extend(output)
        done += len(chunk)
    if not to_stdout:
        common.write_output_flag("output", kept)
    return done, cut


def check_long_lines(loaded, lines: Sequence[str], verb: str, first_line: int = 1) -> int:
    """``report_long_lines`` of ``lines`` for the loaded model (nothing to check for one that cannot count its
    subwords); returns how many are cut."""
    if loaded.source_pieces is None:
        return 0
    return report_long_lines(lines, loaded.source_pieces(lines), loaded.max_source_pieces, first_line, verb)


def report_long_lines(lines: Sequence[str], pieces: Sequence[int], most: int, first_line: int = 1,
                      verb: str = "translated") -> int:
    """One line on stderr for each line of more than ``most`` subwords (``pieces`` of each; the model reads
    ``most``), naming it by number from ``first_line``; with --max_input_length, exit 2 at the first line longer
    than that instead. Returns how many lines were cut."""
    limit = FLAGS.max_input_length
    if limit is not None and limit > most:
        common.fail(f"--max_input_length: at most the {most:,} subwords the model reads, got {limit:,}")
    long = [i for i, n in enumerate(pieces) if n > (limit or most)]
    for i in long:
        what = f"line {first_line + i:,}: {len(lines[i].split()):,} words ({pieces[i]:,} pieces)"
        if limit is not None:
            more = f"; {len(long) - 1:,} more such lines follow" if len(long) > 1 else ""
            common.fail(f"--max_input_length: {what} is longer than {limit:,}{more}")
        print(f"{what} is longer than the model's {most:,}; {verb} its first {most:,} pieces", file=sys.stderr)
    return len(long)


def long_lines_summary(cut: int, most: int) -> str:
    """What a closing line adds about lines cut to the ``most`` subwords the model reads: "" when none were."""
    if not cut:
        return ""
    return f"; {cut:,} line{'s' * (cut != 1)} longer than the model's {most:,} pieces, cut"
