"""Typed, frozen configuration for every stage of the pipeline.

A recipe (``recipes/``) is one :class:`Recipe`; a variant is
``dataclasses.replace(base, ...)``. Every config validates itself in
``__post_init__`` and names the offending field in its error.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from typing import Any, Optional, Tuple


# The paper's two tasks (``tasks/``) and the corpora each reads (``DataConfig.corpus``): a recipe names its task;
# one written before recipes named it gets the task of its corpus.
TASK_CORPORA = {
    "translation": ("multi30k", "wmt14", "wmt_t2t", "text"),  # §6.1-6.2
    "parsing": ("ptb",),  # English constituency parsing, §6.3
}
CORPORA = tuple(c for corpora in TASK_CORPORA.values() for c in corpora)
# Fields that only one task reads ("treebank") or requires as given ("shared_vocabulary": one vocabulary).
TASK_FIELDS = {"parsing": ("treebank", "tree_leaves", "shared_vocabulary", "align_words")}

# The tf.distribute strategies ``training.make_strategy`` builds (``--strategy``); the first is the default.
STRATEGIES = ("mirrored", "one_device", "multi_worker", "tpu")


def _require(condition: bool, field: str, message: str) -> None:
    if not condition:
        raise ValueError(f"{field}: {message}")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The architecture (§3, Table 3). Symbols follow the paper."""

    vocab_size: int = 37000  # shared source/target BPE vocabulary (§5.1); each side's when not shared
    # §3.4 and §5.1: one vocabulary for both languages, one matrix for both embeddings and the pre-softmax
    # projection. False: a vocab_size-piece BPE model per language, the source its own embedding, the target's
    # embedding tied to the pre-softmax projection only (Press & Wolf, 2017; fairseq's
    # --share-decoder-input-output-embed); not in the paper.
    shared_vocabulary: bool = True
    d_model: int = 512
    d_ff: int = 2048
    num_heads: int = 8  # h
    num_encoder_layers: int = 6  # N
    num_decoder_layers: int = 6  # N
    d_k: Optional[int] = None  # per-head query/key size; None -> d_model / h (§3.2.2)
    d_v: Optional[int] = None  # per-head value size; None -> d_model / h
    dropout: float = 0.1  # P_drop (§5.4): sub-layer outputs and embedding sums
    attention_dropout: float = 0.0  # on attention weights; not in the paper
    relu_dropout: float = 0.0  # inside the FFN; not in the paper
    # Word dropout on the source (not in the paper; Sennrich et al., 2016; parsers' unknown-word replacement):
    # during training each source piece is read as UNK with this probability (its position, word boundaries
    # and padding mask stay those of the real piece).
    source_token_dropout: float = 0.0
    # Word dropout by frequency instead (Kiperwasser & Goldberg, 2016, on words; here on pieces): a source piece
    # seen c times in the training sources is read as UNK with probability alpha / (alpha + c), so rare pieces
    # often and frequent ones (function words, punctuation) almost never; the counts are kept with the weights
    # (``Transformer.set_piece_counts``). 0 turns it off; it replaces ``source_token_dropout``, not adds to it.
    source_token_dropout_alpha: float = 0.0
    # The same on the decoder input (target pieces but BOS; the model still learns to predict the real ones).
    target_token_dropout: float = 0.0
    positional: str = "sinusoidal"  # "sinusoidal" (§3.5) or "learned" (Table 3 row E)
    max_length: int = 1024  # longest position the model can embed
    norm: str = "post"  # "post" as in §3.1; "pre" is a departure (pre-LN)
    layer_norm_epsilon: float = 1e-6  # not given in the paper
    # Parsing (§6.3), not in the paper: the decoder input at each step also gets the encoder output of the next
    # word to bracket (word k, k = leaves written so far; Ma et al., 2017; Liu, Zhu & Shi, 2018), through a
    # learned D x D projection. Which pieces are leaves and which start a word: two tables the parser's
    # tokenizer fills (``Transformer.set_word_tables``), kept with the weights.
    align_words: bool = False
    # With align_words: the aligned input also holds the encoder outputs at the last piece of word k and of word
    # k-1, the two sides of the gap before word k where brackets close and open (a chart parser's fencepost,
    # Stern et al., 2017), through a learned 3D x D projection instead of D x D.
    word_span: bool = False
    # With align_words: the aligned input also holds a learned embedding of the brackets open after the prefix
    # (the depth the constrained search tracks; depths past 63 share one row), not counted by attention.
    bracket_depth: bool = False
    # With align_words and tag leaves: an auxiliary loss, weighted by this, in which the encoder output at each
    # word's first piece alone predicts the word's leaf (its POS tag) through a learned D x D map and the tied
    # projection (multi-task tagging, as in Søgaard & Goldberg, 2016); training only, the decoder unchanged. 0: off.
    tag_loss: float = 0.0

    def __post_init__(self):
        _require(self.vocab_size > 4, "vocab_size", f"must be > 4, got {self.vocab_size}")
        _require(self.d_model > 0, "d_model", f"must be positive, got {self.d_model}")
        _require(not self.word_span or self.align_words, "word_span", "needs align_words")
        _require(not self.bracket_depth or self.align_words, "bracket_depth", "needs align_words")
        _require(not self.tag_loss or self.align_words, "tag_loss", "needs align_words")
        _require(self.tag_loss >= 0.0, "tag_loss", f"must be >= 0, got {self.tag_loss}")
        _require(self.d_ff > 0, "d_ff", f"must be positive, got {self.d_ff}")
        _require(self.num_heads > 0, "num_heads", f"must be positive, got {self.num_heads}")
        _require(self.num_encoder_layers > 0, "num_encoder_layers", "must be positive")
        _require(self.num_decoder_layers > 0, "num_decoder_layers", "must be positive")
        if self.d_k is None or self.d_v is None:
            _require(
                self.d_model % self.num_heads == 0,
                "num_heads",
                f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}",
            )
        for name in ("d_k", "d_v"):
            value = getattr(self, name)
            _require(value is None or value > 0, name, f"must be positive, got {value}")
        for name in ("dropout", "attention_dropout", "relu_dropout", "source_token_dropout", "target_token_dropout"):
            value = getattr(self, name)
            _require(0.0 <= value < 1.0, name, f"must be in [0, 1), got {value}")
        _require(self.source_token_dropout_alpha >= 0.0, "source_token_dropout_alpha",
                 f"must be >= 0, got {self.source_token_dropout_alpha}")
        _require(not (self.source_token_dropout and self.source_token_dropout_alpha), "source_token_dropout_alpha",
                 "replaces source_token_dropout: set one of the two, not both")
        _require(
            self.positional in ("sinusoidal", "learned"),
            "positional",
            f"must be 'sinusoidal' or 'learned', got {self.positional!r}",
        )
        _require(self.norm in ("post", "pre"), "norm", f"must be 'post' or 'pre', got {self.norm!r}")
        _require(self.max_length > 0, "max_length", "must be positive")

    @property
    def key_dim(self) -> int:
        return self.d_k if self.d_k is not None else self.d_model // self.num_heads

    @property
    def value_dim(self) -> int:
        return self.d_v if self.d_v is not None else self.d_model // self.num_heads


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Corpora, tokenizer and batching (§5.1)."""

    corpus: str = "multi30k"  # translation: "multi30k", "wmt14", "wmt_t2t", "text" (local files); parsing: "ptb"
    source_lang: str = "en"
    target_lang: str = "de"
    train_split: str = "train"
    eval_split: str = "val"
    test_split: str = "test_2016_flickr"
    # Local parallel text for corpus="text": file prefixes; "<prefix>.<lang>[.gz]". A prefix may be a glob
    # ("data/train-*") naming aligned shard pairs "<shard>.<lang>[.gz]".
    train_prefix: Optional[str] = None
    eval_prefix: Optional[str] = None
    test_prefix: Optional[str] = None
    max_length: int = 256  # pairs with more subword tokens (incl. EOS) on a side are dropped
    # GLOBAL padded tokens per side in one parameter update, summed over replicas and accumulated
    # micro-batches (§5.1: ~25000 source + 25000 target tokens per batch).
    tokens_per_batch: int = 25000
    # Memory budget of one device: padded tokens per side in one micro-batch on one replica; 0 -> no cap.
    # Where tokens_per_batch / replicas exceeds it, the update is accumulated over micro-batches.
    max_tokens_per_device: int = 0
    bucket_boundaries: Optional[Tuple[int, ...]] = None  # None -> geometric, derived from max_length
    shuffle_buffer: int = 20000
    seed: int = 1
    tokenizer_sample_lines: int = 2_000_000  # lines of training text sampled for SentencePiece
    # BPE-dropout (Provilkov et al., 2020; not in the paper): training pairs are segmented anew at every pass, each
    # BPE merge skipped with this probability; validation, test and decoding keep the one deterministic segmentation.
    bpe_dropout: float = 0.0
    # The parsing task's treebank: a directory of .mrg trees or a zip of them, relative paths in the data
    # directory; None -> the WSJ sample ptb-wsj-sample/treebank.zip (tasks/parsing/treebank.py)
    treebank: Optional[str] = None
    # The parsing task's leaves in a linearized tree: "slot", every word the placeholder XX (Vinyals et al., 2015),
    # or "tag", its POS tag written @NN (tensor2tensor's WSJ problem writes tags; the parser then also tags).
    tree_leaves: str = "slot"

    def __post_init__(self):
        _require(self.tree_leaves in ("slot", "tag"), "tree_leaves", f"must be 'slot' or 'tag', got "
                 f"{self.tree_leaves!r}")
        _require(self.corpus in CORPORA, "corpus", f"unknown corpus {self.corpus!r}; expected {', '.join(CORPORA)}")
        _require(self.source_lang != self.target_lang, "target_lang", "must differ from source_lang")
        _require(self.max_length > 1, "max_length", f"must be > 1, got {self.max_length}")
        _require(self.tokens_per_batch > 0, "tokens_per_batch", f"must be positive, got {self.tokens_per_batch}")
        _require(self.max_tokens_per_device >= 0, "max_tokens_per_device",
                 f"must be >= 0, got {self.max_tokens_per_device}")
        _require(0.0 <= self.bpe_dropout < 1.0, "bpe_dropout", f"must be in [0, 1), got {self.bpe_dropout}")
        if self.bucket_boundaries is not None:
            b = tuple(self.bucket_boundaries)
            _require(
                all(x < y for x, y in zip(b, b[1:])) and b and b[0] > 0,
                "bucket_boundaries",
                f"must be positive and strictly increasing, got {b}",
            )
            _require(b[-1] <= self.max_length, "bucket_boundaries", "last boundary exceeds max_length")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Optimisation (§5.3) and regularisation (§5.4)."""

    train_steps: int = 100_000  # base model: 100K steps (§5.2)
    max_train_minutes: float = 0.0  # wall-clock cap on one training run (stops early, checkpointed); 0 -> none
    # A floor under that cap: the steps below which the recipe's model is not yet useful. On a CPU too slow to make
    # them within max_train_minutes the run says so early and trains on to this step (or train_steps, if fewer);
    # 0 -> the cap alone.
    min_train_steps: int = 0
    warmup_steps: int = 4000  # Eq. 3
    learning_rate_scale: float = 1.0  # multiplies Eq. 3; 1.0 is the paper
    # Not in the paper: the last fraction of the run (by steps or by max_train_minutes, whichever ends it) takes
    # the rate linearly to 0 (schedules.NoamSchedule); 0 -> Eq. 3 to the end.
    cooldown: float = 0.0
    adam_beta_1: float = 0.9
    adam_beta_2: float = 0.98
    adam_epsilon: float = 1e-9
    label_smoothing: float = 0.1  # ε_ls (§5.4)
    # Micro-batches per update; 0 -> derived from the device count and data.max_tokens_per_device.
    gradient_accumulation_steps: int = 0
    checkpoint_every: int = 1000  # steps between checkpoints; also the validation cadence (one Keras epoch)
    keep_checkpoints: int = 5  # §6.1 averages the last 5
    eval_batches: int = 50  # validation batches per epoch; 0 -> whole eval split
    # Dev inputs decoded and scored by the task's metric at each checkpoint (translation: BLEU and chrF, parsing:
    # labeled F1); 0 -> off.
    bleu_samples: int = 0
    # "val_loss", or the task's dev metric "val_bleu" / "val_f1" (needs bleu_samples): keep the best checkpoints apart
    keep_best_by: str = ""
    keep_best: int = 5  # how many best checkpoints keep_best_by keeps
    early_stopping_patience: int = 0  # stop after N validations without a new best keep_best_by; 0 -> off
    init_from: str = ""  # a work directory or SavedModel whose weights and tokenizer start this run
    mixed_precision: bool = False  # ask for mixed_bfloat16; granted where the hardware has it (precision.py)
    jit_compile: bool = False  # XLA; measured no faster than the graph on CPU, so off by default
    seed: int = 1

    def __post_init__(self):
        _require(self.train_steps > 0, "train_steps", f"must be positive, got {self.train_steps}")
        _require(self.max_train_minutes >= 0, "max_train_minutes", f"must be >= 0, got {self.max_train_minutes}")
        _require(self.min_train_steps >= 0, "min_train_steps", f"must be >= 0, got {self.min_train_steps}")
        _require(self.warmup_steps > 0, "warmup_steps", f"must be positive, got {self.warmup_steps}")
        _require(self.learning_rate_scale > 0, "learning_rate_scale", "must be positive")
        _require(0.0 <= self.cooldown <= 1.0, "cooldown", f"must be in [0, 1], got {self.cooldown}")
        _require(0.0 <= self.label_smoothing < 1.0, "label_smoothing", "must be in [0, 1)")
        _require(self.gradient_accumulation_steps >= 0, "gradient_accumulation_steps", "must be >= 0 (0 = derived)")
        _require(self.checkpoint_every > 0, "checkpoint_every", "must be positive")
        _require(self.keep_checkpoints > 0, "keep_checkpoints", "must be positive")
        _require(self.eval_batches >= 0, "eval_batches", "must be >= 0")
        _require(self.bleu_samples >= 0, "bleu_samples", "must be >= 0")
        _require(self.keep_best_by in ("", "val_loss", "val_bleu", "val_f1"), "keep_best_by",
                 f"must be val_loss, val_bleu (translation) or val_f1 (parsing), got {self.keep_best_by!r}")
        _require(self.keep_best_by in ("", "val_loss") or self.bleu_samples > 0, "keep_best_by",
                 f"{self.keep_best_by} needs bleu_samples > 0 (the dev score is computed at each checkpoint)")
        _require(self.keep_best > 0, "keep_best", "must be positive")
        _require(self.early_stopping_patience >= 0, "early_stopping_patience", "must be >= 0")
        _require(not self.early_stopping_patience or self.keep_best_by, "early_stopping_patience",
                 "needs keep_best_by (the validation score it watches)")


