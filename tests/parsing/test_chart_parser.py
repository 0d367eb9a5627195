"""The chart parser (tasks/parsing/chart.py, cky.py): CKY against an exhaustive search, the gold span classes read
in the graph against the trees themselves, a perfect chart decoded back to the tree, and a tiny parser through
kt-pipeline, its export and the parsing tools."""

import dataclasses
import functools
import itertools
import json

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import EOS_ID, PAD_ID, losses, recipes
from keras_transformer.model import build_model, count_parameters
from keras_transformer.tasks.parsing import chart, cky, tree_loss, trees
from keras_transformer.tasks.parsing.constraint import BANNED, CLOSE, EOS, OPEN, SLOT, TreeTokens
from tests.support import run_cli


def exhaustive_best(scores, n):
    """(score, spans) of the best binary tree over n words, by trying every split of every span."""

    @functools.lru_cache(maxsize=None)
    def best(i, j):
        if j == i + 1:
            return scores[i, j], frozenset([(i, j)])
        value, spans = max((best(i, k)[0] + best(k, j)[0], best(i, k)[1] | best(k, j)[1]) for k in range(i + 1, j))
        return scores[i, j] + value, spans | {(i, j)}

    return best(0, n)


def test_cky_finds_the_best_binary_tree():
    rng = np.random.default_rng(0)
    words = np.array([9, 4, 1, 2, 7, 9], np.int32)
    scores = rng.normal(size=(len(words), 10, 10)).astype(np.float32)
    in_tree, total = cky.best_tree(tf.constant(scores), tf.constant(words))
    for b, n in enumerate(words):
        value, spans = exhaustive_best(scores[b], int(n))
        assert total[b].numpy() == pytest.approx(value, abs=1e-4)
        assert {(i, j) for i, j in itertools.product(range(10), repeat=2) if in_tree[b, i, j]} == set(spans)


def binary_trees(i, j):
    """Every binary tree over words i..j-1, as its set of spans."""
    if j == i + 1:
        yield frozenset([(i, j)])
        return
    for k in range(i + 1, j):
        for left, right in itertools.product(binary_trees(i, k), binary_trees(k, j)):
            yield left | right | {(i, j)}


def test_the_inside_algorithm_sums_over_every_binary_tree():
    rng = np.random.default_rng(0)
    words = np.array([5, 1, 3, 2, 6], np.int32)
    potentials = rng.normal(size=(len(words), 8, 8)).astype(np.float32)
    log_z = cky.inside(tf.constant(potentials), tf.constant(words)).numpy()
    for b, n in enumerate(words):
        expected = np.logaddexp.reduce([sum(potentials[b, i, j] for i, j in tree) for tree in binary_trees(0, n)])
        assert log_z[b] == pytest.approx(expected, abs=1e-4)


def test_the_tree_crf_is_the_gold_trees_negative_log_probability():
    """tree_crf against enumeration: Z over every binary tree and every labeling (∅ or a label; the root labeled),
    the gold mass over the binary trees that hold every gold constituent, labeled as gold and ∅ elsewhere; its
    gradient sums to 0 over each span's classes beyond the margins' ∅ (it reads margins only)."""
    rng = np.random.default_rng(1)
    labels, n = 3, 5
    logits = rng.normal(size=(1, n + 1, n + 1, cky.FIRST_LABEL + labels)).astype(np.float32)
    gold_spans = {(0, 5): 2, (0, 2): 3, (2, 5): 4, (3, 5): 2, (4, 5): 3}  # (i, j): class
    gold = np.full((1, n + 1, n + 1), chart.PADDING, np.int32)
    for i, j in itertools.combinations(range(n + 1), 2):
        gold[0, i, j] = gold_spans.get((i, j), chart.EMPTY)
    margin = lambda i, j, c: logits[0, i, j, c] - logits[0, i, j, chart.EMPTY]
    total, gold_mass = [], []
    for tree in binary_trees(0, n):
        per_span = [np.logaddexp.reduce([margin(i, j, c) for c in range(cky.FIRST_LABEL, cky.FIRST_LABEL + labels)]
                                        + ([] if (i, j) == (0, n) else [0.0])) for i, j in tree]
        total.append(sum(per_span))
        if set(gold_spans) <= tree:
            gold_mass.append(sum(margin(i, j, c) for (i, j), c in gold_spans.items()))
    expected = np.logaddexp.reduce(total) - np.logaddexp.reduce(gold_mass)
    variable = tf.Variable(logits)
    with tf.GradientTape() as tape:
        loss = tree_loss.tree_crf(variable, tf.constant(gold), tf.constant([n]))
    assert loss.numpy()[0] == pytest.approx(expected, abs=1e-4) and expected > 0
    gradient = tape.gradient(loss, variable).numpy()
    np.testing.assert_allclose(gradient[..., chart.EMPTY], -gradient[..., cky.FIRST_LABEL:].sum(-1), atol=1e-5)


