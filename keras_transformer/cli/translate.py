"""kt-translate: translate lines with beam search (§6.1: beam 4, α = 0.6, max length = input + 50).

    kt-translate --model=saved_models/multi30k_en_de < source.en > hypotheses.de
    kt-translate --model=runs/multi30k --checkpoint=averaged --input=test.en.gz --output=hyp.de
    kt-translate --model=saved_models/multi30k_en_de --nbest=4 < source.en > nbest.de   # i ||| translation ||| score
    kt-translate --model=runs/multi30k --sampling --sampling_topk=10 --seed=1 < mono.en > back.de   # one draw a line
    kt-translate --model=saved_models/multi30k_en_de --with_scores < source.en         # score<TAB>translation
    kt-translate --model=runs/multi30k --target_prefix=tab < source_tab_prefix.txt    # each output starts so
    kt-translate --model=saved_models/multi30k_en_de --alignment < source.en          # translation ||| 0-0 1-2 ...
    kt-translate --model=runs/multi30k --constraints=tab < source_tab_terms.txt       # each output holds its terms

--model is an exported SavedModel, a CTranslate2 directory or a training work
directory; a parser's (§6.3) writes one tree per line, as kt-parse does. Lines are
batched by length for speed; output line i is the translation of input line i.
A blank line (empty or whitespace only) is not translated: its output line is
empty. On a terminal or a pipe, each run of lines is translated as soon as it
has arrived, so a person or a program waiting for an answer gets it at once. A
line longer than the model reads is translated from its first subwords, with a
line on stderr naming it (--max_input_length refuses such lines instead).
With --nbest=N > 1 the output is the Moses/Marian n-best list instead: N lines
per input line, ``i ||| translation ||| score``, i the 0-based input line,
best first (an empty slot of the search is left out, so a line may get fewer).
A score is log P(Y|X) / lp(|Y|), GNMT's lp(n) = ((5 + n) / 6)^α with |Y|
counting the subwords and EOS; kt-score gives the same number for a given
translation. A CTranslate2 directory decodes with CTranslate2's own search
and scores, log P(Y|X) / |Y|^α, unless --ctranslate2_search=gnmt.
With --sampling each translation is drawn from the model instead (top-k, the
nucleus top-p, a temperature; decoding/sampling.py), --nbest N draws per line
in draw order, scored as above; a work directory or a SavedModel exported with
the sample_with_options signature samples, the same --seed the same draws.
With --target_prefix each output starts with its line's prefix (a file aligned
with the input, or 'tab': source<TAB>prefix) and the search or the draws go on
from it (decoding/prefix.py); a work directory, a SavedModel exported with the
translate_with_prefix signature, or a CTranslate2 directory's native search.
With --constraints every output contains each of its line's constraints, words
or phrases (a file aligned with the input, tab-separated phrases on a line, or
'tab': source<TAB>phrase<TAB>phrase ...; decoding/constraints.py, dynamic beam
allocation); a work directory or a SavedModel exported with the
translate_with_constraints signature.
With --alignment each output is followed by its word alignment to the input
(' ||| i-j ...', Pharaoh pairs from the cross-attention of one decoder layer;
tasks/translation/alignment.py); a work directory or a SavedModel exported
with the align signature.
"""

from __future__ import annotations

import sys
import time

from absl import flags

from keras_transformer.cli import common, decode_flags

decode_flags.define_model_flags(ensemble=True)
decode_flags.define_decode_flags()
flags.DEFINE_string("input", "-", "Source text, one sentence per line (plain or .gz); '-' is stdin.")
flags.DEFINE_string("output", "-", "Where translations go, one per line; '-' is stdout.")
flags.DEFINE_integer("nbest", 1, "Hypotheses per input line, 1 <= N <= beam size; N > 1 writes the n-best format "
                     "'i ||| translation ||| score' (i = 0-based input line, best first).")
flags.DEFINE_boolean("with_scores", False, "Write 'score<TAB>translation' (score = log P(Y|X) / lp(|Y|)); "
                     "with --nbest > 1 the scores are always written.")
flags.DEFINE_boolean("sampling", False, "Draw each translation from the model instead of searching for the best "
                     "(back-translation; not in the paper): --nbest N draws N per line, in draw order.")
flags.DEFINE_integer("sampling_topk", 0, "With --sampling: draw from the K most probable tokens only; 0: from all.")
flags.DEFINE_float("sampling_topp", 1.0, "With --sampling: draw from the fewest most probable tokens whose "
                   "probabilities reach P (nucleus sampling); 1: no cut.")
flags.DEFINE_float("sampling_temperature", 1.0, "With --sampling: divide the log-probabilities by T before drawing "
                   "(< 1 sharper, > 1 flatter).")
flags.DEFINE_integer("seed", 0, "With --sampling: the draws' seed (the same seed, input and --batch_size give the same "
                     "translations).")
flags.DEFINE_string("target_prefix", None, "Start each translation with a given prefix and search on from it (as "
                    "CTranslate2's target_prefix; with --nbest and --sampling too): a file of prefixes, one per input "
                    "line (an empty line: none), or 'tab': each input line is source<TAB>prefix. The outputs include "
                    "the prefix; scores count its subwords.")
