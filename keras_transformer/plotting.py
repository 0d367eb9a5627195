"""Figures as PNG files: attention heatmaps (the paper's appendix, Figures 3-5) and the Eq. 3 learning rate.

    attention_data(model, tokenizer, source, reference=None, ...) -> AttentionData   (numbers only)
    plot_attention(data, output_dir)   -> paths of {encoder,decoder,cross}_layer{l}.png, one per (kind, layer)
    learning_rate_curve(recipe)        -> LearningRateCurve                          (numbers only)
    plot_learning_rate(recipe, output_dir) -> [path of learning_rate_<recipe>.png]

Each attention PNG holds one layer's heads as a grid of heatmaps: rows are
queries, columns are keys, a cell is the softmax weight; the colour scale runs
from 0 to the largest weight in the figure, shared by its heads. The source is
the sentence's subwords plus EOS, as in training; the target side is the
decoder input: BOS followed by the model's own beam translation (or a given
reference), so row t is the query that predicts target token t + 1. Axis labels
are SentencePiece pieces ("▁" starts a word).

Drawing uses ``matplotlib.figure.Figure`` directly (the Agg canvas, no pyplot
state), so it runs headless and in threads.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf
from matplotlib.figure import Figure

from keras_transformer import BOS_ID, EOS_ID, PAD_ID
from keras_transformer.data.tokenizer import append_eos
from keras_transformer.decoding import translate_ids
from keras_transformer.schedules import NoamSchedule

KINDS = ("encoder", "decoder", "cross")
TITLES = {
    "encoder": "Encoder self-attention",
    "decoder": "Decoder self-attention (masked)",
    "cross": "Encoder-decoder attention",
}
DPI = 100
_CELL_INCHES = 0.2  # per token on an axis
_MAX_HEAD_COLUMNS = 4


@dataclasses.dataclass(frozen=True)
class AttentionData:
    """One sentence pair's attention weights and axis labels (batch dimension dropped)."""

    source_ids: np.ndarray  # [S] subword ids, EOS last
    target_in_ids: np.ndarray  # [T] BOS, then the target's subwords (no EOS)
    source_pieces: List[str]  # [S] labels of the S axis
    target_pieces: List[str]  # [T] labels of the T axis
    weights: Dict[str, List[np.ndarray]]  # encoder: L x [H, S, S]; decoder: L x [H, T, T]; cross: L x [H, T, S]
    source_text: str
    target_text: str  # the translation (or the reference) as text

    def axes(self, kind: str):
        """(row labels, column labels) of a kind's heatmaps: (queries, keys)."""
        return {"encoder": (self.source_pieces, self.source_pieces),
                "decoder": (self.target_pieces, self.target_pieces),
                "cross": (self.target_pieces, self.source_pieces)}[kind]


def _pieces(tokenizer, ids) -> List[str]:
    return [p.decode("utf-8", errors="replace") for p in tokenizer.id_to_piece(ids).numpy().tolist()]


def best_translation_ids(model, source_ids, beam_size=4, alpha=0.6, extra_length=50) -> np.ndarray:
    """source_ids [1, S] -> [N] ids of the best beam hypothesis, without EOS and PAD."""
    sequences, _ = translate_ids(model, source_ids, beam_size, alpha, extra_length)  # [1, K, T]
    best = sequences[0, 0].numpy()  # [T]
    end = np.flatnonzero((best == EOS_ID) | (best == PAD_ID))
    return best[: end[0] if end.size else best.size].astype(np.int32)


def attention_data(model, tokenizer, source: str, reference: Optional[str] = None, beam_size=4, alpha=0.6,
                   extra_length=50) -> AttentionData:
    """Attention weights of ``model`` for ``source`` and its beam translation (or ``reference``)."""
    source_ids = append_eos(tokenizer.source.tokenize([source]))[0].numpy().astype(np.int32)  # [S]
    if source_ids.size > model.config.max_length:
        raise ValueError(f"sentence: {source_ids.size} subword tokens exceed max_length={model.config.max_length}")
    if reference is None:
        target = best_translation_ids(model, source_ids[None, :], beam_size, alpha, extra_length)
        target_text = tokenizer.target.detokenize(target[None, :]).numpy()[0].decode("utf-8")
    else:
        target, target_text = tokenizer.target.tokenize([reference])[0].numpy(), reference
    target_in_ids = np.concatenate([[BOS_ID], target])[: model.config.max_length].astype(np.int32)  # [T]
    maps = model.attention_maps(tf.constant(source_ids[None, :]), tf.constant(target_in_ids[None, :]))
    weights = {kind: [np.asarray(layer)[0] for layer in maps[kind]] for kind in KINDS}  # L x [H, Q, K]
    return AttentionData(source_ids, target_in_ids, _pieces(tokenizer.source, source_ids),
                         _pieces(tokenizer.target, target_in_ids), weights, source, target_text)