def test_the_crf_marginals_are_each_spans_probability_of_being_a_constituent():
    """cky.marginals against enumeration: Σ over the binary trees that hold (i, j) of p(tree) times the span's
    probability of a label rather than ∅ (the root always labeled), under the potentials of ``tree_crf``."""
    rng = np.random.default_rng(2)
    labels, n = 3, 5
    margins = rng.normal(size=(1, n + 1, n + 1, labels)).astype(np.float32)
    mu = cky.marginals(tf.constant(margins), tf.constant([n])).numpy()[0]
    labeled = lambda i, j: np.logaddexp.reduce(margins[0, i, j])  # log Σ_l exp s(i, j, l)
    phi = lambda i, j: labeled(i, j) if (i, j) == (0, n) else np.logaddexp(labeled(i, j), 0.0)
    every = list(binary_trees(0, n))
    weights = np.exp([sum(phi(i, j) for i, j in tree) for tree in every])
    for i, j in itertools.combinations(range(n + 1), 2):
        in_tree = sum(w for w, tree in zip(weights, every) if (i, j) in tree) / weights.sum()
        assert mu[i, j] == pytest.approx(in_tree * np.exp(labeled(i, j) - phi(i, j)), abs=1e-5)
    assert mu[0, n] == pytest.approx(1.0, abs=1e-5)


def test_minimum_bayes_risk_decoding_keeps_the_tree_of_most_expected_constituents():
    """cky.parse with a threshold τ: the constituents are those of the binary tree that maximises Σ max(μ - τ, 0)
    (an exhaustive search over splits) whose μ exceeds τ, and the root."""
    rng = np.random.default_rng(3)
    words = np.array([6, 4, 2], np.int32)
    logits = rng.normal(scale=2.0, size=(3, 7, 7, 2, cky.FIRST_LABEL + 3)).astype(np.float32)
    tags = np.zeros((3, 6, 4), np.float32)
    parse = cky.parse(tf.constant(logits), tf.constant(tags), tf.constant(words), threshold=0.6)
    first = logits[..., 0, :]
    mu = cky.marginals(tf.constant(first[..., cky.FIRST_LABEL:] - first[..., cky.EMPTY:cky.EMPTY + 1]),
                       tf.constant(words)).numpy()
    for b, n in enumerate(words):
        scores = np.maximum(mu[b] - 0.6, 0.0)
        scores[0, n] = mu[b, 0, n] - 0.6
        _, spans = exhaustive_best(scores, int(n))
        expected = {(i, j) for i, j in spans if mu[b, i, j] > 0.6} | {(0, int(n))}
        assert {(i, j) for i, j in itertools.combinations(range(7), 2) if parse.chains[b, i, j, 0] > 0} == expected


def tree_vocabulary(gold):
    """A vocabulary of the trees' tokens, one id each, laid out as a parser tokenizer's (``token_kinds``)."""
    vocab = ["<pad>", "<unk>", "<s>", "</s>"] + sorted({token for tree in gold for token in
                                                       trees.linearize(tree, tag_leaves=True).split()})
    kinds = [BANNED, BANNED, BANNED, EOS] + [CLOSE if t == ")" else SLOT if trees.is_leaf(t) else OPEN
                                             for t in vocab[4:]]
    return vocab, TreeTokens(tuple(kinds), (False,) * len(vocab), ("",) * 4 + tuple(vocab[4:]))


