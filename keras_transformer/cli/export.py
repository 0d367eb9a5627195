"""kt-export: write a model as a translator: a TensorFlow SavedModel (text in, text out) or a CTranslate2 directory.

    kt-export --model=runs/multi30k --export_dir=saved_models/multi30k_en_de [--checkpoint=averaged]
    kt-export --model=runs/multi30k --export_dir=saved_models/multi30k_ids --ids_only
    kt-export --model=runs/multi30k --export_dir=saved_models/multi30k_bf16 --precision=bfloat16
    kt-export --model=runs/multi30k --export_dir=saved_models/multi30k_xla --jit_compile
    kt-export --model=runs/multi30k --export_dir=saved_models/multi30k_step --step_compile
    kt-export --model=runs/multi30k --export_dir=saved_models/multi30k_fast --stop_rule=heuristic
    kt-export --model=saved_models/multi30k_en_de --format=ctranslate2 --quantization=int8 \
        --export_dir=saved_models/multi30k_en_de_ct2_int8
    kt-export --model=runs/seed1,runs/seed2 --export_dir=saved_models/ensemble   # one SavedModel, both models
    kt-export --model=runs/seed1,runs/seed2 --export_dir=saved_models/ensemble --alpha=0.8   # its default α

--model is a training work directory or an exported SavedModel. SavedModel
signatures: serving_default, translate_with_options, translate_ids,
translate_ids_with_options (see keras_transformer.serving.writer; --ids_only keeps the
last two, for servers without the tensorflow-text ops), and a translator's sampling,
target prefix and alignment signatures (docs/decoding.md). --model=a,b,... writes an
ensemble of models of one tokenizer (--ensemble_weights) as one SavedModel: translation models, or chart
parsers (docs/parsing.md). --format=ctranslate2
writes CTranslate2's model (keras_transformer.engines; needs the optional
ctranslate2 package), which kt-translate and kt-evaluate serve like a SavedModel.
"""

from __future__ import annotations

import dataclasses
import os

from absl import flags

from keras_transformer.cli import common, decode_flags
from keras_transformer.config import PARALLEL_SEARCHES, PRECISIONS, STOP_RULES
from keras_transformer.engines import QUANTIZATIONS

flags.DEFINE_string("model", None, "Training work directory (recipe.json, checkpoints/, tokenizer/) or an exported "
                    "SavedModel; 'a,b,...': an ensemble of models of one tokenizer as one SavedModel (translation "
                    "models: log-probabilities averaged per step; chart parsers: per span; the first model's recipe "
                    "and decoding defaults).")
flags.DEFINE_string("checkpoint", "latest",
                    "For a work directory: 'latest', 'averaged' (kt-average), 'best' (--keep_best_by) or a "
                    "checkpoint path prefix.")
flags.DEFINE_string("export_dir", None, "Where the export goes, e.g. saved_models/NAME.")
flags.DEFINE_enum("format", "saved_model", ["saved_model", "ctranslate2"],
                  "saved_model (TensorFlow Serving) or ctranslate2 (a CTranslate2 model directory).")
flags.DEFINE_enum("quantization", None, list(QUANTIZATIONS),
                  "With --format=ctranslate2: the stored weight type (default float32; int8 = int8_float32, "
                  "int8 matrices and float32 elsewhere).")
flags.DEFINE_enum("precision", "float32", list(PRECISIONS),
                  "With --format=saved_model: what the SavedModel computes in; bfloat16 (weights and activations, "
                  "softmaxes in float32) is half the size and faster on CPUs with bfloat16 matrix units (AMX).")
flags.DEFINE_integer("parallel_searches", PARALLEL_SEARCHES,
                     "With --format=saved_model: the beam searches a batch is dealt to, run at once by inter-op "
                     "threads (keras_transformer.decoding.parallel); about the cores serving it.", lower_bound=1)
flags.DEFINE_float("length_penalty", None,
                   "With --format=ctranslate2: α of CTranslate2's own search (score log P / |Y|^α), stored in the "
                   "directory for kt-translate and kt-evaluate; default: the best by BLEU on the recipe's eval "
                   "split (under --data_dir) of 0, 0.2, ..., 1.2, 1.5.", lower_bound=0.0)
