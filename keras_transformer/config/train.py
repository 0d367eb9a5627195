"""Optimisation (§5.3) and regularisation (§5.4): ``TrainConfig``. Each field's docstring is its flag's help."""

from __future__ import annotations

import dataclasses

from keras_transformer.config.common import _require


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Optimisation (§5.3) and regularisation (§5.4)."""

    train_steps: int = 100_000
    """Parameter updates to train for (the paper counts steps: 100K for the base model, §5.2)."""
    max_train_minutes: float = 0.0
    """Stop (and checkpoint) after this much wall time; 0 = no cap."""
    min_train_steps: int = 0
    """Train at least this many steps even past --max_train_minutes (the steps below which the recipe's model is
    not yet useful; a CPU too slow to make them says so early); 0 = the cap alone."""
    warmup_steps: int = 4000
    """warmup_steps of Eq. 3."""
    learning_rate_scale: float = 1.0
    """Multiplies Eq. 3; 1.0 is the paper."""
    cooldown: float = 0.0
    """Take the learning rate linearly to 0 over this last fraction of the run (of its steps or of
    --max_train_minutes, whichever ends it; not in the paper); 0 = Eq. 3 to the end."""
    adam_beta_1: float = 0.9
    """Adam's β1 (§5.3)."""
    adam_beta_2: float = 0.98
    """Adam's β2 (§5.3)."""
    adam_epsilon: float = 1e-9
    """Adam's ε (§5.3)."""
    label_smoothing: float = 0.1
    """ε_ls (§5.4)."""
    gradient_accumulation_steps: int = 0
    """Micro-batches per update; 0 = derived from --max_tokens_per_device and the device count."""
    checkpoint_every: int = 1000
    """Save (and validate) every N steps (one Keras epoch)."""
    keep_checkpoints: int = 5
    """Keep the last K checkpoints (§6.1 averages the last 5)."""
    eval_batches: int = 50
    """Validation batches per checkpoint; 0 = the whole eval split."""
    bleu_samples: int = 0
    """Dev inputs decoded and scored by the task's metric at each checkpoint (translation: BLEU and chrF;
    parsing: labeled F1); 0 = off."""
    keep_best_by: str = ""
    """val_loss, or the task's dev score val_bleu (translation) or val_f1 (parsing), which needs --bleu_samples:
    also keep the best checkpoints by this validation score."""
    keep_best: int = 5
    """How many best checkpoints --keep_best_by keeps."""
    early_stopping_patience: int = 0
    """Stop after N validations without a new best --keep_best_by; 0 = off."""
    init_from: str = ""
    """A training work directory or SavedModel whose weights and tokenizer start this run."""
    new_vocabulary: bool = False
    """With --init_from: train this run's own tokenizer on its data (--vocab_size may differ) instead of keeping
    the source model's; pieces in both vocabularies keep their embedding rows, the others start from the paper's
    initialisation."""
    freeze: str = ""
    """Weights kept bit-identical through training, comma-separated: embeddings (also the pre-softmax projection,
    §3.4), encoder, decoder, a stack's layers (encoder:0-1, decoder:3) or a variable path prefix
    (decoder/layer_0/cross_attention)."""
    mixed_precision: bool = False
    """Reduced-precision compute with float32 weights where the hardware has it: mixed_bfloat16 on a TPU, a GPU of
    compute capability 8.0+ or a CPU with AMX or AVX512_BF16; mixed_float16 with dynamic loss scaling on a GPU of
    compute capability 7.x; float32 elsewhere (precision.py)."""
    jit_compile: bool = False
    """XLA-compile the train step (no faster than the plain graph on CPU, and slower to warm up)."""
    seed: int = 1
    """Random seed of the weights and dropout."""

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
        _require(not self.new_vocabulary or self.init_from, "new_vocabulary", "needs init_from (the model it adapts)")