def spans_of(tree):
    """{(i, j): [labels outermost first]} and the tags of a cleaned tree, walked in Python."""
    spans, tags = {}, []

    def walk(node, start):
        if isinstance(node.children[0], str):  # a preterminal
            tags.append(node.label)
            return start + 1
        end = start
        for child in node.children:
            end = walk(child, end)
        spans.setdefault((start, end), []).insert(0, node.label)
        return end

    walk(tree, 0)
    return spans, tags


def batch_ids(gold, vocab):
    rows = [[vocab.index(t) for t in trees.linearize(tree, tag_leaves=True).split()] + [EOS_ID] for tree in gold]
    width = max(map(len, rows))
    return tf.constant([row + [PAD_ID] * (width - len(row)) for row in rows])


def test_gold_labels_hold_every_constituent_and_tag(generated_splits):
    gold = generated_splits["dev"].trees[:40]
    vocab, tokens = tree_vocabulary(gold)
    classes = chart.chart_classes(tokens)
    label_texts, tag_texts = chart.chart_texts(classes)
    n = max(len(trees.words(tree)) for tree in gold)
    spans, tags = chart.gold_labels(batch_ids(gold, vocab), tf.constant(tokens.kinds),
                                    tf.constant(classes.label_of), tf.constant(classes.tag_of), n)
    spans, tags = spans.numpy(), tags.numpy()
    assert sum(len(spans_of(tree)[0]) for tree in gold) > len(gold)  # more than the roots
    for b, tree in enumerate(gold):
        expected, expected_tags = spans_of(tree)
        words = len(expected_tags)
        assert [tag_texts[c] for c in tags[b, :words]] == ["@" + t for t in expected_tags]
        assert (tags[b, words:] == 0).all()
        for i, j in itertools.product(range(n + 1), repeat=2):
            row = list(spans[b, i, j])
            if not i < j <= words:
                assert row == [chart.PADDING] * chart.CHAIN
                continue
            labels = expected.get((i, j), [])[:chart.CHAIN]
            assert [label_texts[c] for c in row[:len(labels)]] == ["(" + label for label in labels]
            assert row[len(labels):] == ([chart.EMPTY] + [chart.PADDING] * chart.CHAIN)[:chart.CHAIN - len(labels)]


def perfect_chart(gold):
    """The gold trees' classes, their span classes [B, N+1, N+1, CHAIN] and tags [B, N], words [B], and span logits
    that put each gold class (∅ where no span) first by 5; the vocabulary's size."""
    vocab, tokens = tree_vocabulary(gold)
    classes = chart.chart_classes(tokens)
    n = max(len(trees.words(tree)) for tree in gold)
    spans, tags = chart.gold_labels(batch_ids(gold, vocab), tf.constant(tokens.kinds), tf.constant(classes.label_of),
                                    tf.constant(classes.tag_of), n)
    span_logits = 5.0 * tf.one_hot(tf.where(tf.equal(spans, chart.PADDING), chart.EMPTY, spans), len(vocab))
    words = tf.constant([len(trees.words(tree)) for tree in gold])
    return classes, spans, tags, words, span_logits, len(vocab)


def test_a_perfect_chart_decodes_to_the_gold_tree(generated_splits):
    """Logits that put the gold classes first give back each tree exactly (linearized, tags included), whatever
    the ∅ spans around it."""
    gold = generated_splits["dev"].trees[:40]
    classes, spans, tags, words, span_logits, size = perfect_chart(gold)
    parse = cky.parse(span_logits, 5.0 * tf.one_hot(tags, size), words)
    linearized = cky.linearize(parse.chains, parse.tags, parse.words, *chart.chart_texts(classes)).numpy()
    assert [line.decode() for line in linearized] == [trees.linearize(tree, tag_leaves=True) for tree in gold]

    # The bonus δ (the export's α) moves each margin: the ∅ spans' margins are -5, so below 5 the trees stay the
    # gold ones, above it every span of the binary tree is a constituent (2n - 1 of them, the words' included).
    constituents = lambda bonus: tf.reduce_sum(tf.cast(cky.parse(  # noqa: E731
        span_logits, 5.0 * tf.one_hot(tags, size), words, bonus).chains[..., 0] > 0, tf.int32), axis=[1, 2])
    kept = cky.parse(span_logits, 5.0 * tf.one_hot(tags, size), words, 4.9)
    assert np.array_equal(kept.chains.numpy(), parse.chains.numpy())
    assert np.array_equal(constituents(5.1).numpy(), 2 * words.numpy() - 1)


