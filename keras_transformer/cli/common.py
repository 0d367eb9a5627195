"""Flags and helpers shared by the entry points.

``define_recipe_override_flags`` defines, once, the flags that change a recipe
(one per config field a user sets: data, model, training); ``resolve_recipe``
applies them to ``--recipe`` and turns a config's error into one line naming the flag.
"""

from __future__ import annotations

import dataclasses
import signal
import sys
import typing

from absl import app, flags

from keras_transformer.config import STRATEGIES, field_help

FLAGS = flags.FLAGS

# The recipe fields a flag may change, by config; each flag is named as its field and takes its type and help from
# it (config.field_help), so that a config's "field: ..." error names the flag.
DATA_FLAGS = ("corpus", "source_lang", "target_lang", "target_langs", "train_prefix", "eval_prefix", "test_prefix",
              "treebank", "tree_leaves", "train_split", "eval_split", "test_split", "max_length", "tokens_per_batch",
              "max_tokens_per_device", "bucket_boundaries", "shuffle_buffer", "tokenizer_sample_lines", "bpe_dropout")
MODEL_FLAGS = ("vocab_size", "shared_vocabulary", "d_model", "d_ff", "num_heads", "num_layers", "num_encoder_layers",
               "num_decoder_layers", "dropout", "attention_dropout", "relu_dropout", "source_token_dropout",
               "source_token_dropout_alpha", "target_token_dropout", "norm")  # --num_layers: both stacks' N, no field
PARSING_FLAGS = ("align_words", "word_span", "bracket_depth", "tag_loss", "chart_labels", "chart_hidden",
                 "chart_hinge", "chart_crf", "chart_crf_local", "chart_mbr", "chart_lstm", "chart_lstm_layers",
                 "chart_lstm_dropout", "chart_biaffine", "char_filters")
TRAIN_FLAGS = ("train_steps", "max_train_minutes", "min_train_steps", "warmup_steps", "learning_rate_scale",
               "cooldown", "label_smoothing", "gradient_accumulation_steps", "checkpoint_every", "keep_checkpoints",
               "bleu_samples", "keep_best_by", "keep_best", "early_stopping_patience", "init_from", "new_vocabulary",
               "freeze", "mixed_precision", "jit_compile", "seed")
DECODE_FLAGS = ("alpha_grid",)  # the α kt-pipeline chooses among on the eval split
_NUM_LAYERS_HELP = "N (§3.1) of the encoder and the decoder."
_KINDS = {int: "integer", float: "float", bool: "boolean", str: "string"}
_PREFIXES = ("train_prefix", "eval_prefix", "test_prefix")
_POSITIVE = ("num_layers", "num_encoder_layers", "num_decoder_layers", "shuffle_buffer",
             "tokenizer_sample_lines")  # the configs do not check these


def define_recipe_flag(default: str = "tiny", flag_values=FLAGS) -> None:
    from keras_transformer import recipes

    names = [n for n in recipes.names() if not n.startswith("table3_")] + ["table3_* (Table 3's rows)"]
    flags.DEFINE_string(
        "recipe", default,
        f"A recipe name (recipes/: {', '.join(names)}), or a recipe JSON file such as the recipe.json a training run "
        "writes (or that run's work directory).",
        flag_values=flag_values)


def define_strategy_flag() -> None:
    """--strategy: the tf.distribute strategy training runs under (``config.STRATEGIES``)."""
    flags.DEFINE_enum("strategy", STRATEGIES[0], list(STRATEGIES), "tf.distribute strategy.")


def define_data_dir_flag() -> None:
    flags.DEFINE_string(
        "data_dir",
        None,
        "Directory holding the corpora (default: $KT_DATA_DIR, else ../shared/data next to the repository).",
    )


def define_recipe_override_flags(training: bool = True, default: str = "tiny", flag_values=FLAGS) -> None:
    """--recipe and the flags overriding its fields (unset flags keep the recipe's values).

    The data flags, --vocab_size and --shared_vocabulary always; with ``training`` also the model, training, parsing
    and --alpha_grid flags.
    """
    from keras_transformer.config import DataConfig, DecodeConfig, ModelConfig, ParsingConfig, TrainConfig

    define_recipe_flag(default, flag_values)
    sections = ((DataConfig, DATA_FLAGS), (ModelConfig, MODEL_FLAGS), (TrainConfig, TRAIN_FLAGS),
                (ParsingConfig, PARSING_FLAGS), (DecodeConfig, DECODE_FLAGS))
    for config_class, names in sections if training else (sections[0], (ModelConfig, MODEL_FLAGS[:2])):
        hints, helps = typing.get_type_hints(config_class), field_help(config_class)
        for name in names:
            if name == "num_layers":
                flags.DEFINE_integer(name, None, _NUM_LAYERS_HELP, flag_values=flag_values)
                continue
            hint = hints[name]
            if typing.get_origin(hint) is typing.Union:  # Optional[X]: X
                hint = next(a for a in typing.get_args(hint) if a is not type(None))
            kind = "list" if typing.get_origin(hint) is tuple else _KINDS[hint]
            getattr(flags, f"DEFINE_{kind}")(name, None, helps[name], flag_values=flag_values)