flags.DEFINE_boolean("jit_compile", False,
                     "With --format=saved_model: the beam search compiled by XLA over static shapes (inputs padded to "
                     "--xla_batch_sizes x --xla_source_lengths), with TF Serving warm-up requests for each; serve "
                     "with tensorflow_model_server --xla_cpu_compilation_enabled=true. Translation models only.")
flags.DEFINE_boolean("step_compile", False,
                     "With --format=saved_model: the default search's loop, which drops each input as it finishes, "
                     "around a decoding step compiled by XLA (decoding/hybrid_beam_search.py), with TF Serving "
                     "warm-up requests; serve with tensorflow_model_server --xla_cpu_compilation_enabled=true. "
                     "Not with --jit_compile. Translation models only.")
flags.DEFINE_list("xla_batch_sizes", None, "With --jit_compile: the batch sizes a search part is padded to, "
                  "increasing (default 1,2,4,8,16,32); with --step_compile: the batch sizes its warm-up requests "
                  "give each search part.")
flags.DEFINE_list("xla_source_lengths", None, "With --jit_compile: the source lengths (tokens, EOS included) "
                  "inputs are padded to, increasing; the export's max_source_length is always the last "
                  "(default 16,32).")
flags.DEFINE_enum("stop_rule", None, list(STOP_RULES),
                  "With --format=saved_model: when a search stops an input (default: the recipe's, exact). exact: "
                  "once no unfinished hypothesis could beat the best at its maximum length, the translations of "
                  "a search that never stops early; heuristic: as if the unfinished ones ended now (Hugging Face "
                  "generate's default): fewer steps, and some translations change. Translation models only.")
flags.DEFINE_float("alpha", None,
                   "With --format=saved_model: the export's default α, which a request may still override (a "
                   "translator's length penalty, a chart parser's span bonus); default: the recipe's, or for the "
                   "average kt-pipeline evaluated the one it chose on the dev split. An ensemble's default is its "
                   "first model's.")
flags.DEFINE_boolean("ids_only", False, "Only the translate_ids signatures (no tensorflow-text ops in the graph).")
decode_flags.define_ensemble_weights_flag()
common.define_data_dir_flag()
FLAGS = flags.FLAGS


def _check_flags() -> None:
    """Exit with one line naming the flag when the options do not go together."""
    for name in ("model", "export_dir"):
        if not getattr(FLAGS, name):
            common.fail(f"--{name}: required")
    if FLAGS.jit_compile and FLAGS.step_compile:
        common.fail("--step_compile: not with --jit_compile (the whole search compiled); choose one")
    if "," in FLAGS.model:
        for name in ("jit_compile", "step_compile", "stop_rule"):
            if FLAGS[name].present:
                common.fail(f"--{name}: an ensemble (--model=a,b) is exported with the default search only")
        if FLAGS.format == "ctranslate2":
            common.fail("--format=ctranslate2: an ensemble (--model=a,b) is exported as a SavedModel only")
    elif FLAGS.ensemble_weights is not None:
        common.fail(f"--ensemble_weights: {FLAGS.model} is one model; weights apply to an ensemble, --model=a,b")
    if not FLAGS.jit_compile:
        if FLAGS["xla_source_lengths"].present:
            common.fail("--xla_source_lengths: applies with --jit_compile only")
        if FLAGS["xla_batch_sizes"].present and not FLAGS.step_compile:
            common.fail("--xla_batch_sizes: applies with --jit_compile or --step_compile only")
    if FLAGS.format == "ctranslate2":
        for name in ("ids_only", "parallel_searches", "precision", "jit_compile", "step_compile", "stop_rule",
                     "alpha"):
            if FLAGS[name].present:
                common.fail(f"--{name}: applies to --format=saved_model only")
        from keras_transformer.engines import import_ctranslate2

        try:
            import_ctranslate2()
        except ImportError as e:
            common.fail(f"--format=ctranslate2: {e}")
        if os.path.exists(FLAGS.export_dir):
            common.fail(f"--export_dir: {FLAGS.export_dir} already exists; remove it or choose another")
    else:
        decode_flags.check_decode_option("alpha")
        for name in ("quantization", "length_penalty"):
            if FLAGS[name].value is not None:
                common.fail(f"--{name}: applies to --format=ctranslate2 only")
        if os.path.exists(os.path.join(FLAGS.export_dir, "saved_model.pb")):
            common.fail(f"--export_dir: {FLAGS.export_dir} already holds a SavedModel; remove it or choose another")
        if os.path.exists(FLAGS.export_dir) and not (os.path.isdir(FLAGS.export_dir)
                                                     and not os.listdir(FLAGS.export_dir)):
            common.fail(f"--export_dir: {FLAGS.export_dir} exists and is not an empty directory; remove it or "
                        "choose another")


