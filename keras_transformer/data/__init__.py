"""Data: corpora -> BPE tokenizer (shared, or one per language) -> token-budget batches (§5.1).

``build_datasets`` is what the trainer calls; the three modules can be used
on their own (see their docstrings).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from keras_transformer.data import batching, corpora, tokenizer
from keras_transformer.data.tokenizer import Tokenizer, TokenizerPair


LENGTH_COUNT_MAX_PAIRS = 200_000  # above this, build_datasets does not count the max_length filter


def build_datasets(
    recipe, workdir, data_dir=None, plan: Optional[batching.BatchPlan] = None, *, deterministic: bool = False,
    corpus: corpora.Corpus = corpora.TEXT,
) -> Tuple[tf.data.Dataset, tf.data.Dataset, Tokenizer]:
    """(train_ds, eval_ds, tokenizer) for a recipe, its corpus read by ``corpus`` (the reader of its task).

    train_ds repeats forever, shuffled with ``recipe.data.seed``; eval_ds is one
    finite pass over ``recipe.data.eval_split``. Both yield
    ((source_ids [B, S], target_in_ids [B, T]), target_out_ids [B, T]) with B one
    micro-batch over all replicas (``plan``, default one replica and no accumulation;
    see ``batching.plan_batches``).
    """
    cfg = recipe.data
    data_dir = corpora.resolve_data_dir(data_dir)
    tok = tokenizer.get_or_train(recipe, Path(workdir), data_dir, corpus)
    train_pairs, train_stats = corpus.load_split(cfg, cfg.train_split, data_dir, workdir)
    eval_pairs, eval_stats = corpus.load_split(cfg, cfg.eval_split, data_dir, workdir)
    for split, stats in ((cfg.train_split, train_stats), (cfg.eval_split, eval_stats)):
        logging.info("%s: %s pairs read, %s empty skipped (%s)", split, stats.pairs_read, stats.empty_skipped,
                     stats.source_file)
    # Counting tokenizes the whole corpus (~10k pairs/s on 2 cores): done for small corpora only;
    # kt-data-report gives the figure for any corpus.
    if train_stats.pairs is not None and train_stats.pairs <= LENGTH_COUNT_MAX_PAIRS:
        counts = batching.count_length_filter(train_pairs, tok, cfg)
        logging.info("%s: %d pairs kept, %d longer than max_length=%d filtered",
                     cfg.train_split, counts.kept, counts.filtered, cfg.max_length)
    train_ds = batching.make_batches(train_pairs, tok, cfg, training=True, plan=plan,
                                     deterministic=deterministic)
    eval_ds = batching.make_batches(eval_pairs, tok, cfg, training=False, plan=plan,
                                    deterministic=True)
    return train_ds, eval_ds, tok


def source_piece_counts(recipe, workdir, tok: Tokenizer, data_dir=None,
                        corpus: corpora.Corpus = corpora.TEXT) -> np.ndarray:
    """[V]: each source piece's count in the recipe's training split (``ModelConfig.source_token_dropout_alpha``)."""
    cfg = recipe.data
    pairs, _ = corpus.load_split(cfg, cfg.train_split, corpora.resolve_data_dir(data_dir), workdir)
    return batching.count_source_pieces(pairs, tok, recipe.model.vocab_size)


__all__ = ["build_datasets", "source_piece_counts", "batching", "corpora", "tokenizer", "Tokenizer", "TokenizerPair"]