def test_the_tree_hinge_is_zero_on_a_perfect_chart_and_counts_every_span_on_a_blank_one(generated_splits):
    """Kitaev & Klein's hinge: 0 where the gold tree wins by a margin of at least Δ; on equal logits every span of
    the loss-augmented tree costs 1, so 2n - 1 per sentence, and its gradient reaches the logits."""
    _, spans, _, words, span_logits, _ = perfect_chart(generated_splits["dev"].trees[:20])
    perfect = span_logits[..., 0, :]  # the first chain row
    assert np.allclose(tree_loss.tree_hinge(perfect, spans[..., 0], words).numpy(), 0.0)
    blank = tf.Variable(tf.zeros_like(perfect))
    with tf.GradientTape() as tape:
        hinge = tree_loss.tree_hinge(blank, spans[..., 0], words)
        total = tf.reduce_sum(hinge)
    assert np.allclose(hinge.numpy(), 2 * words.numpy() - 1)
    assert float(tf.reduce_sum(tf.abs(tape.gradient(total, blank)))) > 0


def tiny_chart_recipe():
    """ptb_sample_chart at the size of recipes/tiny.py (1 layer, d_model 64; 600 pieces), reading characters,
    trained locally with the tree hinge (no CRF), without the LSTM."""
    base = recipes.get("ptb_sample_chart")
    return dataclasses.replace(
        base, name="ptb_chart_tiny",
        model=dataclasses.replace(base.model, vocab_size=600, d_model=64, d_ff=128, num_heads=2,
                                  num_encoder_layers=1, dropout=0.1, attention_dropout=0.0),
        parsing=dataclasses.replace(base.parsing, chart_hidden=32, char_filters=8, chart_hinge=1.0, chart_lstm=0,
                                    chart_lstm_dropout=0.0, chart_crf=False, chart_mbr=0.0),
        train=dataclasses.replace(base.train, train_steps=30, checkpoint_every=15, warmup_steps=15,
                                  max_train_minutes=0, mixed_precision=False, bleu_samples=8),
        decode=dataclasses.replace(base.decode, average_checkpoints=2))


def test_only_the_spans_i_before_j_are_classified():
    """The span logits are the classifier on p_j - p_i (module docstring) where i < j, and 0 on the grid's other
    half, which is padding; ``pair_spans`` holds the former alone."""
    recipe = tiny_chart_recipe()
    model = build_model(recipe)
    tables = np.zeros((4, recipe.model.vocab_size), np.float32)
    tables[chart._WORD_START, 4:] = 1  # every piece but the control ones starts a word
    model.chart_tables.assign(tables)
    ids = tf.constant([[5, 6, 7, EOS_ID, PAD_ID, PAD_ID], [8, 9, 10, 11, 12, EOS_ID]])
    result = model.chart(ids, training=False)
    spans = result.spans.numpy()  # [2, 6, 6, CHAIN, C]
    p = model.fenceposts(ids)[0]  # [2, 6, H]
    full = model.span_out(tf.nn.relu(model.span_norm(p[:, None, :, :] - p[:, :, None, :] + model.span_bias)))
    upper = np.triu(np.ones((6, 6), bool), 1)  # i < j
    np.testing.assert_allclose(spans.reshape(full.shape)[:, upper], full.numpy()[:, upper], atol=1e-5)
    assert spans.shape[:3] == (2, 6, 6) and (spans[:, ~upper] == 0).all()
    np.testing.assert_array_equal(result.pairs.numpy(), np.argwhere(upper))
    np.testing.assert_array_equal(result.pair_spans.numpy(), spans[:, upper])  # the rows the local loss reads


def test_the_chart_recipe_counts_its_parameters():
    recipe = recipes.get("ptb_sample_chart")
    model = build_model(tiny_chart_recipe())
    assert sum(int(np.prod(v.shape)) for v in model.trainable_weights) == count_parameters(tiny_chart_recipe())
    assert not hasattr(model, "decoder") and recipe.model.num_decoder_layers == 0


