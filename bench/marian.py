"""Our Keras Transformer as a Hugging Face seq2seq model (a benchmark peer; torch/transformers are bench-only):
``MarianMTModel`` for the paper's post-LN layers, ``M2M100ForConditionalGeneration`` for pre-LN ones.

    from_keras(model) -> the HF model       same weights, logits equal to ours to ~1e-5 (tests/bench/test_marian.py)
    save(hf_model, directory)               save_pretrained + what the HF config cannot hold (below)
    load(directory, gnmt_length_penalty=False) -> the HF model   ready for ``generate``
    generate_kwargs(max_new_tokens, beam_size, alpha) -> dict    our §6.1 decoding as far as ``generate`` allows

What the mapping has to take care of (our model: keras_transformer/model.py and layers/):

  - layer-norm placement: post-LN (§3.1, ``norm="post"``) as Marian's layers; pre-LN (``norm="pre"``,
    x + Sublayer(LayerNorm(x)) and a final LayerNorm per stack) as M2M100's, whose stacks end in ``layer_norm``;
    LayerNorm epsilon: ours 1e-6, neither config has a field for it (``nn.LayerNorm`` default 1e-5), so every
    LayerNorm's ``eps`` is set after construction and after loading;
  - one shared embedding E [V, D] (§3.4): HF's ``shared`` (tied to both embed_tokens and lm_head), scaled by
    sqrt(D) (``scale_embedding=True``); logits = x E^T with no bias (Marian's ``final_logits_bias`` zeros);
  - positions (§3.5): ours interleave sin/cos (even dimensions sine), both HF tables put all sines first and are
    recomputed on load, never saved, so ``save`` writes ours beside the weights and ``load`` copies it back (a
    learned table, Table 3 row E, is carried the same way); M2M100 numbers a token's position from
    pad id + 1 (fairseq's offset), so our row i is its row i + 1;
  - Dense kernels [in, out] -> ``nn.Linear`` weights [out, in]; heads are contiguous d_k slices in both;
  - ReLU (Eq. 2); ids PAD 0, BOS 2 (``decoder_start_token_id``), EOS 3.

Decoding differences that remain under ``generate(num_beams=4, length_penalty=0.6, early_stopping="never")``:

  - length penalty: HF scores a finished hypothesis log P / |Y|^α, ours log P / ((5 + |Y|) / 6)^α (GNMT; both
    count the generated tokens, EOS included). ``load(..., gnmt_length_penalty=True)`` swaps in ours (below);
  - maximum length: ``max_new_tokens`` is one number per ``generate`` call (we pass the batch's longest
    source + 50), ours is per sentence (its own source + 50);
  - a hypothesis that reaches the maximum length without EOS: HF keeps it as finished, ours only when no beam
    finished. The search is otherwise the same: top 2K expansions, EOS admitted from the top K only, stop when
    no alive beam can beat the worst finished one at the maximum length ("never"); PAD and BOS are suppressed
    after the log-softmax (no renormalisation), as ours; no forced EOS (Marian's default forces id 0 = our PAD).
"""

from __future__ import annotations

import os

import numpy as np
import torch
from transformers import (AutoConfig, GenerationConfig, GenerationMixin, M2M100Config, M2M100ForConditionalGeneration,
                          MarianConfig, MarianMTModel)

PAD_ID, BOS_ID, EOS_ID = 0, 2, 3  # keras_transformer's reserved ids (not imported: that would load TensorFlow)
EXTRA_FILE = "keras_transformer_extra.npz"  # positions and LayerNorm epsilon, which HF does not save