def _with_decode_flags(recipe):
    """``recipe`` with the decoding defaults --stop_rule and --alpha give the export (its recipe records them)."""
    given = {name: FLAGS[name].value for name in ("stop_rule", "alpha") if FLAGS[name].value is not None}
    return dataclasses.replace(recipe, decode=dataclasses.replace(recipe.decode, **given)) if given else recipe


def _source_info(model_arg: str, checkpoint: str) -> dict:
    """What the export was made from: the checkpoint and work directory, or the SavedModel (and its checkpoint),
    named as on the command line (relative paths stay relative: an export that is shipped names no machine)."""
    from keras_transformer.checkpoints import resolve_checkpoint
    from keras_transformer.serving import loading
    from keras_transformer.workdir import WorkDir

    if loading.is_saved_model(model_arg):
        saved = loading.read_info(model_arg)
        return {"saved_model": model_arg,
                **{k: saved[k] for k in ("checkpoint", "workdir", "training_policy") if k in saved}}
    path = resolve_checkpoint(model_arg, checkpoint)
    return {"checkpoint": str(path), "workdir": model_arg, "training_policy": WorkDir(model_arg).read_policy()}


def _xla_buckets():
    """--jit_compile's ``XlaBuckets`` or --step_compile's ``StepCompile``, None without them; exit 2 naming the flag
    for a bad list, or without the tensorflow-serving-api package their warm-up requests need."""
    if not (FLAGS.jit_compile or FLAGS.step_compile):
        return None
    from keras_transformer.config import StepCompile, XlaBuckets
    from keras_transformer.serving import warmup

    given = {}
    for name, field in (("xla_batch_sizes", "batch_sizes"), ("xla_source_lengths", "source_lengths")):
        if FLAGS[name].value is not None:
            try:
                given[field] = tuple(int(v) for v in FLAGS[name].value)
            except ValueError:
                common.fail(f"--{name}: expected integers, got {','.join(FLAGS[name].value)}")
    try:
        buckets = StepCompile(**given) if FLAGS.step_compile else XlaBuckets(**given)
        warmup.serving_apis()
    except ImportError as e:
        common.fail(f"--{'step_compile' if FLAGS.step_compile else 'jit_compile'}: {e}")
    except ValueError as e:  # "batch_sizes: must be ..."
        field, _, problem = str(e).partition(": ")
        common.fail(f"--xla_{field}: {problem}")
    return buckets


def _check_eval_split(recipe) -> None:
    """Exit naming --data_dir unless the eval split that chooses CTranslate2's length penalty can be read."""
    from keras_transformer import tasks
    from keras_transformer.data import corpora

    try:
        tasks.get(recipe).read_split(recipe, recipe.data.eval_split, corpora.resolve_data_dir(FLAGS.data_dir))
    except (ValueError, FileNotFoundError) as e:
        common.fail(f"--data_dir: {e} (the {recipe.data.eval_split} split chooses CTranslate2's length penalty; "
                    "or give --length_penalty)")


def _store_length_penalty(recipe) -> None:
    """--length_penalty, or the one of ``LENGTH_PENALTY_GRID`` that scores best on the eval split, into INFO."""
    from keras_transformer import inference, pipeline
    from keras_transformer.data import corpora
    from keras_transformer.engines import ctranslate2_convert, ctranslate2_translate

    scores = None
    if FLAGS.length_penalty is None:
        print(f"choosing CTranslate2's length penalty on {recipe.data.eval_split} (its own search, log P / |Y|^α)")
        decode, scores = pipeline.choose_alpha(recipe, inference.load(FLAGS.export_dir),
                                               corpora.resolve_data_dir(FLAGS.data_dir),
                                               grid=ctranslate2_translate.LENGTH_PENALTY_GRID)
        length_penalty = decode.alpha
    else:
        length_penalty = FLAGS.length_penalty
    ctranslate2_convert.set_length_penalty(FLAGS.export_dir, length_penalty, scores)


