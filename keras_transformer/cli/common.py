"""Flags and helpers shared by the entry points.

``define_recipe_override_flags`` defines, once, the flags that change a recipe
(one per config field a user sets: data, model, training); ``resolve_recipe``
applies them to ``--recipe`` and turns a config's error into one line naming the flag.
"""

from __future__ import annotations

import dataclasses
import signal
import sys

from absl import app, flags

from keras_transformer.config import STRATEGIES

FLAGS = flags.FLAGS

_PREFIX_HELP = ("Your own parallel text for the {} split: files PREFIX.<source_lang>[.gz] and "
                "PREFIX.<target_lang>[.gz], one sentence per line (a glob such as data/train-* names aligned shards). "
                "Setting any prefix switches the recipe's corpus "
                "to text (its model and training settings stay); with a --corpus other than text it is an error.")

# (absl type, flag = config field, help). Flags share the field names, so a config's "field: ..." error names them.
DATA_FLAGS = (  # DataConfig (§5.1)
    ("string", "corpus", "multi30k, wmt14 (TFDS; en-de or en-fr), wmt_t2t, text (your own files, --train_prefix), "
     "or ptb (constituency parsing, §6.3: --treebank)."),
    ("string", "source_lang", "Source language code; for corpus text the source files' suffix."),
    ("string", "target_lang", "Target language code; for corpus text the target files' suffix."),
    ("string", "train_prefix", _PREFIX_HELP.format("training")),
    ("string", "eval_prefix", _PREFIX_HELP.format("validation (--eval_split)")),
    ("string", "test_prefix", _PREFIX_HELP.format("test (--test_split)")),
    ("string", "treebank", "Corpus ptb: a directory of Penn Treebank .mrg files (searched recursively) or a zip of "
     "them, relative paths in the data directory (default: the WSJ sample ptb-wsj-sample/treebank.zip). Splits "
     "train/dev/test are WSJ sections 02-21/22/23 when present, else the sample's files 0001-0179/0180-0189/"
     "0190-0199; sections:SS-SS and files:NNNN-NNNN name others."),
    ("string", "tree_leaves", "Corpus ptb: a word's leaf in the linearized tree: slot (XX, Vinyals et al. 2015) or "
     "tag (its POS tag, @NN: the parser also tags)."),
    ("string", "train_split", "Name of the training split (e.g. train)."),
    ("string", "eval_split", "Validation split (e.g. val, validation, newstest2013)."),
    ("string", "test_split", "Test split (e.g. test_2016_flickr, test, newstest2014)."),
    ("integer", "max_length", "Drop pairs with more subword tokens (EOS included) on a side."),
    ("integer", "tokens_per_batch", "GLOBAL token budget of one parameter update, per side: padded tokens summed "
     "over replicas and accumulated micro-batches (§5.1: ~25000 source + 25000 target)."),
    ("integer", "max_tokens_per_device", "Memory budget of one device: padded tokens per side in one micro-batch on "
     "one replica (0 = no cap); gradient accumulation is derived from it to reach --tokens_per_batch."),
    ("list", "bucket_boundaries", "Comma-separated, increasing sequence lengths of the length buckets, e.g. "
     "8,16,32,64 (default: geometric up to --max_length)."),
    ("integer", "shuffle_buffer", "Pairs in the training shuffle buffer."),
    ("integer", "tokenizer_sample_lines", "Lines of training text sampled to train SentencePiece."),
    ("float", "bpe_dropout", "BPE-dropout (Provilkov et al., 2020; SentencePiece's): segment training pairs anew "
     "at every pass, each merge skipped with this probability (0 = off). With Multi30k's 8,000 pieces 0.1 splits 38% "
     "of the words otherwise and trained far more slowly (docs/notes.md); evaluation is never sampled."),
)
MODEL_FLAGS = (  # ModelConfig (§3, Table 3); --num_layers sets num_encoder_layers and num_decoder_layers
    ("integer", "vocab_size", "Shared source/target BPE vocabulary (§5.1: ~37000 En-De, 32000 En-Fr); each "
     "language's with --noshared_vocabulary."),
    ("boolean", "shared_vocabulary", "One BPE vocabulary and one embedding for both languages, tied to the "
     "pre-softmax projection (§3.4); --noshared_vocabulary: one per language, the target's tied to the projection."),
    ("integer", "d_model", "Override d_model."),
    ("integer", "d_ff", "Override d_ff."),
    ("integer", "num_heads", "Override h."),
    ("integer", "num_layers", "Override N (encoder and decoder)."),
    ("integer", "num_encoder_layers", "Override N of the encoder alone (wins over --num_layers)."),
    ("integer", "num_decoder_layers", "Override N of the decoder alone (wins over --num_layers)."),
    ("float", "dropout", "Override P_drop."),
    ("float", "attention_dropout", "Dropout on the attention weights softmax(QK^T/sqrt(d_k)) (not in the paper)."),
    ("float", "relu_dropout", "Dropout on the FFN's inner ReLU activations (not in the paper)."),
    ("float", "source_token_dropout", "Word dropout: during training read each source piece as UNK with this "
     "probability (not in the paper)."),
    ("float", "source_token_dropout_alpha", "Word dropout by frequency instead of --source_token_dropout: a source "
     "piece seen c times in the training sources is read as UNK with probability alpha / (alpha + c)."),
    ("float", "target_token_dropout", "Word dropout on the decoder input: during training read each target piece "
     "but BOS as UNK with this probability (not in the paper)."),
    ("string", "norm", "Where each sub-layer's LayerNorm sits: post, LayerNorm(x + Sublayer(x)) as in §3.1; or pre, "
     "x + Sublayer(LayerNorm(x)) with a final LayerNorm per stack (pre-LN, not in the paper)."),
    ("boolean", "align_words", "Parsing: add the encoder output of the next word to bracket to the decoder input "
     "(not in the paper; docs/parsing.md)."),
    ("boolean", "word_span", "Parsing, with --align_words: also add the encoder outputs at the last piece of the next "
     "word and of the word before it (the gap where brackets close; docs/parsing.md)."),
    ("boolean", "bracket_depth", "Parsing, with --align_words: also add a learned embedding of the brackets open "
     "after the prefix to the decoder input (docs/parsing.md)."),
    ("float", "tag_loss", "Parsing, with --align_words and tag leaves: weight of an auxiliary training loss in which "
     "the encoder output at each word's first piece predicts its POS tag (0 = off; docs/parsing.md)."),
)
TRAIN_FLAGS = (  # TrainConfig (§5.3, §5.4)
    ("integer", "train_steps", "Parameter updates to train for (the paper counts steps)."),
    ("float", "max_train_minutes", "Stop (and checkpoint) after this much wall time; 0 = no cap."),
    ("integer", "min_train_steps", "Train at least this many steps even past --max_train_minutes; 0 = the cap alone."),
    ("integer", "warmup_steps", "Override warmup_steps of Eq. 3."),
    ("float", "learning_rate_scale", "Multiplies Eq. 3."),
    ("float", "cooldown", "Take the learning rate linearly to 0 over this last fraction of the run (of its steps or "
     "of --max_train_minutes, whichever ends it; not in the paper); 0 = Eq. 3 to the end."),
    ("float", "label_smoothing", "Override ε_ls."),
    ("integer", "gradient_accumulation_steps", "Micro-batches per update; 0 = derived from --max_tokens_per_device "
     "and the device count."),
    ("integer", "checkpoint_every", "Save (and validate) every N steps."),
    ("integer", "keep_checkpoints", "Keep the last K checkpoints."),
    ("integer", "bleu_samples", "Dev inputs decoded and scored by the task's metric at each checkpoint "
     "(translation: BLEU and chrF; parsing: labeled F1); 0 = off."),
    ("string", "keep_best_by", "val_loss, or the task's dev score val_bleu (translation) or val_f1 (parsing), which "
     "needs --bleu_samples: also keep the best checkpoints by this validation score."),
    ("integer", "keep_best", "How many best checkpoints --keep_best_by keeps."),
    ("integer", "early_stopping_patience", "Stop after N validations without a new best --keep_best_by; 0 = off."),
    ("string", "init_from", "A training work directory or SavedModel whose weights and tokenizer start this run."),
    ("boolean", "mixed_precision", "bfloat16 compute (mixed_bfloat16 policy) where the hardware multiplies in "
     "bfloat16 (TPU, GPU of compute capability 8.0+, CPU with AMX or AVX512_BF16); float32 elsewhere."),
    ("boolean", "jit_compile", "XLA-compile the train step."),
    ("integer", "seed", "Random seed."),
)
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

    The data flags, --vocab_size and --shared_vocabulary always; with ``training`` also the model and training flags.
    """
    define_recipe_flag(default, flag_values)
    table = DATA_FLAGS + MODEL_FLAGS + TRAIN_FLAGS if training else DATA_FLAGS + MODEL_FLAGS[:2]
    for kind, name, help_text in table:
        getattr(flags, f"DEFINE_{kind}")(name, None, help_text, flag_values=flag_values)


def _data_changes(flag_values) -> dict:
    changes = {name: _flag(flag_values, name) for _, name, _ in DATA_FLAGS}
    boundaries = changes.pop("bucket_boundaries")
    if boundaries is not None:
        try:
            changes["bucket_boundaries"] = tuple(int(b) for b in boundaries)
        except ValueError:
            fail(f"--bucket_boundaries: expected comma-separated integers, got {','.join(boundaries)!r}")
    given = [name for name in _PREFIXES if changes[name] is not None]
    if given and changes["corpus"] is None:
        changes["corpus"] = "text"  # your own files: the recipe's corpus gives way; its model and training stay
    elif given and changes["corpus"] != "text":
        fail(f"--{given[0]}: local files need --corpus=text (or no --corpus), got --corpus={changes['corpus']}")
    return changes


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
        model = override(recipe.model, **stacks, **{name: _flag(flag_values, name) for _, name, _ in MODEL_FLAGS
                                                    if name != "num_layers" and name not in stacks})
        train = override(recipe.train, **{name: _flag(flag_values, name) for _, name, _ in TRAIN_FLAGS})
        from keras_transformer.data import batching

        batching.bucket_shapes(data)  # refuses a budget below the longest bucket, before any work
        task = recipe.task if data.corpus == recipe.data.corpus else ""  # --corpus: the task of that corpus
        resolved = dataclasses.replace(recipe, model=model, data=data, train=train, task=task)  # checks across all
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
