"""Batching: shifted targets, the length filter, the bucket grid, the budget rule, determinism."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import recipes
from keras_transformer import BOS_ID, EOS_ID, PAD_ID
from keras_transformer.config import DataConfig
from keras_transformer.data import batching, build_datasets, corpora
from tests.support import run_cli

M30K = DataConfig(corpus="multi30k", max_length=80, tokens_per_batch=4096, shuffle_buffer=2000)
VAL = dataclasses.replace(M30K, tokens_per_batch=1024)  # val has 1014 pairs: smaller batches, so cells fill


def _rows(batches):
    """All (source, target_in, target_out) rows of a batch dataset, with trailing padding removed."""
    rows = []
    for (source, target_in), target_out in batches.as_numpy_iterator():
        for x, ti, to in zip(source, target_in, target_out):
            n = np.count_nonzero(to)
            assert np.all(ti[n:] == PAD_ID) and np.all(to[n:] == PAD_ID)
            rows.append((tuple(x[x != PAD_ID]), tuple(ti[:n]), tuple(to[:n])))
    return rows


def test_default_boundaries_and_bucket_grid():
    assert batching.bucket_boundaries(M30K) == (8, 10, 12, 14, 17, 20, 24, 29, 35, 42, 50, 60, 72, 80)
    assert batching.bucket_boundaries(dataclasses.replace(M30K, bucket_boundaries=(16, 32))) == (16, 32, 80)
    shapes = batching.bucket_shapes(M30K)
    assert len(shapes) == 14 * 5 - 2 * 3  # a band of |i - j| <= 2 on the 14 × 14 grid
    assert (512, 8, 8) in shapes and (292, 10, 14) in shapes and (51, 80, 80) in shapes
    assert not any((s, t) == (8, 14) for _, s, t in shapes)  # off the band
    assert all(b * max(s, t) <= 4096 for b, s, t in shapes)
    # Same tokens per update whatever the replica count: two replicas get half the budget each.
    two = batching.bucket_shapes(M30K, batching.plan_batches(M30K, num_replicas=2))
    assert two == [(2 * (2048 // max(s, t)), s, t) for _, s, t in shapes]
    assert (512, 8, 8) in two and (2 * 146, 10, 14) in two and (2 * 25, 80, 80) in two
    assert all(b * max(s, t) <= 4096 for b, s, t in two)


def test_budget_too_small_for_longest_bucket_is_refused():
    with pytest.raises(ValueError, match=r"tokens_per_batch: 79 is too small for the longest bucket \(80 tokens"):
        batching.bucket_shapes(dataclasses.replace(M30K, tokens_per_batch=79))
    assert batching.bucket_shapes(dataclasses.replace(M30K, tokens_per_batch=80))[-1] == (1, 80, 80)


def test_exact_ids_with_target_shifted_right(multi30k_tokenizer):
    tok = multi30k_tokenizer
    sources = ["A dog runs.", "Two men, 3 hats.", "A girl in a red dress jumps over a small wall."]
    targets = ["Ein Hund rennt.", "Zwei Männer, 3 Hüte.", "Ein Mädchen springt."]
    pairs = tf.data.Dataset.from_tensor_slices((sources, targets))
    batches = batching.make_batches(pairs, tok, M30K, training=False, deterministic=True)
    for (source, target_in), target_out in batches.as_numpy_iterator():
        assert source.shape[1] in (8, 10, 12, 14, 17) and target_in.shape == target_out.shape
    x_ids, y_ids = tok.tokenize(sources).to_list(), tok.tokenize(targets).to_list()
    expected = {(tuple(x + [EOS_ID]), tuple([BOS_ID] + y), tuple(y + [EOS_ID])) for x, y in zip(x_ids, y_ids)}
    assert set(_rows(batches)) == expected  # source = x + EOS, target_in = BOS + y, target_out = y + EOS


@pytest.mark.parametrize("corpus", ["wmt14", "wmt_t2t"])
def test_tfds_wmt_batches_under_mock_data(multi30k_tokenizer, corpus):
    import tensorflow_datasets as tfds

    tok, cfg = multi30k_tokenizer, dataclasses.replace(M30K, corpus=corpus, max_length=256)
    with tfds.testing.mock_data(num_examples=40, policy=tfds.testing.MockPolicy.USE_CODE):
        pairs, _ = corpora.load_split(cfg, "train")
        texts = list(pairs.as_numpy_iterator())
        rows = _rows(batching.make_batches(pairs, tok, cfg, training=False, deterministic=True))
        shapes = {(x.shape[1], to.shape[1]) for (x, _), to in
                  batching.make_batches(pairs, tok, cfg, training=False).as_numpy_iterator()}
    x_ids = tok.tokenize([x for x, _ in texts]).to_list()
    y_ids = tok.tokenize([y for _, y in texts]).to_list()
    expected = sorted((tuple(x + [EOS_ID]), tuple([BOS_ID] + y), tuple(y + [EOS_ID])) for x, y in zip(x_ids, y_ids))
    assert len(rows) == len(texts) > 30 and sorted(rows) == expected
    boundaries = set(batching.bucket_boundaries(cfg))
    assert all(s in boundaries and t in boundaries for s, t in shapes)


def test_length_filter_counts_and_drops(multi30k_tokenizer, multi30k_dir, data_dir):
    cfg = dataclasses.replace(M30K, max_length=16)
    pairs, _ = corpora.load_split(cfg, "val", data_dir)
    xs, ys = zip(*pairs.as_numpy_iterator())
    lx = multi30k_tokenizer.tokenize(list(xs)).row_lengths().numpy() + 1
    ly = multi30k_tokenizer.tokenize(list(ys)).row_lengths().numpy() + 1
    kept = int(np.sum((lx <= 16) & (ly <= 16)))
    counts = batching.count_length_filter(pairs, multi30k_tokenizer, cfg)
    assert counts == batching.LengthCounts(kept=kept, filtered=1014 - kept)
    assert 0 < counts.filtered < 1014
    rows = _rows(batching.make_batches(pairs, multi30k_tokenizer, cfg, training=False))
    assert len(rows) == kept  # evaluation keeps partial batches: every kept pair, once
    assert max(max(len(x), len(to)) for x, _, to in rows) <= 16


def test_source_piece_counts_are_the_bincount_of_the_tokenized_sources(multi30k_tokenizer, multi30k_dir, data_dir):
    pairs, _ = corpora.load_split(M30K, "val", data_dir)
    xs = [x for x, _ in pairs.as_numpy_iterator()]
    ids = np.concatenate([np.asarray(x + [EOS_ID]) for x in multi30k_tokenizer.tokenize(xs).to_list()])
    counts = batching.count_source_pieces(pairs, multi30k_tokenizer, multi30k_tokenizer.vocab_size)
    np.testing.assert_array_equal(counts, np.bincount(ids, minlength=multi30k_tokenizer.vocab_size))
    assert counts[EOS_ID] == 1014 and counts.sum() == len(ids)


def test_training_shapes_are_the_known_buckets_and_within_budget(multi30k_tokenizer, multi30k_dir, data_dir):
    pairs, _ = corpora.load_split(VAL, "val", data_dir)
    batches = batching.make_batches(pairs, multi30k_tokenizer, VAL, training=True, repeat=False)
    stats = batching.measure_batches(batches)
    assert set(stats.shapes) <= set(batching.bucket_shapes(VAL))  # partial batches dropped
    assert stats.max_batch_tokens <= 1024
    assert 0 < stats.pairs < 1014


def test_training_repeats_before_bucketing(multi30k_tokenizer, multi30k_dir, data_dir):
    pairs, _ = corpora.load_split(VAL, "val", data_dir)
    batches = batching.make_batches(pairs, multi30k_tokenizer, VAL, training=True)
    sizes = [x.shape[0] for (x, _), _ in batches.take(40).as_numpy_iterator()]
    assert sum(sizes) > 1014  # more than one epoch: the stream repeats


def test_bpe_dropout_resegments_training_pairs_only(multi30k_tokenizer, multi30k_dir, data_dir):
    tok, cfg = multi30k_tokenizer, dataclasses.replace(VAL, bpe_dropout=0.1)
    pairs, _ = corpora.load_split(VAL, "val", data_dir)
    texts = {(x.decode(), y.decode()) for x, y in pairs.as_numpy_iterator()}
    rows = _rows(batching.make_batches(pairs, tok, cfg, training=True).take(60))

    def text(column):  # one side of every row (ids, EOS last) -> its strings, in one call
        return [t.decode() for t in tok.detokenize(tf.ragged.constant([row[column] for row in rows])).numpy()]

    assert len(rows) > 1014 and set(zip(text(0), text(2))) <= texts  # the same pairs, exactly
    assert all(ti[1:] == to[:-1] for _, ti, to in rows)  # target_in is still target_out shifted right
    plain = {(tuple(x), tuple(y)) for x, y in zip(tok.tokenize([x for x, _ in texts]).to_list(),
                                                  tok.tokenize([y for _, y in texts]).to_list())}
    assert sum((x[:-1], to[:-1]) in plain for x, _, to in rows) < 0.05 * len(rows)  # other segmentations
    evaluation = [_rows(batching.make_batches(pairs, tok, c, training=False, deterministic=True)) for c in (cfg, VAL)]
    assert evaluation[0] == evaluation[1]  # evaluation is never sampled


def _first_batches(tok, cfg, pairs, n=6):
    batches = batching.make_batches(pairs, tok, cfg, training=True, deterministic=True)
    return [np.concatenate([x, ti, to], axis=1) for (x, ti), to in batches.take(n).as_numpy_iterator()]


def test_seeded_order_is_deterministic(multi30k_tokenizer, multi30k_dir, data_dir):
    pairs, _ = corpora.load_split(VAL, "val", data_dir)
    a = _first_batches(multi30k_tokenizer, VAL, pairs)
    b = _first_batches(multi30k_tokenizer, VAL, pairs)
    c = _first_batches(multi30k_tokenizer, dataclasses.replace(VAL, seed=2), pairs)
    assert len(a) == 6 and all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, c))


def test_update_budget_is_split_over_two_replicas(multi30k_tokenizer, multi30k_dir, data_dir):
    # Logical devices can be configured once per process, before TF starts: use a fresh one.
    proc = run_cli("tests.data.replica_batches_worker", multi30k_tokenizer.model_path, data_dir,
                   env={"TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    cfg = DataConfig(corpus="multi30k", max_length=80, tokens_per_batch=1024)
    half = set(batching.bucket_shapes(dataclasses.replace(cfg, tokens_per_batch=512)))  # one replica's share
    two = set(batching.bucket_shapes(cfg, batching.plan_batches(cfg, num_replicas=2)))
    assert result["replicas"] == 2 and len(result["batches"]) >= 10
    for replica_0, replica_1 in result["batches"]:
        b, s, t = replica_0
        assert replica_1 == replica_0  # the global batch splits evenly
        assert b * max(s, t) <= 512  # each replica's batch holds half the update's budget
        assert (b, s, t) in half and (2 * b, s, t) in two  # micro-batch = 2 × per-replica batch


def test_build_datasets(tmp_path, multi30k_dir, data_dir):
    base = recipes.get("multi30k")  # trained on val here, to stay fast
    data = dataclasses.replace(base.data, train_split="val", eval_split="test_2016_flickr", tokens_per_batch=1024)
    recipe = dataclasses.replace(base, data=data, model=dataclasses.replace(base.model, vocab_size=1000))
    train_ds, eval_ds, tok = build_datasets(recipe, tmp_path, data_dir, deterministic=True)
    assert tok.vocab_size == 1000 and Path(tok.model_path).parent == tmp_path / "tokenizer"
    shapes = set(batching.bucket_shapes(recipe.data))
    for (x, ti), to in train_ds.take(30).as_numpy_iterator():  # more than one epoch of val: it repeats
        assert (x.shape[0], x.shape[1], to.shape[1]) in shapes
        assert x.dtype == ti.dtype == to.dtype == np.int32
        assert np.all(ti[:, 0] == BOS_ID) and np.all(np.sum(to == EOS_ID, axis=1) == 1)
    test_pairs, _ = corpora.load_split(recipe.data, "test_2016_flickr", data_dir)
    kept = batching.count_length_filter(test_pairs, tok, recipe.data).kept
    assert sum(x.shape[0] for (x, _), _ in eval_ds.as_numpy_iterator()) == kept == 1000  # one finite pass
