"""What the input pipeline makes of a recipe's corpus (``kt-data-report``): one pass over a split's batches.

    report(recipe, workdir, data_dir=None, split=None, replicas=1) -> dict of figures
    format_report(figures) -> the lines kt-data-report prints

Pairs read, kept and length-filtered, vocabulary, tokens per batch and per update, distinct batch shapes
against the number of buckets (§5.1's batching), and padding efficiency per side.
"""

from __future__ import annotations

import time

from keras_transformer.data import batching, corpora, tokenizer


def report(recipe, workdir, data_dir=None, split=None, replicas: int = 1,
           corpus: corpora.Corpus = corpora.TEXT) -> dict:
    """The figures of one pass over ``split``'s batches (default: the train split, batched as training does
    on ``replicas`` devices: micro-batches of ``batching.plan_batches``), read by ``corpus`` (its task's reader).

    Training drops each bucket's final partial batch (with repeat, those pairs
    carry over to the next epoch): ``pairs_carried_over`` counts them.
    """
    cfg = recipe.data
    plan = batching.plan_batches(cfg, replicas, recipe.train.gradient_accumulation_steps)
    split = split or cfg.train_split
    data_dir = corpora.corpus_data_dir(cfg, data_dir)
    tok = tokenizer.get_or_train(recipe, workdir, data_dir, corpus)
    pairs, stats = corpus.load_split(cfg, split, data_dir, workdir)  # the corpus check is cached there
    counts = batching.count_length_filter(pairs, tok, cfg)
    start = time.time()
    training = split == cfg.train_split  # other splits are batched as evaluation batches them
    batches = batching.make_batches(pairs, tok, cfg, training=training, plan=plan, repeat=False, deterministic=True)
    measured = batching.measure_batches(batches, replicas)
    seconds = time.time() - start
    return dict(
        recipe=recipe.name,
        corpus=cfg.corpus,
        split=split,
        source=stats.source_file,
        target=stats.target_file,
        pairs_read=stats.pairs_read,
        empty_skipped=stats.empty_skipped,
        pairs_kept=counts.kept,
        pairs_filtered=counts.filtered,
        max_length=cfg.max_length,
        pairs_in_batches=measured.pairs,
        pairs_carried_over=counts.kept - measured.pairs,  # in partial buckets; training's repeat uses them
        vocab_size=tok.target.vocab_size,  # each side's, or the shared one's
        shared_vocabulary=recipe.model.shared_vocabulary,
        num_batches=measured.num_batches,
        tokens_per_batch=cfg.tokens_per_batch,
        replicas=plan.replicas,
        gradient_accumulation_steps=plan.accumulation,
        replica_tokens=plan.replica_tokens,
        tokens_per_update=plan.tokens_per_update,
        max_batch_tokens=measured.max_batch_tokens,
        source_tokens_per_batch=list(measured.source_tokens),
        target_tokens_per_batch=list(measured.target_tokens),
        distinct_shapes=len(measured.shapes),
        num_buckets=len(batching.bucket_shapes(cfg, plan)),
        padding_efficiency_source=round(measured.padding_efficiency_source, 4),
        padding_efficiency_target=round(measured.padding_efficiency_target, 4),
        pipeline_pairs_per_second=round(counts.kept / seconds, 1),
    )


def format_report(r: dict) -> str:
    """``report``'s figures as the lines ``kt-data-report`` prints."""
    lo_s, med_s, hi_s = r["source_tokens_per_batch"]
    lo_t, med_t, hi_t = r["target_tokens_per_batch"]
    read = "n/a (TFDS)" if r["pairs_read"] is None else f"{r['pairs_read']} ({r['empty_skipped']} empty skipped)"
    return "\n".join([
        f"recipe {r['recipe']}: corpus {r['corpus']}, split {r['split']}",
        f"  files              {r['source']}, {r['target']}",
        f"  pairs read         {read}",
        f"  pairs kept         {r['pairs_kept']} ({r['pairs_filtered']} longer than max_length={r['max_length']} "
        "filtered)",
        f"  in full batches    {r['pairs_in_batches']} ({r['pairs_carried_over']} left in partial buckets)",
        f"  vocabulary         {r['vocab_size']} shared BPE tokens",
        f"  tokens per update  {r['tokens_per_update']} padded per side = {r['replicas']} replica(s) x "
        f"{r['gradient_accumulation_steps']} micro-batch(es) x {r['replica_tokens']} (tokens_per_batch "
        f"{r['tokens_per_batch']})",
        f"  micro-batches      {r['num_batches']}",
        f"  tokens per batch   source {lo_s}/{med_s}/{hi_s}, target {lo_t}/{med_t}/{hi_t} (min/median/max, real, "
        "all replicas)",
        f"  largest batch      {r['max_batch_tokens']} padded tokens per side and replica (budget "
        f"{r['replica_tokens']})",
        f"  batch shapes       {r['distinct_shapes']} distinct of {r['num_buckets']} buckets",
        f"  padding efficiency source {r['padding_efficiency_source']:.3f}, "
        f"target {r['padding_efficiency_target']:.3f}",
        f"  input pipeline     {r['pipeline_pairs_per_second']:.0f} pairs/s",
    ])