def hf_config(config) -> MarianConfig | M2M100Config:
    """A MarianConfig (post-LN) or M2M100Config (pre-LN) of the same shape as our ModelConfig ``config``."""
    if config.key_dim * config.num_heads != config.d_model or config.value_dim != config.key_dim:
        raise ValueError("d_k, d_v: HF's heads are d_model / num_heads wide")
    shape = dict(
        vocab_size=config.vocab_size, d_model=config.d_model, max_position_embeddings=config.max_length,
        encoder_layers=config.num_encoder_layers, decoder_layers=config.num_decoder_layers,
        encoder_attention_heads=config.num_heads, decoder_attention_heads=config.num_heads,
        encoder_ffn_dim=config.d_ff, decoder_ffn_dim=config.d_ff, activation_function="relu", scale_embedding=True,
        tie_word_embeddings=True, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
        pad_token_id=PAD_ID, eos_token_id=EOS_ID, bos_token_id=BOS_ID, decoder_start_token_id=BOS_ID)
    if config.norm == "pre":
        return M2M100Config(encoder_layerdrop=0.0, decoder_layerdrop=0.0, **shape)
    return MarianConfig(decoder_vocab_size=config.vocab_size, share_encoder_decoder_embeddings=True,
                        forced_eos_token_id=None, **shape)


def _position_rows(stack) -> torch.Tensor:
    """The rows of ``stack``'s position table that our positions 0, 1, ... read ([L, D], a view)."""
    embed = stack.embed_positions
    if hasattr(embed, "offset"):  # M2M100: token i sits at pad id + 1 + i; a buffer, not a parameter
        return embed.weights[embed.padding_idx + 1: embed.padding_idx + 1 + embed.num_positions]
    return embed.weight


def _patch(hf_model, positions: np.ndarray, epsilon: float):
    """Our positions [L, D] into both stacks and ``epsilon`` into every LayerNorm."""
    table = torch.from_numpy(np.asarray(positions, np.float32))
    with torch.no_grad():
        for stack in (hf_model.model.encoder, hf_model.model.decoder):
            _position_rows(stack).copy_(table)
    for module in hf_model.modules():
        if isinstance(module, torch.nn.LayerNorm):
            module.eps = float(epsilon)
    return hf_model.eval()


def _copy_dense(linear: torch.nn.Linear, dense) -> None:
    """Keras Dense (kernel [in, out], bias [out]) -> nn.Linear (weight [out, in], bias [out])."""
    linear.weight.copy_(torch.from_numpy(np.asarray(dense.kernel.numpy(), np.float32).T))
    linear.bias.copy_(torch.from_numpy(np.asarray(dense.bias.numpy(), np.float32)))


def _copy_attention(attention: torch.nn.Module, ours) -> None:
    for name, dense in (("q_proj", ours.query_dense), ("k_proj", ours.key_dense), ("v_proj", ours.value_dense),
                        ("out_proj", ours.output_dense)):
        _copy_dense(getattr(attention, name), dense)


def _copy_norm(norm: torch.nn.LayerNorm, layer_norm) -> None:
    norm.weight.copy_(torch.from_numpy(layer_norm.gamma.numpy()))
    norm.bias.copy_(torch.from_numpy(layer_norm.beta.numpy()))


def _positions(model) -> np.ndarray:
    """Our position table [max_length, D]: the §3.5 sinusoids, or the learned one (Table 3 row E)."""
    if model.config.positional == "learned":
        return model.positional.embeddings.numpy()
    from keras_transformer.layers.positional import sinusoid_table

    return sinusoid_table(model.config.max_length, model.config.d_model)


def from_keras(model) -> MarianMTModel | M2M100ForConditionalGeneration:
    """The HF model (eval mode, float32) holding the weights of our Keras ``Transformer``: MarianMTModel for
    post-LN, M2M100ForConditionalGeneration for pre-LN (the same attribute names, each LayerNorm where ours is)."""
    c = model.config
    config = hf_config(c)
    hf = MarianMTModel(config) if isinstance(config, MarianConfig) else M2M100ForConditionalGeneration(config)
    with torch.no_grad():
        hf.model.shared.weight.copy_(torch.from_numpy(model.embedding.embeddings.numpy()))  # E [V, D]
        if isinstance(hf, MarianMTModel):
            hf.final_logits_bias.zero_()
        for hf_stack, ours in ((hf.model.encoder, model.encoder), (hf.model.decoder, model.decoder)):
            for hf_layer, block in zip(hf_stack.layers, ours.blocks):
                _copy_attention(hf_layer.self_attn, block.self_attention)
                _copy_norm(hf_layer.self_attn_layer_norm, block.self_attention_residual.layer_norm)
                if hasattr(block, "cross_attention"):
                    _copy_attention(hf_layer.encoder_attn, block.cross_attention)
                    _copy_norm(hf_layer.encoder_attn_layer_norm, block.cross_attention_residual.layer_norm)
                _copy_dense(hf_layer.fc1, block.ffn.inner)
                _copy_dense(hf_layer.fc2, block.ffn.outer)
                _copy_norm(hf_layer.final_layer_norm, block.ffn_residual.layer_norm)
            if ours.final_norm is not None:  # pre-LN: the stack's closing LayerNorm
                _copy_norm(hf_stack.layer_norm, ours.final_norm)
    hf.tie_weights()
    if hf.lm_head.weight.data_ptr() != hf.model.shared.weight.data_ptr():
        raise RuntimeError("lm_head is not tied to the shared embedding")
    return _patch(hf, _positions(model), c.layer_norm_epsilon)