@dataclasses.dataclass(frozen=True)
class DecodeConfig:
    """Inference (§6.1): beam 4, α = 0.6, max length = input + 50."""

    beam_size: int = 4
    alpha: float = 0.6  # length penalty ((5+|Y|)/6)^α (Wu et al., 2016)
    extra_length: int = 50
    average_checkpoints: int = 5
    # §6.1 chose beam size and α "after experimentation on the development set": kt-pipeline decodes the eval split
    # with each α here after training and keeps the best by cased BLEU (ties: the first) for the test set and the
    # export; empty -> ``alpha`` as given.
    alpha_grid: Tuple[float, ...] = ()
    # When an input's search stops (decoding/beam_search.py): "exact" (no unfinished hypothesis could beat the
    # best even at its maximum length: what the search would find without stopping) or "heuristic" (as if the
    # unfinished ones ended now: Hugging Face generate's default; sooner, and it may change a translation).
    stop_rule: str = "exact"

    def __post_init__(self):
        _require(self.stop_rule in STOP_RULES, "stop_rule", f"must be one of {', '.join(STOP_RULES)}")
        for name in DECODE_OPTIONS:
            problem = decode_option_error(name, getattr(self, name))
            _require(problem is None, name, problem or "")
        for alpha in self.alpha_grid:
            problem = decode_option_error("alpha", alpha)
            _require(problem is None, "alpha_grid", problem or "")
        _require(self.average_checkpoints >= 1, "average_checkpoints", "must be >= 1")