def lstm_chart_model():
    """The tiny chart parser with 2 LSTM layers of 8 units, every piece but the control ones a word of its own."""
    recipe = tiny_chart_recipe()
    model = build_model(dataclasses.replace(recipe, parsing=dataclasses.replace(recipe.parsing, chart_lstm=8,
                                                                                chart_lstm_layers=2)))
    tables = np.zeros((4, recipe.model.vocab_size), np.float32)
    tables[chart._WORD_START, 4:] = 1
    model.chart_tables.assign(tables)
    return model


def test_the_lstm_chart_recipe_counts_its_parameters():
    model = lstm_chart_model()
    recipe = dataclasses.replace(tiny_chart_recipe(), parsing=model.parsing)
    assert sum(int(np.prod(v.shape)) for v in model.trainable_weights) == count_parameters(recipe)
    assert len(model.word_lstms) == 2 and model.fencepost_ends.shape == (2, 8)


def test_dropout_after_the_lstm_acts_in_training_alone():
    """``chart_lstm_dropout``: the same weights give the chart of the model without it at inference, and another
    chart in training (the LSTM's outputs dropped before the classifiers)."""
    plain = lstm_chart_model()
    dropped = build_model(dataclasses.replace(tiny_chart_recipe(), parsing=dataclasses.replace(
        plain.parsing, chart_lstm_dropout=0.5)))
    for name in ("fencepost_ends", "span_bias", "chart_tables"):
        getattr(dropped, name).assign(getattr(plain, name))
    for mine, theirs in zip(plain.trainable_weights, dropped.trainable_weights):
        theirs.assign(mine)
    ids = tf.constant([[5, 6, 7, EOS_ID, PAD_ID, PAD_ID], [8, 9, 10, 11, 12, EOS_ID]])
    np.testing.assert_allclose(dropped.chart(ids, training=False).spans.numpy(),
                               plain.chart(ids, training=False).spans.numpy(), atol=1e-6)
    lstm_only = lambda model, training: model.fenceposts(ids, training=training)[1].numpy()  # noqa: E731
    assert not np.allclose(lstm_only(dropped, True), lstm_only(dropped, False))
    assert (lstm_only(dropped, True) == 0).mean() > (lstm_only(dropped, False) == 0).mean()


def test_lstm_fenceposts_read_the_forward_state_before_and_the_backward_state_at_each_fencepost():
    """With ``chart_lstm``: p_g = W_1 [→h_{g-1} ; -←h_g] (START at g = 0, STOP at g = n) over the BiLSTM of the
    words' [first ; last] encoder outputs, and a sentence's chart is the same alone and beside a longer one (the
    backward direction reads each sentence from its own last word, not from the padding)."""
    model = lstm_chart_model()
    ids = tf.constant([[5, 6, 7, EOS_ID, PAD_ID, PAD_ID], [8, 9, 10, 11, 12, EOS_ID]])
    p, tagged, words, _ = model.fenceposts(ids)
    memory = model.encode(ids)
    h = tf.concat([memory[:, :5], memory[:, :5]], axis=-1)  # one piece a word: first = last; 5 words at most
    for lstm in model.word_lstms:
        h = tf.concat(lstm(h, words), axis=-1)
    h = h.numpy()  # [2, 5, 16]
    start, stop = model.fencepost_ends.numpy()
    np.testing.assert_allclose(tagged.numpy()[1], h[1], atol=1e-5)
    for b, n in enumerate(words.numpy()):
        f = np.concatenate([start[None], h[b, :n, :8]])  # [n+1, 8]
        bwd = np.concatenate([h[b, :n, 8:], stop[None]])
        expected = model.span_hidden(np.concatenate([f, -bwd], axis=-1)).numpy()
        np.testing.assert_allclose(p.numpy()[b, : n + 1], expected, atol=1e-5)
    alone = model.chart(ids[:1, :4]).spans.numpy()[0]  # [4, 4, CHAIN, C]
    np.testing.assert_allclose(model.chart(ids).spans.numpy()[0, :4, :4], alone, atol=1e-5)