flags.DEFINE_string("constraints", None, "Words or phrases each translation must contain (terminology; lexically "
                    "constrained beam search, Post & Vilar 2018; with --nbest too, not with --sampling or "
                    "--target_prefix): a file with one line per input line, its phrases separated by tabs (an empty "
                    "line: none), or 'tab': each input line is source<TAB>phrase<TAB>phrase ... A larger --beam_size "
                    "(e.g. 10) gives the search more room to place them well.")
flags.DEFINE_boolean("alignment", False, "Write each translation's word alignment to its input after it, as Marian "
                     "does: 'translation ||| i-j ...' (Pharaoh pairs: source word i, target word j, from 0; with "
                     "--nbest 'i ||| translation ||| i-j ... ||| score'), read from the decoder's cross-attention.")
flags.DEFINE_integer("alignment_layer", None, "With --alignment: the decoder layer whose cross-attention aligns, from "
                     "0 (negative: from the last); default the penultimate (-2), or the only one.")
flags.DEFINE_integer("alignment_head", -1, "With --alignment: the head that aligns, from 0; -1 averages the heads.")
flags.DEFINE_string("target_lang", None, "For a model of several target languages (trained with --target_langs): "
                    "translate into this one (each line gets its tag, <2fr>; lines may also carry their own).")
FLAGS = flags.FLAGS
SAMPLING_FLAGS = {"sampling_topk": "top_k", "sampling_topp": "top_p", "sampling_temperature": "temperature"}


def main(argv):
    del argv
    decode_flags.check_decode_flags()
    check_sampling_flags()
    if not FLAGS.sampling:
        decode_flags.check_nbest(FLAGS.nbest)
    from keras_transformer import inference
    from keras_transformer.data import multilingual
    from keras_transformer.tasks.translation import lines as translation_lines

    for flag in ("sampling", "target_prefix"):
        if FLAGS.constraints is not None and FLAGS[flag].value not in (None, False):
            common.fail(f"--constraints: not with --{flag}")
    common.check_output_flag("output")  # before any work whose result could not be written
    guide = "target_prefix" if FLAGS.target_prefix is not None else "constraints"
    chunks, guides = read_guides(decode_flags.input_chunks(), guide)
    translator = decode_flags.load_model()
    if FLAGS.sampling and translator.sample is None:
        common.fail(f"--sampling: {FLAGS.model} cannot sample (a CTranslate2 directory, or an export written before "
                    "its sample_with_options signature: re-export it with kt-export)")
    if guide == "target_prefix" and (translator.sample_prefixed if FLAGS.sampling else translator.prefixed) is None:
        common.fail(f"--target_prefix: {FLAGS.model} cannot start its outputs with a prefix (a CTranslate2 "
                    "directory, a parser, or an export written before its translate_with_prefix signature: "
                    "re-export it with kt-export)")
    if guides is not None and guide == "constraints" and translator.constrained is None:
        common.fail(f"--constraints: {FLAGS.model} cannot constrain its outputs (a CTranslate2 directory, a parser, "
                    "an ensemble, or an export written before its translate_with_constraints signature: re-export "
                    "it with kt-export)")
    if not FLAGS.sampling:
        decode_flags.check_nbest(FLAGS.nbest, translator)
    if FLAGS.target_lang is not None:
        check_target_lang(translator)
    alignment = alignment_options(translator) if FLAGS.alignment else None
    if FLAGS.nbest > 1 and not inference.task_of(translator).nbest:
        common.fail(f"--nbest: {FLAGS.model} is a {inference.task_of(translator).name} model; its outputs have no "
                    "n-best lists")

    def translate(lines, before):
        if FLAGS.target_lang is not None:  # Johnson et al. (2017): the target's tag leads the source
            lines = [multilingual.tagged(FLAGS.target_lang, line) if line.strip() else line for line in lines]
        chunk = None if guides is None else checked_guides(translator, lines, guides, before, guide)
        options = {"batch_size": FLAGS.batch_size, "alpha": FLAGS.alpha, "extra_length": FLAGS.extra_length}
        if chunk is not None:
            options["prefixes" if guide == "target_prefix" else "constraints"] = chunk
        if FLAGS.sampling or FLAGS.nbest > 1:
            if FLAGS.sampling:
                sampling = {option: FLAGS[flag].value for flag, option in SAMPLING_FLAGS.items()}
                nbest = translation_lines.sample_lines(translator, lines, FLAGS.nbest, **sampling, seed=FLAGS.seed,
                                                       **options)
            else:
                nbest = translation_lines.translate_nbest(translator, lines, FLAGS.nbest, beam_size=FLAGS.beam_size,
                                                         **options)
            if alignment is not None:
                nbest = nbest._replace(translations=[aligned([line] * len(texts), texts)
                                                     for line, texts in zip(lines, nbest.translations)])
            if FLAGS.nbest > 1:
                return translation_lines.format_nbest(nbest, first=before)
            outputs, scores = [t[0] for t in nbest.translations], [s[0] for s in nbest.scores]
        else:
            if chunk is not None:
                outputs, scores = translation_lines.translate_lines(translator, lines, beam_size=FLAGS.beam_size,
                                                                    **options)
            else:
                decoded = decode_flags.decode(translator, lines)
                outputs, scores = decoded.outputs, decoded.scores
            outputs = outputs if alignment is None else aligned(lines, outputs)
        return translation_lines.format_scored(outputs, scores) if FLAGS.with_scores else outputs

    def aligned(sources, translations):
        pairs = translation_lines.align_lines(translator, sources, translations, *alignment, FLAGS.batch_size)
        return translation_lines.with_alignments(translations, pairs)

    start = time.time()
    count, cut = decode_flags.decode_input(translator, chunks, translate, "translated")
    if guides is not None and len(guides) != count:
        common.fail(f"--{guide}: {FLAGS[guide].value} has {len(guides)} lines, the input {count}; one line per input "
                    "line")
    seconds = time.time() - start
    cut_summary = decode_flags.long_lines_summary(cut, translator.max_source_pieces)
    print(f"translated {count} lines in {seconds:.1f} s ({count / max(seconds, 1e-9):.1f} lines/s) with "
          f"{translator.description}{cut_summary}", file=sys.stderr)