STOP_RULES = ("exact", "heuristic")  # DecodeConfig.stop_rule

# The decoding options' valid values, defined once: DecodeConfig, the inference flags (--beam_size, --alpha,
# --extra_length) and the exported signatures' in-graph asserts (serving/checks.py) all check these rules.
DECODE_OPTIONS = {  # name: (least valid value, the rule as an error states it); NaN and ±inf are never valid
    "beam_size": (1, "must be >= 1"),
    "alpha": (0.0, "must be a finite number >= 0"),
    "extra_length": (0, "must be >= 0"),
}


# What an export may compute in (kt-export --precision, export.with_precision): float32, or bfloat16 weights and
# activations (the softmaxes in float32), whose matmuls run on bfloat16 units where the CPU has them (AMX).
PRECISIONS = ("float32", "bfloat16")
# The beam searches an export deals a batch to, run at once by inter-op threads (decoding.parallel; kt-export
# --parallel_searches): the benchmark machine's 2 cores (docs/benchmarks.md, "One thread per op, two searches at once").
PARALLEL_SEARCHES = 2
# Batches kt-translate, kt-evaluate and the pipeline keep decoding at once with a TensorFlow translator
# (decoding.lines.run_batches): 1.12x the sentences a second of one at a time on the 2-core benchmark machine
# (docs/benchmarks.md).
IN_FLIGHT_BATCHES = 2