def main(argv):
    del argv
    _check_flags()
    xla = _xla_buckets()
    from keras_transformer import artifacts, tasks
    from keras_transformer.serving import writer

    if "," in FLAGS.model:
        return _export_ensemble(FLAGS.model.split(","))
    try:
        model, recipe, tok = artifacts.load_model(FLAGS.model, FLAGS.checkpoint, FLAGS.data_dir)
        info = _source_info(FLAGS.model, FLAGS.checkpoint)
        recipe = _with_decode_flags(recipe)
    except (ValueError, FileNotFoundError) as e:
        common.fail(str(e) if str(e).startswith("--") else f"--model: {e}")
    if FLAGS.format == "ctranslate2":
        from keras_transformer.engines import ctranslate2_convert

        quantization = FLAGS.quantization or "float32"
        if FLAGS.length_penalty is None:
            _check_eval_split(recipe)  # before anything is written
        ctranslate2_convert.convert(model, tok, recipe, FLAGS.export_dir, quantization, info=info)
        _store_length_penalty(recipe)
        what = f"a CTranslate2 model ({quantization})"
    else:
        try:
            module = tasks.get(recipe).module(writer.with_precision(model, FLAGS.precision), tok, recipe,
                                              with_text=not FLAGS.ids_only, parallel_searches=FLAGS.parallel_searches,
                                              xla=xla)
            writer.write(module, FLAGS.export_dir, info=info)
        except OSError as e:  # a full disk, a read-only directory: nothing is left at --export_dir
            common.fail(f"--export_dir: {common.describe_os_error(e)}")
        except ValueError as e:  # --ids_only, --jit_compile, --step_compile or --stop_rule for a parser
            common.fail_with(e)
        compiled = "step" if FLAGS.step_compile else "search"
        what = "a SavedModel" + (f" (XLA-compiled {compiled}; serve with --xla_cpu_compilation_enabled=true)" if xla
                                 else "")
    _report(info.get("checkpoint", FLAGS.model), what)


def _export_ensemble(model_args) -> None:
    """--model=a,b,...: one SavedModel of the task's ensemble module (an ``EnsembleTranslator``, an
    ``EnsembleChartParsing``; its export.json names every model)."""
    from keras_transformer import inference, tasks
    from keras_transformer.serving import writer

    try:
        models, recipe, tok = inference.ensemble_parts(model_args, FLAGS.checkpoint, FLAGS.data_dir)
        recipe = _with_decode_flags(recipe)
        module = tasks.get(recipe).ensemble_module([writer.with_precision(m, FLAGS.precision) for m in models], tok,
                                                   recipe, decode_flags.ensemble_weights(),
                                                   with_text=not FLAGS.ids_only,
                                                   parallel_searches=FLAGS.parallel_searches)
        info = {"ensemble_of": [_source_info(m, FLAGS.checkpoint) for m in model_args]}
    except (ValueError, FileNotFoundError) as e:
        message = str(e)
        if message.startswith("ensemble weights"):
            message = f"--ensemble_weights: {message.partition(': ')[2]}"
        common.fail(message if message.startswith("--") else f"--model: {message}")
    try:
        writer.write(module, FLAGS.export_dir, info=info)
    except OSError as e:
        common.fail(f"--export_dir: {common.describe_os_error(e)}")
    _report(f"an ensemble of {len(models)} models (weights {', '.join(f'{w:.3g}' for w in module.weights)})",
            "a SavedModel")


def _report(what_from: str, what: str) -> None:
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(FLAGS.export_dir) for f in files)
    print(f"exported {what_from} to {FLAGS.export_dir} as {what} ({size / 2**20:.1f} MiB)")


def run():
    common.run(main)


if __name__ == "__main__":
    run()
