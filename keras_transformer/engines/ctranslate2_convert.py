"""Our Keras ``Transformer`` as a CTranslate2 model (``ctranslate2.specs.TransformerSpec``), built from its weights.

    convert(model, tokenizer, recipe, output_dir, quantization="float32", info=None) -> output_dir
    set_length_penalty(output_dir, length_penalty, eval_scores=None)  CTranslate2's α for its own search, in INFO
    build_spec(model, tokenizer, recipe) -> ctranslate2.specs.TransformerSpec (float32, not yet saved)

The mapping, layer by layer (Keras kernels are [in, out]; CTranslate2's linear weights are [out, in]):

    shared embedding E [V, D] (§3.4)   -> encoder/embeddings, decoder/embeddings and decoder/projection
                                          (no bias), with scale_embeddings: E[ids] * sqrt(D); with separate
                                          vocabularies the source's E -> encoder/embeddings, the target's
                                          -> decoder/embeddings and decoder/projection
    positions (§3.5 sinusoids, or Table 3 row E learned) -> position_encodings/encodings, set from our own
                                          table [max_length, D] (sin/cos interleaved), so CTranslate2's
                                          layout (sin block, cos block, from position 1) never applies
    self-attention W^Q, W^K, W^V (Eq. 1) -> self_attention/linear_0 (fused [3 H d_k, D]), W^O -> linear_1
    encoder-decoder attention          -> attention/linear_0 (W^Q), linear_1 (fused W^K, W^V), linear_2 (W^O)
    FFN W_1, W_2 (Eq. 2)               -> ffn/linear_0, ffn/linear_1 (ReLU)
    LayerNorm of each residual (§3.1)  -> the layer_norm of the sub-layer it follows (post-norm, pre_norm=False);
                                          under norm="pre" the stacks' final LayerNorm -> encoder|decoder/layer_norm

Two settings CTranslate2 would otherwise choose differently:

- ``layer_norm_epsilon``: CTranslate2 uses 1e-5 for a LayerNorm with a bias unless the config names one;
  we write ``recipe.model.layer_norm_epsilon`` (1e-6) into config.json.
- the decoder start token: CTranslate2 starts the target with ``decoder_start_token``; ours is BOS (id 2,
  piece ``<s>``), and ``unk``/``bos``/``eos_token`` are the pieces of UNK/BOS/EOS.

The vocabularies are the SentencePiece pieces in id order (each side's own model's, or the shared
one's), except that the source vocabulary spells EOS ``engines.SOURCE_EOS`` (same id 3): CTranslate2
returns an empty translation without decoding for a source made only of its BOS/EOS tokens, whereas ours
translates an empty input from the source [EOS]. So a source is its pieces followed by ``<source_eos>``,
given explicitly (``add_source_eos`` is off).

Queries are scaled by 1/sqrt(d_k) in both (Eq. 1).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

import numpy as np

from keras_transformer import BOS_ID, EOS_ID, UNK_ID
from keras_transformer.config import Recipe
from keras_transformer.engines import INFO, QUANTIZATIONS, SOURCE_EOS, import_ctranslate2, sentencepiece_file
from keras_transformer.layers.positional import sinusoid_table

# Our score and CTranslate2's own, as recorded in INFO (see ctranslate2_translate for what kt-translate does).
LENGTH_PENALTIES = {
    "keras_transformer": "score = log P(Y|X) / ((5 + |Y|) / 6)^alpha, |Y| counting EOS (GNMT; beam_search.py)",
    "ctranslate2": "score = log P(Y|X) / |Y|^length_penalty, |Y| counting EOS only when it is returned",
}


def _np(variable) -> np.ndarray:
    return np.asarray(variable.numpy() if hasattr(variable, "numpy") else variable, dtype=np.float32)


def _linear(spec, dense) -> None:
    """A Keras Dense (kernel [in, out], bias [out]) -> a CTranslate2 LinearSpec (weight [out, in], bias)."""
    spec.weight = np.ascontiguousarray(_np(dense.kernel).T)
    spec.bias = _np(dense.bias)


def _fused(spec, denses) -> None:
    """Several Dense layers over the same input -> one LinearSpec with their outputs concatenated."""
    spec.weight = np.ascontiguousarray(np.concatenate([_np(d.kernel).T for d in denses], axis=0))
    spec.bias = np.concatenate([_np(d.bias) for d in denses], axis=0)


def _layer_norm(spec, layer_norm) -> None:
    spec.gamma = _np(layer_norm.gamma)
    spec.beta = _np(layer_norm.beta)


def _self_attention(spec, attention, residual) -> None:
    _fused(spec.linear[0], [attention.query_dense, attention.key_dense, attention.value_dense])  # [3 H d_k, D]
    _linear(spec.linear[1], attention.output_dense)  # W^O [D, H d_v]
    _layer_norm(spec.layer_norm, residual.layer_norm)


def _cross_attention(spec, attention, residual) -> None:
    _linear(spec.linear[0], attention.query_dense)  # W^Q [H d_k, D]
    _fused(spec.linear[1], [attention.key_dense, attention.value_dense])  # [2 H d_k, D]
    _linear(spec.linear[2], attention.output_dense)
    _layer_norm(spec.layer_norm, residual.layer_norm)


def _ffn(spec, ffn, residual) -> None:
    _linear(spec.linear_0, ffn.inner)  # W_1 [d_ff, D]
    _linear(spec.linear_1, ffn.outer)  # W_2 [D, d_ff]
    _layer_norm(spec.layer_norm, residual.layer_norm)


def _positions(model) -> np.ndarray:
    """[max_length, D] float32: the table our model adds (sinusoids of §3.5, or the learned row E weights)."""
    c = model.config
    if c.positional == "learned":
        return _np(model.positional.embeddings)
    return sinusoid_table(c.max_length, c.d_model)


def _check_supported(recipe: Recipe, tokenizer, model) -> None:
    c = recipe.model
    if not model.has_decoder:
        raise ValueError("chart_labels: a chart parser has no decoder for CTranslate2 to run; export it as a "
                         "SavedModel")
    if model.reads_context:
        raise ValueError("align_words: CTranslate2's decoder has no input for the next word's encoder output; "
                         "export this parser as a SavedModel")
    if c.key_dim != c.value_dim:
        raise ValueError(f"d_v: CTranslate2 needs d_k == d_v, got d_k={c.key_dim}, d_v={c.value_dim}")
    for role, model_tokenizer in tokenizer.models.items():
        if model_tokenizer.vocab_size != c.vocab_size:
            raise ValueError(f"vocab_size: the {role} tokenizer has {model_tokenizer.vocab_size} pieces, the recipe "
                             f"{c.vocab_size}")
    for embedding in {id(e): e for e in (model.source_embedding, model.embedding)}.values():
        rows = tuple(embedding.embeddings.shape)
        if rows != (c.vocab_size, c.d_model):
            raise ValueError(f"vocab_size: the model's {embedding.name} is {rows}, the recipe says "
                             f"{(c.vocab_size, c.d_model)}")


def build_spec(model, tokenizer, recipe: Recipe):
    """The float32 ``TransformerSpec`` of ``model`` (a built ``keras_transformer.model.Transformer``)."""
    import_ctranslate2()  # one clear line where the package is missing
    import sentencepiece as spm
    from ctranslate2.specs import common_spec, transformer_spec

    _check_supported(recipe, tokenizer, model)
    c = recipe.model
    pre_norm = c.norm == "pre"
    head_dim = None if c.key_dim * c.num_heads == c.d_model else c.key_dim  # Table 3 row B sizes
    encoder = transformer_spec.TransformerEncoderSpec(
        c.num_encoder_layers, c.num_heads, pre_norm=pre_norm, activation=common_spec.Activation.RELU,
        head_dim=head_dim)
    decoder = transformer_spec.TransformerDecoderSpec(
        c.num_decoder_layers, c.num_heads, pre_norm=pre_norm, activation=common_spec.Activation.RELU,
        head_dim=head_dim)
    spec = transformer_spec.TransformerSpec(encoder, decoder)

    embeddings = _np(model.embedding.embeddings)  # E [V, D], the target's (and the source's when shared)
    positions = _positions(model)  # [max_length, D]
    for stack in (spec.encoder, spec.decoder):
        stack.scale_embeddings = True  # E[ids] * sqrt(D) (§3.4)
        stack.position_encodings.encodings = positions
    spec.encoder.embeddings[0].weight = embeddings if c.shared_vocabulary else _np(model.source_embedding.embeddings)
    spec.decoder.embeddings.weight = embeddings
    spec.decoder.projection.weight = embeddings  # pre-softmax x E^T, no bias (§3.4); saved once (aliased)

    for layer_spec, layer in zip(spec.encoder.layer, model.encoder.blocks):
        _self_attention(layer_spec.self_attention, layer.self_attention, layer.self_attention_residual)
        _ffn(layer_spec.ffn, layer.ffn, layer.ffn_residual)
    for layer_spec, layer in zip(spec.decoder.layer, model.decoder.blocks):
        _self_attention(layer_spec.self_attention, layer.self_attention, layer.self_attention_residual)
        _cross_attention(layer_spec.attention, layer.cross_attention, layer.cross_attention_residual)
        _ffn(layer_spec.ffn, layer.ffn, layer.ffn_residual)
    if pre_norm:
        _layer_norm(spec.encoder.layer_norm, model.encoder.final_norm)
        _layer_norm(spec.decoder.layer_norm, model.decoder.final_norm)

    def pieces_of(model_tokenizer):  # id order = our token ids
        sp = spm.SentencePieceProcessor(model_proto=model_tokenizer.model_proto)
        return [sp.id_to_piece(i) for i in range(sp.get_piece_size())]

    source, pieces = pieces_of(tokenizer.source), pieces_of(tokenizer.target)
    if SOURCE_EOS in source:
        raise ValueError(f"{tokenizer.source.model_path}: has a piece {SOURCE_EOS!r}, the name the source "
                         "vocabulary gives EOS")
    spec.register_source_vocabulary(source[:EOS_ID] + [SOURCE_EOS] + source[EOS_ID + 1:])
    spec.register_target_vocabulary(pieces)
    config = spec.config
    config.layer_norm_epsilon = float(c.layer_norm_epsilon)  # CTranslate2's default would be 1e-5
    config.unk_token, config.bos_token, config.eos_token = pieces[UNK_ID], pieces[BOS_ID], pieces[EOS_ID]
    config.decoder_start_token = pieces[BOS_ID]  # the decoder reads BOS at position 0, as ours does
    config.add_source_bos = False
    config.add_source_eos = False  # the translator appends SOURCE_EOS itself
    return spec


def describe(recipe: Recipe, quantization: str, info: Optional[dict] = None) -> dict:
    """The contents of INFO: ``tokenizer`` names the shared SentencePiece file, or ``source_tokenizer`` and
    ``target_tokenizer`` the two of separate vocabularies."""
    from keras_transformer.serving.checks import max_source_length

    ctranslate2 = import_ctranslate2()
    d = recipe.decode
    return dict(
        info or {},
        format="ctranslate2",
        ctranslate2_version=ctranslate2.__version__,
        quantization=quantization,
        recipe=recipe.to_dict(),
        max_source_length=max_source_length(recipe),
        decode=dict(beam_size=d.beam_size, alpha=d.alpha, extra_length=d.extra_length),
        **({"tokenizer": sentencepiece_file("shared")} if recipe.model.shared_vocabulary else
           {f"{side}_tokenizer": sentencepiece_file(side) for side in ("source", "target")}),
        source=f"the SentencePiece pieces of the text, then {SOURCE_EOS!r} (EOS, id 3, as the source vocabulary "
               "spells it; CTranslate2 does not append it)",
        truncation="sources longer than max_source_length tokens (EOS included) keep their first "
                   "max_source_length - 1 subwords, then EOS",
        max_output_length="per sentence: its source tokens (EOS included) + extra_length, at most "
                          "recipe.model.max_length",
        length_penalty=LENGTH_PENALTIES,
    )


def convert(model, tokenizer, recipe: Recipe, output_dir, quantization: str = "float32",
            info: Optional[dict] = None) -> str:
    """Write ``model`` as a CTranslate2 directory (see keras_transformer.engines) at ``output_dir``; returns it.

    ``quantization``: one of ``engines.QUANTIZATIONS`` (float32, int8, int8_float32, int16, float16, ...).
    ``info`` (e.g. {"checkpoint": path}) is added to INFO. An existing ``output_dir`` is refused; the
    directory appears complete or not at all (written beside it, then renamed).
    """
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization: expected one of {', '.join(QUANTIZATIONS)}, got {quantization!r}")
    output_dir = Path(output_dir)
    if output_dir.exists():
        raise FileExistsError(f"{output_dir} already exists; remove it or choose another")
    spec = build_spec(model, tokenizer, recipe)
    spec.validate()
    spec.optimize(quantization=quantization)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.", dir=output_dir.parent))
    try:
        spec.save(str(staging))
        for role, model_tokenizer in tokenizer.models.items():
            (staging / sentencepiece_file(role)).write_bytes(model_tokenizer.model_proto)
        with open(staging / INFO, "w", encoding="utf-8") as f:
            json.dump(describe(recipe, quantization, info), f, indent=2, sort_keys=True)
            f.write("\n")
        os.chmod(staging, 0o755)
        os.rename(staging, output_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return str(output_dir)


def set_length_penalty(output_dir, length_penalty: float, eval_scores: Optional[dict] = None) -> None:
    """Store the α of CTranslate2's own search (log P / |Y|^α; ``ctranslate2_translate``'s native search) in
    INFO's decode settings, with the eval-split scores it was chosen by; INFO is replaced atomically."""
    path = Path(output_dir) / INFO
    info = json.loads(path.read_text(encoding="utf-8"))
    info["decode"]["length_penalty"] = float(length_penalty)
    if eval_scores:
        info["decode"]["length_penalty_eval_scores"] = eval_scores
    staging = path.with_name(f".{INFO}.tmp")
    staging.write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(staging, path)