@dataclasses.dataclass(frozen=True)
class XlaBuckets:
    """The static shapes an XLA export (kt-export --jit_compile) compiles its search for.

    A search part of B items with S source tokens runs padded to the smallest batch size >= B and the smallest
    source length >= S (the last one is the export's max_source_length); each pair is one XLA compilation,
    done at load time by the export's warm-up requests.
    """

    batch_sizes: Tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    source_lengths: Tuple[int, ...] = (16, 32)  # then max_source_length (80 for Multi30k): 18 compilations

    def __post_init__(self):
        for name in ("batch_sizes", "source_lengths"):
            values = tuple(getattr(self, name))
            _require(len(values) > 0 and all(isinstance(v, int) and v >= 1 for v in values), name,
                     f"expected positive integers, got {values}")
            _require(all(a < b for a, b in zip(values, values[1:])), name,
                     f"must be strictly increasing, got {', '.join(map(str, values))}")
            object.__setattr__(self, name, values)

    def for_source(self, max_source_length: int) -> Tuple[int, ...]:
        """The source lengths below ``max_source_length``, then it: every source (truncated to it) fits one."""
        return tuple(s for s in self.source_lengths if s < max_source_length) + (max_source_length,)


def decode_option_error(name: str, value) -> Optional[str]:
    """Why ``value`` is not a valid decoding option ``name`` ("must be ..., got v"), or None when it is."""
    least, rule = DECODE_OPTIONS[name]
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and value >= least:
        return None
    return f"{rule}, got {value}"


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Everything needed to reproduce one experiment."""

    name: str
    model: ModelConfig = ModelConfig()
    data: DataConfig = DataConfig()
    train: TrainConfig = TrainConfig()
    decode: DecodeConfig = DecodeConfig()
    description: str = ""
    task: str = ""  # "translation" or "parsing" (TASK_CORPORA); "" -> the task of data.corpus

    def __post_init__(self):
        _require(bool(self.name), "name", "must be non-empty")
        if not self.task:
            object.__setattr__(self, "task", next(t for t, cs in TASK_CORPORA.items() if self.data.corpus in cs))
        _require(self.task in TASK_CORPORA, "task", f"unknown task {self.task!r}; expected {', '.join(TASK_CORPORA)}")
        _require(self.data.corpus in TASK_CORPORA[self.task], "corpus",
                 f"the {self.task} task reads {', '.join(TASK_CORPORA[self.task])}, not {self.data.corpus!r}")
        for name, unset in (("treebank", None), ("tree_leaves", "slot")):
            _require(getattr(self.data, name) == unset or name in TASK_FIELDS.get(self.task, ()), name,
                     f"applies to the parsing task only, not {self.task}")
        _require(self.model.shared_vocabulary or "shared_vocabulary" not in TASK_FIELDS.get(self.task, ()),
                 "shared_vocabulary", f"the {self.task} task reads and writes with one vocabulary; it cannot be False")
        _require(not self.model.align_words or "align_words" in TASK_FIELDS.get(self.task, ()), "align_words",
                 f"applies to the parsing task only (its leaves align to the input's words), not {self.task}")
        _require(not self.model.tag_loss or self.data.tree_leaves == "tag", "tag_loss",
                 f"needs tree_leaves='tag' (the leaves it predicts), not {self.data.tree_leaves!r}")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict) -> "Recipe":
        """Inverse of ``to_dict``. An unknown key or a value of the wrong type is a ValueError naming it, as
        ``section.field`` (``recipe_keys``), and so is a value its config refuses; keys older versions wrote and
        this one no longer uses are dropped."""
        from keras_transformer.recipe_keys import check_recipe_keys, check_recipe_types

        d = check_recipe_types(check_recipe_keys(d, cls), cls)  # every section there, each value of its type
        configs = {}
        for section, config_cls in (("model", ModelConfig), ("data", DataConfig), ("train", TrainConfig),
                                    ("decode", DecodeConfig)):
            values = {k: tuple(v) if isinstance(v, list) else v for k, v in d[section].items()}  # JSON lists
            try:
                configs[section] = config_cls(**values)
            except ValueError as e:  # "d_model: must be ..." -> "model.d_model: must be ..."
                raise ValueError(f"{section}.{e}") from None
        return cls(
            name=d.get("name", ""),
            description=d.get("description", ""),
            task=d.get("task", ""),  # recipes written before tasks were named: the task of their corpus
            **configs,
        )


def override(config: Any, **changes: Any) -> Any:
    """``dataclasses.replace`` that drops ``None`` values (unset flags)."""
    changes = {k: v for k, v in changes.items() if v is not None}
    return dataclasses.replace(config, **changes) if changes else config