def _shorten(text: str, limit: int = 70) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def heads_figure(weights: np.ndarray, row_labels: List[str], col_labels: List[str], title: str) -> Figure:
    """weights [H, Q, K] -> a Figure with one heatmap per head (query rows, key columns), a shared colour bar.

    Token labels go on the left column (queries) and the bottom panels (keys); the
    layout is computed in inches from the token counts, so the cells stay square.
    """
    num_heads, q, k = weights.shape
    ncols = min(_MAX_HEAD_COLUMNS, num_heads)
    nrows = math.ceil(num_heads / ncols)
    fontsize = 8 if max(q, k) <= 40 else 6
    label = 0.075 * fontsize / 8 * max(len(s) for s in row_labels + col_labels) + 0.25  # inches for tick labels
    panel_w, panel_h, gap = max(1.2, k * _CELL_INCHES), max(1.2, q * _CELL_INCHES), 0.3
    left, bottom, top, right = label, label, 0.75, 1.0  # margins: labels, labels, title, colour bar
    width = left + ncols * panel_w + (ncols - 1) * gap + right
    height = bottom + nrows * panel_h + (nrows - 1) * gap + top
    fig = Figure(figsize=(width, height), dpi=DPI)
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height,
                        wspace=gap / panel_w, hspace=gap / panel_h)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    vmax = max(float(weights.max()), 1e-6)  # one scale for all heads of the figure
    image = None
    for head, ax in enumerate(axes.flat):
        if head >= num_heads:
            ax.set_axis_off()
            continue
        image = ax.imshow(weights[head], cmap="viridis", vmin=0.0, vmax=vmax, interpolation="nearest")
        ax.set_title(f"head {head + 1}", fontsize=9, pad=3)
        ax.tick_params(length=0)
        if head % ncols == 0:
            ax.set_yticks(range(q), row_labels, fontsize=fontsize)
        else:
            ax.set_yticks([])
        if head + ncols >= num_heads:  # no panel below this one
            ax.set_xticks(range(k), col_labels, fontsize=fontsize, rotation=90)
        else:
            ax.set_xticks([])
    bar_h = min(panel_h, 3.0)  # beside the top row
    bar = fig.add_axes((1 - (right - 0.25) / width, 1 - (top + bar_h) / height, 0.15 / width, bar_h / height))
    fig.colorbar(image, cax=bar).set_label("attention weight", fontsize=8)
    fig.suptitle(title, fontsize=10, y=1 - 0.1 / height, va="top")
    return fig


def plot_attention(data: AttentionData, output_dir: str) -> List[str]:
    """Writes ``<kind>_layer<l>.png`` (1-based l) per kind and layer; returns the paths, kinds × layers in order."""
    os.makedirs(output_dir, exist_ok=True)
    pair = f"{_shorten(data.source_text)!r} → {_shorten(data.target_text)!r}"
    paths = []
    for kind in KINDS:
        rows, cols = data.axes(kind)
        num_layers = len(data.weights[kind])
        for layer, weights in enumerate(data.weights[kind]):
            title = f"{TITLES[kind]}, layer {layer + 1} of {num_layers}\n{pair}"
            path = os.path.join(output_dir, f"{kind}_layer{layer + 1}.png")
            heads_figure(weights, rows, cols, title).savefig(path, dpi=DPI)
            paths.append(path)
    return paths


# -- the learning-rate schedule (§5.3, Eq. 3) ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class LearningRateCurve:
    step_nums: np.ndarray  # [N] 1-based update numbers (Eq. 3's step_num), increasing, peak included
    learning_rates: np.ndarray  # [N] lrate(step_num)
    peak_step: int  # step_num of the largest rate: warmup_steps (or train_steps if training ends first)
    peak_learning_rate: float


def learning_rate_curve(recipe, num_points: int = 1000) -> LearningRateCurve:
    """Eq. 3 for ``recipe`` at up to ``num_points`` step_nums in [1, train_steps], from ``NoamSchedule`` itself."""
    t = recipe.train
    schedule = NoamSchedule(recipe.model.d_model, t.warmup_steps, t.learning_rate_scale)
    peak = min(t.warmup_steps, t.train_steps)  # d^-0.5 min(s^-0.5, s w^-1.5) rises until s = w, then falls
    steps = np.unique(np.concatenate([np.linspace(1, t.train_steps, num_points).round(), [peak]]).astype(np.int64))
    rates = np.asarray(schedule(tf.constant(steps - 1)), dtype=np.float64)  # the schedule takes 0-based iterations
    return LearningRateCurve(steps, rates, int(peak), float(rates[np.searchsorted(steps, peak)]))


def plot_learning_rate(recipe, output_dir: str, num_points: int = 1000) -> List[str]:
    """Writes ``learning_rate_<recipe>.png``: Eq. 3 over the recipe's train_steps, the warmup peak marked."""
    curve = learning_rate_curve(recipe, num_points)
    t = recipe.train
    fig = Figure(figsize=(7, 4), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    ax.plot(curve.step_nums, curve.learning_rates, color="tab:blue", label="lrate (Eq. 3)")
    ax.axvline(curve.peak_step, color="grey", linestyle="--", linewidth=1, label=f"warmup_steps = {t.warmup_steps}")
    ax.plot([curve.peak_step], [curve.peak_learning_rate], "o", color="tab:red",
            label=f"peak {curve.peak_learning_rate:.3g} at step {curve.peak_step}")
    ax.set_xlabel("step_num (parameter updates)")
    ax.set_ylabel("learning rate")
    ax.set_xlim(0, t.train_steps)
    ax.set_ylim(0, curve.peak_learning_rate * 1.1)
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    ax.grid(alpha=0.3)
    ax.legend()
    scale = "" if t.learning_rate_scale == 1.0 else f"{t.learning_rate_scale:g} · "
    ax.set_title(f"{recipe.name}: lrate = {scale}{recipe.model.d_model}^-0.5 · "
                 f"min(step^-0.5, step · {t.warmup_steps}^-1.5)", fontsize=10)
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, f"learning_rate_{recipe.name}.png")
    fig.savefig(path, dpi=DPI)
    return [path]
