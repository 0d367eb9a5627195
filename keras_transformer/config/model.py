"""The architecture (§3, Table 3): ``ModelConfig``. Each field's docstring is its flag's help (``--d_model``)."""

from __future__ import annotations

import dataclasses
from typing import Optional

from keras_transformer.config.common import _require


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The architecture (§3, Table 3). Symbols follow the paper."""

    vocab_size: int = 37000
    """Shared source/target BPE vocabulary (§5.1: ~37000 En-De, 32000 En-Fr); each language's with
    --noshared_vocabulary."""
    shared_vocabulary: bool = True
    """One BPE vocabulary and one embedding for both languages, tied to the pre-softmax projection (§3.4);
    --noshared_vocabulary: one per language, the target's tied to the projection (Press & Wolf, 2017; not in the
    paper)."""
    d_model: int = 512
    """d_model (§3): the width of every sub-layer's input and output."""
    d_ff: int = 2048
    """d_ff (Eq. 2): the inner width of the position-wise feed-forward networks."""
    num_heads: int = 8
    """h (§3.2.2): attention heads."""
    num_encoder_layers: int = 6
    """N of the encoder (§3.1); wins over --num_layers."""
    num_decoder_layers: int = 6
    """N of the decoder (§3.1); wins over --num_layers. 0 only for a task's model that has no decoder (the chart
    parser: --chart_labels)."""
    d_k: Optional[int] = None
    """Per-head query/key size; None: d_model / h (§3.2.2)."""
    d_v: Optional[int] = None
    """Per-head value size; None: d_model / h."""
    dropout: float = 0.1
    """P_drop (§5.4): on sub-layer outputs and the embedding sums."""
    attention_dropout: float = 0.0
    """Dropout on the attention weights softmax(QK^T/sqrt(d_k)) (not in the paper)."""
    relu_dropout: float = 0.0
    """Dropout on the FFN's inner ReLU activations (not in the paper)."""
    source_token_dropout: float = 0.0
    """Word dropout (Sennrich et al., 2016; not in the paper): during training read each source piece as UNK with
    this probability (its position, word boundaries and padding mask stay those of the real piece)."""
    source_token_dropout_alpha: float = 0.0
    """Word dropout by frequency instead of --source_token_dropout (Kiperwasser & Goldberg, 2016, here on pieces):
    a source piece seen c times in the training sources is read as UNK with probability alpha / (alpha + c); the
    counts are kept with the weights. 0: off."""
    target_token_dropout: float = 0.0
    """Word dropout on the decoder input: during training read each target piece but BOS as UNK with this
    probability (the model still learns to predict the real ones; not in the paper)."""
    positional: str = "sinusoidal"
    """Positions: sinusoidal (§3.5) or learned (Table 3 row E)."""
    max_length: int = 1024
    """The longest position the model can embed."""
    norm: str = "post"
    """Where each sub-layer's LayerNorm sits: post, LayerNorm(x + Sublayer(x)) as in §3.1; or pre,
    x + Sublayer(LayerNorm(x)) with a final LayerNorm per stack (pre-LN, not in the paper)."""
    layer_norm_epsilon: float = 1e-6
    """LayerNorm's epsilon (not given in the paper)."""
    def __post_init__(self):
        _require(self.vocab_size > 4, "vocab_size", f"must be > 4, got {self.vocab_size}")
        _require(self.d_model > 0, "d_model", f"must be positive, got {self.d_model}")
        _require(self.d_ff > 0, "d_ff", f"must be positive, got {self.d_ff}")
        _require(self.num_heads > 0, "num_heads", f"must be positive, got {self.num_heads}")
        _require(self.num_encoder_layers > 0, "num_encoder_layers", "must be positive")
        _require(self.num_decoder_layers >= 0, "num_decoder_layers", "must be >= 0")
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
