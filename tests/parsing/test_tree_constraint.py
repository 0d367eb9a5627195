"""The constrained beam search writes only trees, whatever the model prefers; the words go into the slots in-graph."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import BOS_ID, EOS_ID, PAD_ID
from keras_transformer.tasks.parsing import trees
from keras_transformer.decoding import beam_search
from keras_transformer.tasks.parsing import constraint as tree_constraint
from keras_transformer.decoding.model_step import NEG_INF
from keras_transformer.tasks.parsing.module import fill_slots

# ids 0-3 reserved (PAD, UNK, BOS, EOS), then the tree tokens and one ordinary word piece.
PIECES = ["<pad>", "<unk>", "<s>", "</s>", "(S", "(NP", ")", "XX", "dog"]
K = tree_constraint
KINDS = [K.BANNED, K.BANNED, K.BANNED, K.EOS, K.OPEN, K.OPEN, K.CLOSE, K.SLOT, K.BANNED]
FAVOURITE = {"EOS": EOS_ID, "close": 6, "slot": 7, "banned word": 8, "open": 4, "none": None}


def fake_step_fn(favourite):
    """A 'model' whose log-probabilities are seeded noise, with one token strongly preferred at every step."""

    def step_fn(token_ids, step, cache, constants):
        n = tf.shape(token_ids)[0]
        logits = 2.0 * tf.random.stateless_normal([n, len(PIECES)], seed=tf.stack([step, 7]))  # [N, V]
        logits += 3.0 * tf.cast(tf.equal(tf.range(len(PIECES)), token_ids[:, None] % len(PIECES)), tf.float32)
        if favourite is not None:
            logits += 8.0 * tf.one_hot([favourite], len(PIECES))
        log_probs = tf.nn.log_softmax(logits)
        banned = tf.reduce_any(tf.equal(tf.range(len(PIECES))[:, None], [PAD_ID, BOS_ID]), axis=1)
        return tf.where(banned[None, :], NEG_INF, log_probs), {"steps": cache["steps"] + 1}

    return step_fn


def constrained_search(favourite, words, extra, beam_size=4, alpha=0.3):
    words = tf.constant(words, tf.int32)  # [B]
    lengths = words + 3 + extra  # [B]: the shortest tree "(S XX ... )" and EOS, plus extra
    rows = tf.shape(words)[0] * beam_size
    zeros = tf.zeros([rows], tf.int32)
    cache = {"model": {"steps": zeros}, "tree": (zeros, zeros, zeros, zeros)}
    constants = {"model": (), "words": words, "max_lengths": lengths}  # one row per item
    step_fn = tree_constraint.constrained_step_fn(fake_step_fn(favourite), tf.constant(KINDS, tf.int32))
    return beam_search(step_fn, cache, beam_size, lengths, alpha, constants)


def as_text(ids):
    """Token ids up to EOS -> (the sequence's text, whether it ended in EOS)."""
    tokens = []
    for i in ids:
        if i == EOS_ID:
            return " ".join(tokens), True
        tokens.append(PIECES[i])
    return " ".join(tokens), False


@pytest.mark.parametrize("favourite", sorted(FAVOURITE))
@pytest.mark.parametrize("extra", [0, 1, 25])
def test_every_hypothesis_is_a_tree_over_the_words(favourite, extra):
    words = [0, 1, 2, 3, 7, 12]
    result = constrained_search(FAVOURITE[favourite], words, extra)
    sequences, scores = result.sequences.numpy(), result.scores.numpy()  # [B, K, T], [B, K]
    for item, n in enumerate(words):
        assert scores[item, 0] > NEG_INF / 2  # the best is a real hypothesis
        for beam in range(sequences.shape[1]):
            if scores[item, beam] <= NEG_INF / 2:
                continue  # an empty n-best slot
            text, ended = as_text(sequences[item, beam])
            assert ended, text
            assert trees.repair(text, n).problems == (), text  # one tree, exactly n slots
            assert len(text.split()) + 1 <= n + 3 + extra  # within the maximum length, EOS included


def test_tight_length_forces_the_flat_tree():
    result = constrained_search(FAVOURITE["open"], [3], extra=0)
    text, _ = as_text(result.sequences.numpy()[0, 0])
    assert text.split()[1:] == ["XX", "XX", "XX", ")"] and text.split()[0] in ("(S", "(NP")


def test_token_kinds_need_a_parser_tokenizer(tmp_path):
    from keras_transformer.data.tokenizer import Tokenizer

    plain = Tokenizer.train(["a dog ( barks )", "(S XX )"] * 50, 280, tmp_path / "plain")
    with pytest.raises(ValueError, match=r"no atomic '\)' piece; not a parser's tokenizer"):
        tree_constraint.token_kinds(plain)
    atomic = Tokenizer.train(["a dog barks", "(S XX )"] * 50, 280, tmp_path / "atomic",
                             atomic_words=["(S", ")", "XX"])
    kinds = tree_constraint.token_kinds(atomic)
    assert sorted(k for k in kinds.kinds if k != K.BANNED) == [K.OPEN, K.CLOSE, K.SLOT, K.EOS]
    assert kinds.kinds[EOS_ID] == K.EOS


def test_fill_slots_in_graph():
    fill = tf.function(fill_slots)
    out = fill(tf.constant(["(S (NP XX XX ) XX )", "", "(S XX )", "(S (NP XX ) XX )"]),
               tf.constant(["Ms. Haag \t plays", "", "a ( b )", "one"]),
               tf.constant([3, 0, 1, 2], tf.int32))
    assert out.numpy().astype(str).tolist() == [
        "(S (NP (XX Ms.) (XX Haag)) (XX plays))",
        "",
        "(S (XX a) (XX -LRB-) (XX b) (XX -RRB-))",  # words past the slots go under the root; brackets escaped
        "(S (NP (XX one)) (XX XX))",  # a slot with no word left keeps the placeholder
    ]
    for text in out.numpy().astype(str):
        if text:
            assert trees.read_trees(text)  # PTB brackets EVALB can read


def test_fill_slots_writes_the_tags_of_tag_leaves():
    out = fill_slots(tf.constant(["(S (NP @NNP @NNP ) (VP @VBZ ) @. )", "(S @-LRB- XX )"]),
                     tf.constant(["Ms. Haag plays .", "( b"]), tf.constant([4, 2], tf.int32))
    assert out.numpy().astype(str).tolist() == ["(S (NP (NNP Ms.) (NNP Haag)) (VP (VBZ plays)) (. .))",
                                                "(S (-LRB- -LRB-) (XX b))"]


def test_tag_leaves_are_slots_to_the_constraint(tmp_path):
    from keras_transformer.data.tokenizer import Tokenizer

    tok = Tokenizer.train(["a dog barks", "(S @DT @NN )"] * 50, 280, tmp_path / "tags",
                          atomic_words=["(S", ")", "XX", "@DT", "@NN"])
    kinds = tree_constraint.token_kinds(tok)
    assert sorted(k for k in kinds.kinds if k != K.BANNED) == [K.OPEN, K.CLOSE, K.SLOT, K.SLOT, K.SLOT, K.EOS]


def test_count_words_by_word_initial_pieces():
    starts = tf.constant([False, False, False, False, True, False, True], tf.bool)  # ids 4 and 6 begin a word
    source = tf.constant([[4, 5, 6, EOS_ID, PAD_ID], [EOS_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID]], tf.int32)
    assert tree_constraint.count_words(source, starts).numpy().tolist() == [2, 0]
    np.testing.assert_array_equal(tree_constraint.count_words(source[:, :1], starts).numpy(), [1, 0])