def _data_changes(flag_values) -> dict:
    changes = {name: _flag(flag_values, name) for name in DATA_FLAGS}
    changes["bucket_boundaries"] = _number_list(flag_values, "bucket_boundaries", int, "integers")
    if changes["target_langs"] is not None:
        changes["target_langs"] = tuple(changes["target_langs"])
    given = [name for name in _PREFIXES if changes[name] is not None]
    if given and changes["corpus"] is None:
        changes["corpus"] = "text"  # your own files: the recipe's corpus gives way; its model and training stay
    elif given and changes["corpus"] != "text":
        fail(f"--{given[0]}: local files need --corpus=text (or no --corpus), got --corpus={changes['corpus']}")
    return changes


def _number_list(flag_values, name: str, kind, kinds: str):
    """List flag ``name`` as a tuple of ``kind`` (None: unset), or exit naming it and what it wants (``kinds``)."""
    values = _flag(flag_values, name)
    if values is None:
        return None
    try:
        return tuple(kind(v) for v in values)
    except ValueError:
        fail(f"--{name}: expected comma-separated {kinds}, got {','.join(values)!r}")


def _flag(flag_values, name: str):
    """The value of flag ``name``, or None where this program does not define it."""
    return flag_values[name].value if name in flag_values else None


def resolve_recipe(flag_values=FLAGS, needs_eval: bool = True):
    """The recipe of --recipe with the override flags applied; a bad value exits with one line naming its flag.

    ``needs_eval``: the caller validates on the eval split (training), so corpus text needs
    --eval_prefix unless --eval_split is newstest2013/2014.
    """
    from keras_transformer.config import override

    recipe = load_recipe(flag_values.recipe)
    for name in _POSITIVE:
        value = _flag(flag_values, name)
        if value is not None and value <= 0:
            fail(f"--{name}: must be positive, got {value}")
    layers = _flag(flag_values, "num_layers")
    try:  # each config validates its fields and names the field, which is the flag's name
        data = override(recipe.data, **_data_changes(flag_values))
        stacks = {f"num_{side}_layers": _flag(flag_values, f"num_{side}_layers") or layers
                  for side in ("encoder", "decoder")}
        model = override(recipe.model, **stacks, **{name: _flag(flag_values, name) for name in MODEL_FLAGS
                                                    if name != "num_layers" and name not in stacks})
        train = override(recipe.train, **{name: _flag(flag_values, name) for name in TRAIN_FLAGS})
        parsing = override(recipe.parsing, **{name: _flag(flag_values, name) for name in PARSING_FLAGS})
        decode = override(recipe.decode, alpha_grid=_number_list(flag_values, "alpha_grid", float, "numbers"))
        from keras_transformer.data import batching

        batching.bucket_shapes(data)  # refuses a budget below the longest bucket, before any work
        task = recipe.task if data.corpus == recipe.data.corpus else ""  # --corpus: the task of that corpus
        resolved = dataclasses.replace(recipe, model=model, data=data, train=train, parsing=parsing,
                                       decode=decode, task=task)  # checks across all
    except ValueError as e:
        fail_with(e, flag_values)
    if data.corpus == "text":
        if not data.train_prefix:
            fail("--train_prefix: required with corpus text (files PREFIX.<source_lang>[.gz] and "
                 "PREFIX.<target_lang>[.gz])")
        if needs_eval and not data.eval_prefix and not data.eval_split.startswith("newstest"):
            fail(f"--eval_prefix: required with corpus text to validate on --eval_split={data.eval_split} "
                 "(or give --eval_split=newstest2013)")
    return resolved


def _parse_flags(argv):
    """absl's flag parsing, with a parse error (a bad integer, an unknown flag) as one line and exit 2."""
    try:
        return FLAGS(argv)
    except flags.Error as e:
        fail(" ".join(str(e).split()))


