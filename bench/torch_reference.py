"""A PyTorch reference of the same Transformer for bench_train.py (torch is a benchmark-only extra).

``nn.Transformer(d_model, nhead, N, N, d_ff, dropout, batch_first=True, norm_first=False)`` (post-LN, §3.1)
with what our model adds around it:

  - one shared embedding E [V, D], N(0, D^-0.5), scaled by sqrt(D) (§3.4), for source and target;
  - sinusoidal positions (§3.5) and dropout on the sums (§5.4);
  - the tied pre-softmax projection x E^T (§3.4), no bias;
  - label-smoothed cross entropy over real target tokens: ``F.cross_entropy(..., label_smoothing=ε,
    ignore_index=PAD)``, the same q = (1 - ε) onehot + ε / V as ``keras_transformer.losses``;
  - Adam(β1 = 0.9, β2 = 0.98, ε = 1e-9) on the Noam schedule (Eq. 3);
  - padding masks on every attention's keys and the causal mask on decoder self-attention.

Differences, all small: ``nn.Transformer`` closes each stack with a final LayerNorm (2 x 2D parameters and
two LayerNorms our post-LN model does not have), uses LayerNorm ε from the config (1e-6) as we do, and
applies its one ``dropout`` also to attention weights and inside the FFN; we set those two to the recipe's
``attention_dropout`` and ``relu_dropout`` (0 in our recipes) so both frameworks drop out the same tensors.
Only the loss is computed per step (our Keras step also updates four token metrics, as ``fit`` does).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from keras_transformer import PAD_ID
from keras_transformer.layers.positional import sinusoid_table


class TorchTransformer(nn.Module):
    def __init__(self, config):
        super().__init__()
        c = config
        self.d_model = c.d_model
        self.embedding = nn.Parameter(torch.randn(c.vocab_size, c.d_model) * c.d_model ** -0.5)  # E [V, D]
        self.register_buffer("pe", torch.from_numpy(sinusoid_table(c.max_length, c.d_model)))  # [L, D]
        self.dropout = nn.Dropout(c.dropout)
        self.transformer = nn.Transformer(c.d_model, c.num_heads, c.num_encoder_layers, c.num_decoder_layers,
                                          c.d_ff, c.dropout, layer_norm_eps=c.layer_norm_epsilon,
                                          batch_first=True, norm_first=c.norm == "pre")
        for layer in [*self.transformer.encoder.layers, *self.transformer.decoder.layers]:
            layer.dropout = nn.Dropout(c.relu_dropout) if c.relu_dropout else nn.Identity()  # inside the FFN
            for attention in (layer.self_attn, getattr(layer, "multihead_attn", None)):
                if attention is not None:
                    attention.dropout = c.attention_dropout  # on the attention weights

    def _embed(self, ids):
        """ids [B, N] -> dropout(E[ids] sqrt(D) + PE[:N]) [B, N, D]."""
        x = F.embedding(ids, self.embedding) * math.sqrt(self.d_model) + self.pe[: ids.shape[1]]
        return self.dropout(x)

    def forward(self, source_ids, target_in_ids):
        """source_ids [B, S], target_in_ids [B, T] -> logits [B, T, V]."""
        t = target_in_ids.shape[1]
        source_pad, target_pad = source_ids == PAD_ID, target_in_ids == PAD_ID  # [B, S], [B, T]; True = masked
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=source_ids.device), diagonal=1)  # [T, T]
        y = self.transformer(self._embed(source_ids), self._embed(target_in_ids), tgt_mask=causal,
                             src_key_padding_mask=source_pad, tgt_key_padding_mask=target_pad,
                             memory_key_padding_mask=source_pad, tgt_is_causal=True)  # [B, T, D]
        return y @ self.embedding.t()  # [B, T, V]


def noam(d_model, warmup_steps, scale):
    """Eq. 3 as a LambdaLR factor (base lr 1.0); step_num = step + 1 as in ``keras_transformer.schedules``."""
    return lambda step: scale * d_model ** -0.5 * min((step + 1) ** -0.5, (step + 1) * warmup_steps ** -1.5)


def make_train_step(recipe, batch, compile_model: bool = False, bf16: bool = False):
    """(step, parameter count): ``step()`` runs one training step on the fixed ``batch`` (numpy source,
    target_in, target_out) and returns its loss. ``bf16``: the forward pass and loss under
    ``torch.autocast("cpu", dtype=torch.bfloat16)`` (float32 weights and optimizer, like Keras' mixed_bfloat16)."""
    torch.manual_seed(recipe.train.seed)
    model = TorchTransformer(recipe.model)
    model.train()
    t = recipe.train
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(t.adam_beta_1, t.adam_beta_2),
                                 eps=t.adam_epsilon)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, noam(recipe.model.d_model, t.warmup_steps,
                                                                 t.learning_rate_scale))
    source, target_in, target_out = (torch.from_numpy(np.ascontiguousarray(x)).long() for x in batch)
    vocab_size = recipe.model.vocab_size

    def model_loss(source, target_in, target_out):
        logits = model(source, target_in)  # [B, T, V]
        return F.cross_entropy(logits.reshape(-1, vocab_size), target_out.reshape(-1),
                               label_smoothing=t.label_smoothing, ignore_index=PAD_ID)

    loss_fn = torch.compile(model_loss) if compile_model else model_loss

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(source, target_in, target_out)
        loss.backward()
        optimizer.step()
        schedule.step()
        return float(loss.detach())

    return step, sum(p.numel() for p in model.parameters())