def test_the_biaffine_bracket_score_moves_the_outermost_rows_phrase_labels_alone():
    """``chart_biaffine``: U starts at zeros, so the chart is the one without it from the same weights; then each
    span's outermost phrase labels move by β(i, j) = [l_i ; 1]ᵀ U r_j over the fenceposts' [f_g ; b_g], and ∅,
    padding and the inner rows do not; its weights are counted."""
    plain = lstm_chart_model()
    recipe = dataclasses.replace(tiny_chart_recipe(), parsing=dataclasses.replace(plain.parsing, chart_biaffine=6))
    model = build_model(recipe)
    assert sum(int(np.prod(v.shape)) for v in model.trainable_weights) == count_parameters(recipe)
    for name in ("fencepost_ends", "span_bias", "chart_tables"):
        getattr(model, name).assign(getattr(plain, name))
    for mine in plain.trainable_weights:  # the bracket scorer's weights are the model's only others
        next(theirs for theirs in model.trainable_weights if theirs.path == mine.path).assign(mine)
    ids = tf.constant([[5, 6, 7, EOS_ID, PAD_ID, PAD_ID], [8, 9, 10, 11, 12, EOS_ID]])
    before = plain.chart(ids).spans.numpy()
    np.testing.assert_allclose(model.chart(ids).spans.numpy(), before, atol=1e-6)
    u = np.random.default_rng(0).normal(size=(7, 6)).astype(np.float32)
    model.bracket.weight.assign(u)
    e = model.fenceposts(ids)[3].numpy()  # [2, 6, 16]
    leaky = lambda x: np.where(x > 0, x, 0.1 * x)  # noqa: E731
    left = np.concatenate([leaky(model.bracket.left(e).numpy()), np.ones((2, 6, 1))], axis=-1)
    beta = np.einsum("bia,ac,bjc->bij", left, u, leaky(model.bracket.right(e).numpy()))  # [2, 6 (i), 6 (j)]
    moved = model.chart(ids).spans.numpy() - before  # [2, 6, 6, CHAIN, C]
    upper = np.triu(np.ones((6, 6), bool), 1)
    np.testing.assert_allclose(moved[:, upper][:, :, 0, cky.FIRST_LABEL:],
                               np.broadcast_to(beta[:, upper][..., None], moved[:, upper][:, :, 0, 2:].shape),
                               atol=1e-4)
    assert np.abs(beta[:, upper]).max() > 0.1
    np.testing.assert_array_equal(moved[:, upper][:, :, 0, :cky.FIRST_LABEL], 0.0)
    np.testing.assert_array_equal(moved[:, upper][:, :, 1:], 0.0)
    np.testing.assert_array_equal(moved[:, ~upper], 0.0)


def test_each_piece_of_a_word_reads_the_whole_words_characters():
    """source_features: c_k is the max over every piece of word k of its characters' convolution, W_c c_k + b_c is
    added at each of the word's pieces, zeros at EOS and PAD, the same for the word wherever it stands."""
    model = build_model(tiny_chart_recipe())
    rest = model.config.vocab_size - 9
    pieces = ("", "", "", "", "un", "believ", "able", "dog", "x" * 20) + ("",) * rest
    starts = (False,) * 4 + (True, False, False, True, True) + (False,) * rest
    model.set_tables(TreeTokens((BANNED,) * 3 + (EOS,) + (BANNED,) * (5 + rest), starts, ("",) * len(pieces), pieces))
    assert chart.piece_characters(pieces)[8] == [2] * chart.CHARS_PER_PIECE  # "x" is the most frequent character
    ids = tf.constant([[4, 5, 6, 7, EOS_ID, PAD_ID], [7, 8, 4, 5, 6, EOS_ID]])
    features = model.source_features(ids).numpy()  # [2, 6, D]

    def piece_vector(piece):
        chars = tf.constant([chart.piece_characters(pieces)[piece]])
        return np.max(model.char_conv(model.char_embedding(chars)).numpy()[0][: min(len(pieces[piece]), 16)], axis=0)

    def word_vector(*word):
        c = np.max([piece_vector(piece) for piece in word], axis=0)
        return model.char_projection(c[None, :]).numpy()[0]

    unbelievable, dog = word_vector(4, 5, 6), word_vector(7)
    np.testing.assert_allclose(features[0, :4], [unbelievable] * 3 + [dog], atol=1e-5)
    np.testing.assert_array_equal(features[0, 4:], 0.0)
    np.testing.assert_allclose(features[1, [0, 1, 2, 3, 4]], [dog, word_vector(8)] + [unbelievable] * 3, atol=1e-5)
    np.testing.assert_array_equal(features[1, 5], 0.0)