def check_target_lang(translator) -> None:
    """Exit with one line unless --target_lang is one of the model's target languages (its recipe's
    target_langs), or when --alignment would align the tag as a word."""
    from keras_transformer.data import multilingual

    known = translator.recipe.data.target_langs if translator.recipe is not None else ()
    try:
        multilingual.check_target_lang(known, FLAGS.target_lang)
    except ValueError as e:
        common.fail(str(e))
    if FLAGS.alignment:
        common.fail("--alignment: not with --target_lang (the tag would be aligned as a source word)")


def check_sampling_flags() -> None:
    """Exit naming the first sampling or alignment flag that is given without --sampling / --alignment or breaks
    its rule."""
    from keras_transformer.config import sampling_option_error

    for flag in ("alignment_layer", "alignment_head"):
        if FLAGS[flag].present and not FLAGS.alignment:
            common.fail(f"--{flag}: applies with --alignment only")

    for flag, option in SAMPLING_FLAGS.items():
        if FLAGS[flag].present and not FLAGS.sampling:
            common.fail(f"--{flag}: applies with --sampling only")
        problem = sampling_option_error(option, FLAGS[flag].value)
        if problem:
            common.fail(f"--{flag}: {problem}")
    if FLAGS.sampling and FLAGS.nbest < 1:
        common.fail(f"--nbest: must be >= 1, got {FLAGS.nbest}")


def alignment_options(translator):
    """(alignment_layer, alignment_head) for --alignment, or exit naming why the model cannot align so."""
    from keras_transformer.tasks.translation import lines as translation_lines

    layer = FLAGS.alignment_layer
    layer = translation_lines.default_alignment_layer(translator) if layer is None and translator.recipe else layer
    problem = translation_lines.alignment_problem(translator, layer, FLAGS.alignment_head)
    if problem:
        common.fail(f"--{problem}" if problem.startswith("alignment_") else f"--alignment: {problem}")
    return layer, FLAGS.alignment_head


def read_guides(chunks, flag: str):
    """(chunks of source lines, the --target_prefix or --constraints (``flag``) lines read so far: a list, None
    without the flag). A file is read now, whole (a bad one named before the model loads); with 'tab' each line is
    cut at its first tab as its chunk is read (no tab: nothing; the rest of the line is the prefix, or the
    constraints separated by tabs)."""
    if FLAGS[flag].value is None:
        return chunks, None
    if FLAGS[flag].value != "tab":
        from keras_transformer.data import files

        try:
            return chunks, files.read_input(FLAGS[flag].value)
        except (ValueError, FileNotFoundError) as e:
            common.fail(f"--{flag}: {e}")
    guides = []

    def sources():
        for chunk in chunks:
            columns = [line.split("\t", 1) for line in chunk]
            guides.extend(c[1] if len(c) > 1 else "" for c in columns)
            yield [c[0] for c in columns]

    return sources(), guides


def checked_guides(translator, lines, guides, before, flag: str):
    """The --target_prefix or --constraints (``flag``) lines of ``lines`` (input lines before + 1 ...), or exit
    naming the line whose prefix or constraints are too long for it, or the file when it has too few lines."""
    from keras_transformer.tasks.translation import lines as translation_lines

    chunk = guides[before:before + len(lines)]
    if len(chunk) < len(lines):
        common.fail(f"--{flag}: {FLAGS[flag].value} has {len(guides)} lines, fewer than the input; one line per input "
                    "line")
    extra_length = translator.defaults[2] if FLAGS.extra_length is None else FLAGS.extra_length
    check = translation_lines.check_prefixes if flag == "target_prefix" else translation_lines.check_constraints
    try:
        check(translator, lines, chunk, extra_length, first_line=before + 1)
    except ValueError as e:
        common.fail(f"--{e}")
    return chunk


def run():
    common.run(main, decoding=True)


if __name__ == "__main__":
    run()