def save(hf_model, directory) -> str:
    """``save_pretrained`` plus EXTRA_FILE (our position table and LayerNorm epsilon)."""
    hf_model.save_pretrained(directory)
    epsilon = next(m.eps for m in hf_model.modules() if isinstance(m, torch.nn.LayerNorm))
    np.savez(os.path.join(directory, EXTRA_FILE), positions=_position_rows(hf_model.model.encoder).numpy(),
             epsilon=np.float64(epsilon))
    return str(directory)


class _GNMTLengthPenalty:
    """``generate``'s beam search with our length penalty lp(Y) = ((5 + |Y|) / 6)^α instead of |Y|^α.

    transformers 5's beam search divides by (cur_len + 1 - decoder_prompt_len)^α when it scores finished
    hypotheses and by (max_length - decoder_prompt_len)^α in the "never" stopping bound, and uses cur_len and
    max_length nowhere else in these two methods; they are handed the lengths that make the quotient GNMT's.
    """

    def _update_finished_beams(self, *args, cur_len, decoder_prompt_len, **kwargs):
        generated = cur_len + 1 - decoder_prompt_len  # |Y|, EOS included
        return super()._update_finished_beams(*args, cur_len=(5 + generated) / 6 - 1 + decoder_prompt_len,
                                              decoder_prompt_len=decoder_prompt_len, **kwargs)

    @staticmethod
    def _check_early_stop_heuristic(*args, max_length, decoder_prompt_len, **kwargs):
        longest = max_length - decoder_prompt_len
        return GenerationMixin._check_early_stop_heuristic(
            *args, max_length=(5 + longest) / 6 + decoder_prompt_len, decoder_prompt_len=decoder_prompt_len,
            **kwargs)


class GNMTMarianMTModel(_GNMTLengthPenalty, MarianMTModel):
    pass


class GNMTM2M100ForConditionalGeneration(_GNMTLengthPenalty, M2M100ForConditionalGeneration):
    pass


CLASSES = {  # model_type in config.json -> (stock, with our length penalty)
    "marian": (MarianMTModel, GNMTMarianMTModel),
    "m2m_100": (M2M100ForConditionalGeneration, GNMTM2M100ForConditionalGeneration),
}


def load(directory, gnmt_length_penalty: bool = False):
    """The model ``save`` wrote, eval mode; with ``gnmt_length_penalty`` its beam search scores as ours."""
    cls = CLASSES[AutoConfig.from_pretrained(directory).model_type][int(gnmt_length_penalty)]
    hf = cls.from_pretrained(directory)
    extra = np.load(os.path.join(directory, EXTRA_FILE))
    return _patch(hf, extra["positions"], float(extra["epsilon"]))


def generate_kwargs(max_new_tokens: int, beam_size: int = 4, alpha: float = 0.6) -> dict:
    """``generate`` arguments closest to our §6.1 beam search (differences: the module docstring)."""
    return dict(generation_config=GenerationConfig(
        num_beams=beam_size, length_penalty=alpha, early_stopping="never", max_new_tokens=int(max_new_tokens),
        do_sample=False, num_return_sequences=1, suppress_tokens=[PAD_ID, BOS_ID], forced_eos_token_id=None,
        decoder_start_token_id=BOS_ID, bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID,
        use_cache=True))