def test_chart_crf_local_keeps_the_outermost_rows_local_loss_beside_the_crf(generated_splits):
    """With ``chart_crf`` the outermost chain rows leave the token statistics for the CRF's term; with
    ``chart_crf_local`` too they stay there (as without the CRF), and the CRF's term over the real tokens (what the
    loss adds: the CRF per word) is unchanged."""
    gold = generated_splits["dev"].trees[:4]
    vocab, tokens = tree_vocabulary(gold)
    recipe = tiny_chart_recipe()
    room = recipe.model.vocab_size - len(vocab)
    tokens = TreeTokens(tokens.kinds + (BANNED,) * room, tuple(kind == SLOT for kind in tokens.kinds) + (False,) * room,
                        tokens.texts + ("",) * room, ("",) * 4 + tuple(vocab[4:]) + ("",) * room)
    crf = dataclasses.replace(recipe.parsing, chart_hinge=0.0, chart_crf=True)
    model = build_model(dataclasses.replace(recipe, parsing=crf))
    model.set_tables(tokens)
    target = batch_ids(gold, vocab)
    tag = tokens.kinds.index(SLOT)
    n = [len(trees.words(tree)) for tree in gold]
    source = tf.constant([[tag] * k + [EOS_ID] + [PAD_ID] * (max(n) - k) for k in n])

    def statistics(**change):
        model.parsing = dataclasses.replace(crf, **change)
        stats, extra = model.training_statistics(source, target, target, False, 0.1)
        return stats.numpy(), float(extra)

    local, _ = statistics(chart_crf=False)
    alone, crf_term = statistics()
    both, both_term = statistics(chart_crf_local=True)
    np.testing.assert_allclose(both, local, rtol=1e-6)
    real = lambda stats: stats[..., losses.REAL].sum()  # noqa: E731
    assert both_term / real(both) == pytest.approx(crf_term / real(alone), rel=1e-5) and crf_term > 0
    spans = sum(k * (k + 1) // 2 for k in n)  # every span's outermost row is real (a label or ∅)
    assert real(local) - real(alone) == spans


@pytest.mark.parametrize("change, message", [
    (dict(parsing=dict(chart_labels=64, align_words=True)), "chart_labels: a chart parser has no decoder"),
    (dict(data=dict(tree_leaves="slot")), "chart_labels: needs tree_leaves='tag'"),
    (dict(model=dict(num_decoder_layers=2)), "num_decoder_layers: ChartParser needs 0, got 2"),
    (dict(parsing=dict(chart_labels=0, char_filters=0, chart_lstm=0, chart_lstm_dropout=0.0, chart_hinge=1.0)),
     "chart_hinge: needs chart_labels"),
    (dict(parsing=dict(chart_hinge=-1.0)), "chart_hinge: must be >= 0, got -1.0"),
    (dict(parsing=dict(chart_labels=0, char_filters=0, chart_lstm=0, chart_lstm_dropout=0.0, chart_crf=True)),
     "chart_crf: needs chart_labels"),
    (dict(parsing=dict(chart_labels=0, char_filters=0, chart_lstm=8)), "chart_lstm: needs chart_labels"),
    (dict(parsing=dict(chart_lstm=8, chart_lstm_layers=0)), "chart_lstm_layers: must be positive, got 0"),
    (dict(parsing=dict(chart_lstm=8, chart_lstm_dropout=1.0)), r"chart_lstm_dropout: must be in \[0, 1\), got 1.0"),
    (dict(parsing=dict(chart_lstm=0, chart_lstm_dropout=0.3)), "chart_lstm_dropout: needs chart_lstm"),
    (dict(parsing=dict(chart_biaffine=-1)), "chart_biaffine: must be >= 0, got -1"),
    (dict(parsing=dict(chart_labels=0, char_filters=0, chart_lstm=0, chart_lstm_dropout=0.0, chart_crf=False,
                       chart_mbr=0.0, chart_biaffine=8)), "chart_biaffine: needs chart_labels"),
    (dict(parsing=dict(chart_crf=True, chart_hinge=1.0)), "chart_crf: one tree-level loss"),
    (dict(parsing=dict(chart_crf=False, chart_mbr=0.0, chart_crf_local=True)), "chart_crf_local: needs chart_crf"),
    (dict(parsing=dict(chart_crf=False, chart_mbr=0.5)), "chart_mbr: needs chart_crf"),
    (dict(parsing=dict(chart_crf=True, chart_mbr=1.0)), r"chart_mbr: must be in \[0, 1\), got 1.0"),
])
def test_what_a_chart_recipe_cannot_be_is_refused(change, message):
    recipe = recipes.get("ptb_sample_chart").to_dict()
    for section, fields in change.items():
        recipe[section].update(fields)
    with pytest.raises(ValueError, match=message):
        build_model(type(recipes.get("tiny")).from_dict(recipe))


def test_a_tokenizer_with_more_labels_than_room_is_refused(generated_splits):
    model = build_model(dataclasses.replace(tiny_chart_recipe(), parsing=dataclasses.replace(
        tiny_chart_recipe().parsing, chart_labels=2)))
    _, tokens = tree_vocabulary(generated_splits["dev"].trees)
    with pytest.raises(ValueError, match=r"chart_labels: the tokenizer has \d+ phrase labels, the model room for 2"):
        model.set_tables(tokens)


@pytest.mark.slow
def test_a_chart_parser_trains_exports_and_parses(tmp_path, generated_splits):
    """kt-pipeline end to end: dev F1 at each checkpoint, the export's trees those of the work directory and of an
    ensemble of it with itself, every tree one tree over the sentence's words, and the tools that read a parser;
    with the LSTM's fenceposts (the SavedModel holds its loop) and the biaffine bracket score, trained as a tree CRF
    and decoded by its marginals (the SavedModel holds the inside algorithm's gradient)."""
    recipe = tiny_chart_recipe()
    recipe_file = tmp_path / "ptb_chart_tiny.json"
    recipe_file.write_text(dataclasses.replace(recipe, parsing=dataclasses.replace(
        recipe.parsing, chart_lstm=8, chart_lstm_layers=1, chart_hinge=0.0, chart_crf=True, chart_mbr=0.5,
        chart_biaffine=8)).to_json())
    run_cli("pipeline", f"--recipe={recipe_file}", f"--workdir={tmp_path / 'run'}",
            f"--export_dir={tmp_path / 'export'}", "--eval_sentences=16", timeout=600)
    metadata = json.loads((tmp_path / "export" / "metadata.json").read_text())
    assert metadata["step"] == 30 and metadata["repaired"] == 0 and 0 <= metadata["f1"] <= 100
    summary = json.loads((tmp_path / "run" / "train_summary.json").read_text())
    assert len(summary["history"]["val_f1"]) == 2

    sentences = [" ".join(trees.words(tree)) for tree in generated_splits["test"].trees[:12]]
    # the export and the work directory's average both decode with the α the pipeline chose on dev
    outputs = [run_cli("parse", f"--model={tmp_path / where}", *options, stdin="\n".join(sentences) + "\n")
               .stdout.splitlines() for where, options in (("export", ()), ("run", ("--checkpoint=averaged",)))]
    assert outputs[0] == outputs[1] and len(outputs[0]) == len(sentences)
    # an ensemble of the parser with itself, as one SavedModel: its trees
    run_cli("export", f"--model={tmp_path / 'run'},{tmp_path / 'run'}", "--checkpoint=averaged",
            f"--export_dir={tmp_path / 'ensemble'}")
    ensembled = run_cli("parse", f"--model={tmp_path / 'ensemble'}", stdin="\n".join(sentences) + "\n")
    assert ensembled.stdout.splitlines() == outputs[0]
    for sentence, line in zip(sentences, outputs[0]):
        (tree,) = trees.read_trees(line)
        assert trees.words(tree) == sentence.split()
    scored = run_cli("evaluate_parser", f"--model={tmp_path / 'export'}", "--max_sentences=16", "--json").stdout
    scores = json.loads(scored.strip().splitlines()[-1])
    assert round(scores["f1"], 2) == metadata["f1"] and scores["repaired"] == 0
    refused = run_cli("export", f"--model={tmp_path / 'run'}", f"--export_dir={tmp_path / 'ct2'}",
                      "--format=ctranslate2", check=False)
    assert refused.returncode != 0 and "chart_labels: a chart parser has no decoder" in refused.stderr