def tool_help(module_name: str) -> str:
    """What ``--help`` prints: the tool's docstring (what it does, examples) and every flag the tool defines,
    its own and those of the shared flag modules it uses (this package's, ``keras_transformer.cli.*``)."""
    doc = (sys.modules[module_name].__doc__ or "").strip()
    sections = [doc, "flags:"]
    main_file = getattr(sys.modules.get("__main__"), "__file__", None) or ""
    for module, module_flags in sorted(FLAGS.flags_by_module_dict().items()):
        if module.startswith("keras_transformer.cli") or module in ("__main__", main_file, sys.argv[0]):
            for flag in sorted(module_flags, key=lambda f: f.name):
                default = "" if flag.default is None else f" (default: {flag.default_as_str})"
                sections.append(f"  --{flag.name}: {' '.join(flag.help.split())}{default}")
    sections.append("Try --helpfull for every flag, absl's and TensorFlow's included.")
    return "\n".join(sections)


def run(main, decoding: bool = False) -> None:
    """``app.run(main)`` with TensorFlow's devices initialised quietly first (``decoding``: for a program that
    only decodes, one thread per op; ``tf_setup.init_devices``). ``--help`` (``-h``, ``--helpshort``) prints
    ``tool_help`` and exits 0.

    SIGTERM and Ctrl-C outside training (which checkpoints first: ``training/preemption.py``) stop the tool
    with one line and exit status 143 or 130, no traceback; every file the tools write is written whole or not
    at all, so nothing is left half-written and the same command can be run again."""
    from keras_transformer.tf_setup import init_devices, silence_native_stderr

    if any(arg in ("--help", "-h", "-?", "--helpshort") for arg in sys.argv[1:]):
        print(tool_help(main.__module__))
        sys.exit(0)
    init_devices(decoding=decoding)
    silence_native_stderr()

    def quiet_main(argv):
        from absl import logging as absl_logging

        if not FLAGS["verbosity"].present:  # --verbosity=0 shows INFO logs
            absl_logging.set_verbosity(absl_logging.WARNING)
        try:
            return main(argv)
        except KeyboardInterrupt:
            _stopped(signal.SIGINT)

    signal.signal(signal.SIGTERM, lambda signum, frame: _stopped(signum))
    app.run(quiet_main, flags_parser=_parse_flags)


def _stopped(signum) -> None:
    """Exit 128 + ``signum`` with one line: a signal stopped the tool (outside training's own handling)."""
    print(f"stopped by {signal.Signals(signum).name}; nothing was left half-written: run the same command to go on",
          file=sys.stderr, flush=True)
    sys.exit(128 + signum)


def load_recipe(name: str):
    """The recipe --recipe names (a recipe name or a recipe JSON file), or exit with one line naming the flag."""
    from keras_transformer import recipes

    try:
        return recipes.load(name)
    except ValueError as e:
        fail(str(e))


def fail_with(error: Exception, flag_values=FLAGS) -> None:
    """Exit with a config/data error; "field: ..." messages become "--field: ..." when that flag exists.

    An OSError from the system (a full disk, a read-only directory) becomes "path: reason".
    """
    message = describe_os_error(error) if isinstance(error, OSError) else str(error)
    name = message.split(":", 1)[0]
    if name.isidentifier() and name in flag_values:
        message = f"--{message}"
    fail(message)


def describe_os_error(error: OSError) -> str:
    """One line for an OSError: "path: reason" when the system names a file, else its message."""
    if error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    return " ".join(str(error).split())


def fail(message: str) -> None:
    """Exit non-zero with one clear line (the message names the flag or file)."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def read_text_flag(flag: str):
    """The lines of the plain/.gz file named by --flag, or exit with one line naming the flag."""
    from keras_transformer.data import files

    path = getattr(FLAGS, flag)
    if not path:
        fail(f"--{flag}: required")
    try:
        return files.read_text(path)
    except (ValueError, FileNotFoundError) as e:
        fail(f"--{flag}: {e}")


def check_output_flag(flag: str) -> None:
    """Exit naming --flag when its path cannot take output (stdout closed, a directory): checked before the work."""
    from keras_transformer.data import files

    path = getattr(FLAGS, flag)
    try:
        if path:
            files.check_output(path)
    except ValueError as e:
        fail(f"--{flag}: {e}")


def write_output_flag(flag: str, lines) -> None:
    """Write lines to the file (or '-': stdout) --flag names, whole or not at all, or exit naming the flag."""
    from keras_transformer.data import files

    try:
        files.write_lines(getattr(FLAGS, flag), lines)
    except (OSError, ValueError) as e:  # a full disk, a read-only directory, stdout closed
        fail(f"--{flag}: {describe_os_error(e) if isinstance(e, OSError) else e}")
