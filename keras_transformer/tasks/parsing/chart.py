"""A chart parser on the paper's encoder: every span of the sentence scored from the encoder's fenceposts, the best
tree found by CKY (``cky.py``). ``ParsingConfig.chart_labels`` > 0 builds it; not the paper's method.

§6.3 parses with the sequence-to-sequence Transformer. This model keeps its encoder (§3.1: the same embedding,
positions and layers) and replaces the decoder by the span classifier of Stern et al. (2017) and Kitaev & Klein
(2018), the design of the outside CRF parser the sample's results are compared with:

    x_k, y_k = the encoder output at the last and at the first piece of word k (k = 0..n-1)    [D] each
    fencepost g = 0..n, between words g-1 and g:  f_g = x_{g-1}[:D/2]  (x_{-1} = START),
                                                 b_g = y_g[D/2:]      (y_n = STOP)
    span (i, j), 0 <= i < j <= n:   r_ij = [f_j - f_i ; b_i - b_j]                                   [D]
    s(i, j) = W_2 dropout(ReLU(LayerNorm(W_1 r_ij + c_1))) + c_2                                     [3, C]
    tag(k)  = the same classifier shape over [y_k ; x_k]                                              [C]

W_1 r_ij = p_j - p_i with p_g = W_1 [f_g ; -b_g] (Kitaev & Klein's factoring): the first layer runs once per
fencepost, not once per span; the rest on the N(N+1)/2 spans i < j alone (the others are padding, logits 0). A span's
three rows classify its unary chain, outermost first (S over VP is one span, two labels; a longer chain keeps its
outer three): class 0 is padding, 1 is ∅ (no constituent, or the chain ends), 2.. the phrase labels. A tag row's
classes are 0 padding, 1.. the POS tags. C = ``chart_labels`` + 2.

Training is local span classification (Stern et al., 2017; Gaddy et al., 2018): the label-smoothed loss of every
span's chain rows and every word's tag against the gold tree, which ``gold_labels`` reads from the linearized
target in the graph, so this parser trains on the translation data path and training step unchanged
(``training_statistics``). With ``chart_hinge`` > 0 a tree-level loss is added: Kitaev & Klein's (2018) hinge,
the score of the best tree under costs that favour wrong spans (CKY, ``cky.best_tree``) over the gold tree's
(``tree_loss.tree_hinge``), so the few constituents of a sentence are not outweighed by its many ∅ spans. With
``chart_crf`` the first chain row is trained as a tree CRF instead (``tree_loss.tree_crf``; Zhang et al., 2020): the
probability of the gold tree among all binary trees, normalized by the inside algorithm (``cky.inside``); with
``chart_crf_local`` too, beside its local loss; with ``chart_mbr`` = τ it is decoded by its span marginals
(``cky.marginals``, minimum Bayes risk). Decoding (``predict``) takes each span's best chain, scores it by
its margin over ∅, and CKY picks the binary tree whose spans sum highest; the root is always a constituent.

With ``chart_lstm`` = U the fenceposts come from a bidirectional LSTM over the words instead (Stern et al., 2017;
Gaddy et al., 2018; ``chart_lstm_layers`` deep, dropout before each layer and, with ``chart_lstm_dropout``, after the
last), read from the encoder:

    (→h_k, ←h_k) = BiLSTM([y_k ; x_k], k = 0..n-1)   (word_lstm.py)                              [U] each
    f_g = →h_{g-1} (→h_{-1} = START),  b_g = ←h_g (←h_n = STOP),  r_ij as above                    [2U]
    tag(k) over [→h_k ; ←h_k]

With ``chart_biaffine`` = A each span's phrase labels (not ∅) in its outermost row also get β(i, j), a biaffine
bracket score over the fenceposts' e_g = [f_g ; b_g] (``biaffine.py``; the outside CRF parser's span scorer).

With ``char_filters`` = F each sentence piece's input embedding also gets its word's characters (Ma & Hovy, 2016's
character CNN; Kitaev & Klein read characters with an LSTM): the characters of every piece of word k (up to
CHARS_PER_PIECE each) embedded, convolved (width 3, F filters, ReLU) and max-pooled over the whole word,

    c_k = max over the characters of word k of ReLU(conv(char embeddings))                          [F]
    input(piece) += W_c c_k + b_c    (every piece of word k)                                         [D]

read from the real pieces also where word dropout reads UNK, so a rare word keeps its spelling.

Which target pieces open a constituent with which label class, and which are tag leaves of which class, come from
the tokenizer (``set_tables``, ``ParsingTask.prepare_model``; class order = piece order) and are kept with the
weights, as the sequence-to-sequence parser's word tables are; so are each piece's characters.
"""

from __future__ import annotations

import collections
from typing import List, NamedTuple, Optional, Sequence, Tuple, Union

import keras
import tensorflow as tf
from keras import ops

from keras_transformer import losses
from keras_transformer.config import ParsingConfig, Recipe
from keras_transformer.layers import masks
from keras_transformer.model import Transformer
from keras_transformer.tasks.parsing import biaffine, cky
from keras_transformer.tasks.parsing.cky import EMPTY, FIRST_LABEL, PADDING
from keras_transformer.tasks.parsing.constraint import CLOSE, OPEN, SLOT, TreeTokens
from keras_transformer.tasks.parsing.model import ParsingSection, at_words, word_pieces
from keras_transformer.tasks.parsing.tree_loss import tree_crf, tree_hinge
from keras_transformer.tasks.parsing.word_lstm import BidirectionalLSTM

CHAIN = 3  # labels per span: a unary chain's outermost three
_KIND, _LABEL, _TAG, _WORD_START = range(4)  # rows of ChartParser.chart_tables
CHAR_ROWS = 256  # character ids: 0 none, 1 a character past the table's room, 2.. by frequency in the vocabulary
CHARS_PER_PIECE = 16  # a longer piece keeps its first 8 and last 8 characters
CHAR_EMBEDDING = 32  # the width of a character's embedding
CHAR_WIDTH = 3  # the convolution's window


def piece_characters(pieces: Sequence[str]):
    """pieces [V] (texts, ``TreeTokens.pieces``) -> [V][CHARS_PER_PIECE] character ids (0 past a piece's end;
    the most frequent characters of the vocabulary's pieces get the CHAR_ROWS - 2 ids from 2, ties by character,
    the rest 1)."""
    counts = collections.Counter(char for piece in pieces for char in piece)
    ranked = sorted(counts, key=lambda char: (-counts[char], char))[: CHAR_ROWS - 2]
    ids = {char: 2 + rank for rank, char in enumerate(ranked)}
    half = CHARS_PER_PIECE // 2
    rows = []
    for piece in pieces:
        kept = piece if len(piece) <= CHARS_PER_PIECE else piece[:half] + piece[-half:]
        row = [ids.get(char, 1) for char in kept]
        rows.append(row + [0] * (CHARS_PER_PIECE - len(row)))
    return rows


class ChartClasses(NamedTuple):
    """The classes of a tokenizer's tree pieces: ``labels[c - FIRST_LABEL]`` is the piece text of label class c
    ("(NP"), ``tags[c - 1]`` of tag class c ("@NN"); ``label_of`` / ``tag_of`` [V] each piece's class (0: none)."""

    labels: Tuple[str, ...]
    tags: Tuple[str, ...]
    label_of: Tuple[int, ...]
    tag_of: Tuple[int, ...]


def chart_classes(tokens: TreeTokens) -> ChartClasses:
    """Label and tag classes in piece order (``constraint.token_kinds``' OPEN and SLOT pieces)."""
    labels, tags, label_of, tag_of = [], [], [], []
    for kind, text in zip(tokens.kinds, tokens.texts):
        label_of.append(FIRST_LABEL + len(labels) if kind == OPEN else 0)
        tag_of.append(1 + len(tags) if kind == SLOT else 0)
        if kind == OPEN:
            labels.append(text)
        elif kind == SLOT:
            tags.append(text)
    return ChartClasses(tuple(labels), tuple(tags), tuple(label_of), tuple(tag_of))


def gold_labels(target_ids, kinds, label_of, tag_of, num_words):
    """The classes a gold tree gives every span and word (module docstring).

    target_ids [B, T] (a linearized tree with tag leaves, then EOS and PAD; ``trees.linearize``); kinds,
    label_of, tag_of [V] int32 (``constraint`` kinds, ``chart_classes``); num_words N, the span grid's words
    (scalar) -> (spans [B, N+1, N+1, CHAIN] int32: PADDING where not i < j <= n, else the chain's classes
    and EMPTY after it (PADDING past the first EMPTY); tags [B, N] int32: each word's tag class, PADDING past n).
    """
    ids = tf.cast(target_ids, tf.int32)
    kind = tf.gather(kinds, ids)  # [B, T]
    is_open, is_close = tf.equal(kind, OPEN), tf.equal(kind, CLOSE)
    is_leaf = tf.cast(tf.equal(kind, SLOT), tf.int32)
    leaves_before = tf.cumsum(is_leaf, axis=1, exclusive=True)  # [B, T]: the fencepost before each token
    delta = tf.cast(is_open, tf.int32) - tf.cast(is_close, tf.int32)
    depth_after = tf.cumsum(delta, axis=1)  # [B, T]
    depth_before = depth_after - delta
    t = tf.shape(ids)[1]
    positions = tf.range(t)
    # each "(" closes at the first later ")" that takes the depth back to where it was before the "("
    closes = (is_close[:, None, :] & (positions[None, None, :] > positions[None, :, None])
              & tf.equal(depth_after[:, None, :], depth_before[:, :, None]))  # [B, T(open), T(close)]
    close_at = tf.reduce_min(tf.where(closes, positions[None, None, :], t - 1), axis=2)  # [B, T]
    start, end = leaves_before, tf.gather(leaves_before, close_at, batch_dims=1)  # [B, T] the span's fenceposts
    same_span = (is_open[:, None, :] & (positions[None, None, :] < positions[None, :, None])
                 & tf.equal(start[:, None, :], start[:, :, None]) & tf.equal(end[:, None, :], end[:, :, None]))
    chain_at = tf.reduce_sum(tf.cast(same_span, tf.int32), axis=2)  # [B, T]: opens of the same span before it

    b = tf.shape(ids)[0]
    n = tf.reduce_sum(is_leaf, axis=1)  # [B] words
    opens = tf.where(is_open & (end <= num_words))  # [M, 2] (item, position)
    at = lambda x: tf.gather_nd(x, opens)  # noqa: E731  [M]
    item = tf.cast(opens[:, 0], tf.int32)
    grid = [b, num_words + 1, num_words + 1]
    chain_length = tf.scatter_nd(tf.stack([item, at(start), at(end)], axis=1), tf.ones_like(item), grid)
    fence = tf.range(num_words + 1)
    valid = ((fence[None, :, None] < fence[None, None, :])
             & (fence[None, None, :] <= tf.minimum(n, num_words)[:, None, None]))  # [B, N+1, N+1]
    rows = tf.range(CHAIN)[None, None, None, :]
    spans = tf.where(valid[..., None] & (chain_length[..., None] >= rows),
                     tf.where(tf.equal(chain_length[..., None], rows), EMPTY, PADDING), PADDING)  # [B, N+1, N+1, 3]
    kept = at(chain_at) < CHAIN
    labels = tf.boolean_mask(tf.stack([item, at(start), at(end), at(chain_at)], axis=1), kept)
    spans = tf.tensor_scatter_nd_update(spans, labels, tf.boolean_mask(at(tf.gather(label_of, ids)), kept))

    leaves = tf.where((is_leaf > 0) & (leaves_before < num_words))  # [W, 2]
    words = tf.stack([tf.cast(leaves[:, 0], tf.int32), tf.gather_nd(leaves_before, leaves)], axis=1)
    tags = tf.scatter_nd(words, tf.gather_nd(tf.gather(tag_of, ids), leaves), [b, num_words])  # [B, N]
    return spans, tags


class Chart(NamedTuple):
    spans: tf.Tensor  # [B, N+1, N+1, CHAIN, C] float32 logits, 0 where i >= j
    tags: tf.Tensor  # [B, N, C] float32 logits
    words: tf.Tensor  # [B] int32, each sentence's words n (<= N)
    pairs: tf.Tensor  # [M, 2] int32, the spans (i, j) with i < j, M = N(N+1)/2
    pair_spans: tf.Tensor  # [B, M, CHAIN, C] float32 logits: ``spans`` at ``pairs``


@keras.saving.register_keras_serializable(package="keras_transformer")
class ChartParser(ParsingSection, Transformer):
    """The paper's encoder with a span classifier and CKY instead of the decoder (module docstring)."""

    has_decoder = False
    tokenizer_tables = True

    def __init__(self, config, parsing: Optional[Union[ParsingConfig, dict]] = None, **kwargs):
        parsing = ParsingConfig(**parsing) if isinstance(parsing, dict) else parsing
        if parsing is None or not parsing.chart_labels:
            raise ValueError("chart_labels: a chart parser needs room for its labels (> 0)")
        self.parsing = parsing  # read by add_context_layers, which the Transformer's __init__ calls
        super().__init__(config, **kwargs)

    @property
    def num_classes(self) -> int:
        """C: padding, ∅ and ``chart_labels`` labels (or padding and as many tags, the rest unused)."""
        return self.parsing.chart_labels + FIRST_LABEL

    def add_context_layers(self):
        d, hidden, vocab = self.config.d_model, self.parsing.chart_hidden, self.config.vocab_size
        # [4, V]: each piece's constraint kind, label class, tag class (target side) and whether it starts a word
        # (source side); float32 under any policy, as the parser's word tables
        self.chart_tables = self.add_weight(shape=(4, vocab), initializer="zeros", dtype="float32", trainable=False,
                                            autocast=False, name="chart_tables")
        width = self.parsing.chart_lstm or d  # the LSTM's units per direction, or the encoder's width
        self.fencepost_ends = self.add_weight(shape=(2, width), initializer=keras.initializers.RandomNormal(
            stddev=width ** -0.5), name="fencepost_ends")  # [START; STOP] (module docstring)
        for i in range(self.parsing.chart_lstm_layers if self.parsing.chart_lstm else 0):  # attributes, not a list:
            # the checkpoints' variable paths (checkpoints/names.py) follow layers, not lists
            setattr(self, f"word_lstm_{i}", BidirectionalLSTM(self.parsing.chart_lstm, name=f"word_lstm_{i}"))
        self.span_hidden = keras.layers.Dense(hidden, use_bias=False, name="span_hidden")  # W_1 [D, H]
        self.span_bias = self.add_weight(shape=(hidden,), initializer="zeros", name="span_bias")  # c_1
        self.span_norm = keras.layers.LayerNormalization(epsilon=self.config.layer_norm_epsilon, name="span_norm")
        self.span_out = keras.layers.Dense(CHAIN * self.num_classes, name="span_labels")  # W_2, c_2
        self.tag_hidden = keras.layers.Dense(hidden, name="tag_hidden")
        self.tag_norm = keras.layers.LayerNormalization(epsilon=self.config.layer_norm_epsilon, name="tag_norm")
        self.tag_out = keras.layers.Dense(self.num_classes, name="tag_labels")
        self.classifier_dropout = keras.layers.Dropout(self.config.dropout, name="classifier_dropout")
        if self.parsing.chart_lstm_dropout:  # only then: a Dropout layer's seed state is a variable of the checkpoint
            self.lstm_dropout = keras.layers.Dropout(self.parsing.chart_lstm_dropout, name="lstm_dropout")
        if self.parsing.chart_biaffine:
            self.bracket = biaffine.BiaffineBracket(self.parsing.chart_biaffine, self.config.dropout, name="bracket")
        if self.parsing.char_filters:  # [V, CHARS_PER_PIECE] each piece's character ids (piece_characters)
            self.char_table = self.add_weight(shape=(vocab, CHARS_PER_PIECE), initializer="zeros", dtype="float32",
                                              trainable=False, autocast=False, name="char_table")
            self.char_embedding = keras.layers.Embedding(CHAR_ROWS, CHAR_EMBEDDING, name="char_embedding")
            self.char_conv = keras.layers.Conv1D(self.parsing.char_filters, CHAR_WIDTH, padding="same",
                                                 activation="relu", name="char_conv")
            self.char_projection = keras.layers.Dense(d, name="char_projection")  # W_c, b_c

    @property
    def word_lstms(self) -> List[keras.layers.Layer]:
        """The BiLSTM's layers over the words, first to last (``chart_lstm``; none without)."""
        return [getattr(self, f"word_lstm_{i}") for i in range(self.parsing.chart_lstm_layers)
                if self.parsing.chart_lstm]

    def set_tables(self, tokens: TreeTokens) -> ChartClasses:
        """Fills ``chart_tables`` from a parser's tokenizer (``constraint.token_kinds``); a ValueError naming
        ``chart_labels`` when it has more labels or tags than the model has room for."""
        classes = chart_classes(tokens)
        room = self.parsing.chart_labels
        for what, found in (("phrase labels", classes.labels), ("POS tags", classes.tags)):
            if len(found) > room:
                raise ValueError(f"chart_labels: the tokenizer has {len(found)} {what}, the model room for {room}")
        rows = [tokens.kinds, classes.label_of, classes.tag_of, [int(s) for s in tokens.word_starts]]
        self.chart_tables.assign(ops.cast(ops.stack([ops.convert_to_tensor(r) for r in rows]), "float32"))
        if self.parsing.char_filters:
            self.char_table.assign(ops.cast(ops.convert_to_tensor(piece_characters(tokens.pieces)), "float32"))
        return classes

    def _table(self, row):
        return ops.cast(self.chart_tables[row], "int32")  # [V]

    # -- the forward pass --------------------------------------------------------------------------

    def source_features(self, source_ids):
        """source_ids [B, S] -> [B, S, D]: W_c c_k + b_c at every piece of word k (module docstring), zeros at
        EOS and PAD; None without ``char_filters``."""
        if not self.parsing.char_filters:
            return None
        chars = tf.gather(ops.cast(self.char_table, "int32"), source_ids)  # [B, S, L]
        batch, length = tf.shape(source_ids)[0], tf.shape(source_ids)[1]
        flat = tf.reshape(chars, [-1, CHARS_PER_PIECE])  # [B*S, L]
        h = ops.cast(self.char_conv(self.char_embedding(flat)), "float32")  # [B*S, L, F], >= 0
        h = tf.reduce_max(tf.where(flat[..., None] > 0, h, 0.0), axis=1)  # [B*S, F]: each piece's characters
        _, word, _ = word_pieces(source_ids, tf.gather(self._table(_WORD_START), source_ids))
        text = masks.text_pieces(source_ids) & (word >= 0)  # [B, S]
        rows = batch * length
        segment = tf.reshape(tf.where(text, tf.range(batch)[:, None] * length + word, rows), [-1])  # [B*S]
        c = tf.gather(tf.math.unsorted_segment_max(h, segment, rows + 1), segment)  # [B*S, F]: the word's c_k
        c = tf.where(tf.reshape(text, [-1, 1]), c, 0.0)
        return self.char_projection(tf.reshape(c, [batch, length, self.parsing.char_filters])) * ops.cast(
            text[..., None], self.compute_dtype)  # [B, S, D]

    def fenceposts(self, source_ids, training=None):
        """source_ids [B, S] (pieces, EOS, PAD) -> (p [B, N+1, H]: p_g = W_1 [f_g ; -b_g] at each fencepost; each
        word's vector for its tag [B, N, 2D] (its first and last pieces' encoder outputs) or [B, N, 2U] (the
        LSTM's); words [B]; e [B, N+1, D or 2U]: e_g = [f_g ; b_g], with ``chart_biaffine`` alone), N = max n."""
        memory = self.encode(source_ids, training=training)  # [B, S, D]
        starts, word, ends = word_pieces(source_ids, tf.gather(self._table(_WORD_START), source_ids))
        words = tf.reduce_sum(starts, axis=1)  # [B]
        num_words = tf.maximum(tf.reduce_max(words), 1)  # N
        first = at_words(tf.where(starts > 0, word, -1), memory, num_words)  # [B, N, D]
        last = at_words(tf.where(ends, word, -1), memory, num_words)  # [B, N, D]
        ends_vectors = ops.cast(self.fencepost_ends, memory.dtype)  # [2, D] or [2, U]
        tagged = tf.concat([first, last], axis=-1)  # [B, N, 2D]
        if self.parsing.chart_lstm:  # f_g, b_g: the LSTM's forward state after word g-1, its backward one at word g
            for lstm in self.word_lstms:
                forward, backward = lstm(self.classifier_dropout(tagged, training=training), words)  # [B, N, U]
                tagged = tf.concat([forward, backward], axis=-1)  # [B, N, 2U]
            if self.parsing.chart_lstm_dropout:
                tagged = self.lstm_dropout(tagged, training=training)
                forward, backward = tf.split(tagged, 2, axis=-1)
            start, stop = ends_vectors[0], ends_vectors[1]  # [U] each
        else:  # the halves of the encoder's outputs (Kitaev & Klein, 2018)
            half = self.config.d_model // 2
            forward, backward = last[..., :half], first[..., half:]  # [B, N, D/2] each
            start, stop = ends_vectors[0, :half], ends_vectors[1, half:]
        batch = tf.shape(source_ids)[0]
        x = tf.concat([tf.broadcast_to(start[None, None, :], [batch, 1, tf.shape(forward)[2]]), forward],
                      axis=1)  # [B, N+1, ·]: fencepost g reads word g-1's
        fence = tf.range(num_words + 1)
        at_stop = tf.equal(fence[None, :], words[:, None])[..., None]  # [B, N+1, 1]: fencepost n reads STOP
        y = tf.where(at_stop, stop[None, None, :], tf.pad(backward, [[0, 0], [0, 1], [0, 0]]))  # [B, N+1, ·]
        p = self.span_hidden(tf.concat([x, -y], axis=-1))  # [B, N+1, H]: p_g
        return p, tagged, words, tf.concat([x, y], axis=-1) if self.parsing.chart_biaffine else None

    def chart(self, source_ids, training=None) -> Chart:
        """source_ids [B, S] (pieces, EOS, PAD) -> the span and tag logits over the N = max n words."""
        p, tagged, words, e = self.fenceposts(source_ids, training)
        batch, n1 = tf.shape(p)[0], tf.shape(p)[1]
        fence = tf.range(n1)
        # only the spans i < j are classified: the grid's other half is padding
        pairs = tf.cast(tf.where(fence[:, None] < fence[None, :]), tf.int32)  # [M, 2] (i, j), M = N(N+1)/2
        h = (tf.gather(p, pairs[:, 1], axis=1) - tf.gather(p, pairs[:, 0], axis=1)
             + ops.cast(self.span_bias, p.dtype))  # [B, M, H]
        h = self.classifier_dropout(ops.relu(self.span_norm(h)), training=training)
        rows = ops.cast(self.span_out(h), "float32")  # [B, M, 3C]
        if self.parsing.chart_biaffine:  # β(i, j) on the outermost row's phrase labels: classes 2..C-1 of the 3C
            on_labels = tf.reduce_sum(tf.one_hot(tf.range(FIRST_LABEL, self.num_classes), CHAIN * self.num_classes), 0)
            rows = rows + self.bracket(e, pairs, training=training)[..., None] * on_labels  # [B, M, 3C]
        grid = tf.scatter_nd(pairs, tf.transpose(rows, [1, 0, 2]), tf.stack([n1, n1, batch, tf.shape(rows)[2]]))
        spans = tf.reshape(tf.transpose(grid, [2, 0, 1, 3]), [batch, n1, n1, CHAIN, self.num_classes])  # 0 at i >= j
        t = self.tag_hidden(tagged)  # [B, N, H]
        tags = self.tag_out(self.classifier_dropout(ops.relu(self.tag_norm(t)), training=training))  # [B, N, C]
        return Chart(spans, ops.cast(tags, "float32"), words, pairs,
                     tf.reshape(rows, [batch, -1, CHAIN, self.num_classes]))

    def call(self, inputs, training=None):
        """(source_ids [B, S], target_in_ids, unread) -> span logits [B, N+1, N+1, CHAIN, C]."""
        return self.chart(inputs[0], training=training).spans

    def training_statistics(self, source_ids, target_in_ids, target_out_ids, training, label_smoothing):
        """The token statistics of the chain rows of every span i < j and every word's tag
        (``losses.token_statistics``, padding not counted): [B, M * CHAIN + N, 4], and the tree-level term."""
        chart = self.chart(source_ids, training=training)
        num_words = tf.shape(chart.tags)[1]
        spans, tags = gold_labels(target_out_ids, self._table(_KIND), self._table(_LABEL), self._table(_TAG),
                                  num_words)
        b = tf.shape(spans)[0]
        local = tf.transpose(tf.gather_nd(tf.transpose(spans, [1, 2, 0, 3]), chart.pairs), [1, 0, 2])  # [B, M, CHAIN]
        if self.parsing.chart_crf and not self.parsing.chart_crf_local:  # the first row is the CRF's alone
            local = tf.concat([tf.fill(tf.shape(local[..., :1]), PADDING), local[..., 1:]], axis=-1)
        span_stats = losses.token_statistics(tf.reshape(local, [b, -1]),
                                             tf.reshape(chart.pair_spans, [b, -1, self.num_classes]), label_smoothing)
        tag_stats = losses.token_statistics(tags, chart.tags, label_smoothing)
        stats = tf.concat([span_stats, tag_stats], axis=1)
        if self.parsing.chart_crf:
            # the summed loss gets Σ crf * (tokens / words): the CRF's loss per word (as the outside parser's)
            # beside the local loss per token
            tokens_per_word = tf.reduce_sum(stats[..., losses.REAL]) / tf.cast(tf.reduce_sum(chart.words), tf.float32)
            crf = tree_crf(chart.spans[..., 0, :], spans[..., 0], chart.words)  # [B]
            return stats, tf.reduce_sum(crf) * tf.stop_gradient(tokens_per_word)
        if not self.parsing.chart_hinge:
            return stats, 0.0
        # the summed loss gets weight * Σ hinge * (tokens / B): the mean hinge per sentence beside the token mean
        tokens_per_sentence = tf.reduce_sum(stats[..., losses.REAL]) / tf.cast(b, tf.float32)
        hinge = tree_hinge(chart.spans[..., 0, :], spans[..., 0], chart.words)  # [B]
        return stats, self.parsing.chart_hinge * tf.reduce_sum(hinge) * tf.stop_gradient(tokens_per_sentence)

    def predict_trees(self, source_ids, bonus=0.0):
        """source_ids [B, S] -> ``cky.Parse``: the best tree's chains [B, N+1, N+1, CHAIN] (label classes of its
        constituents, 0 elsewhere), tags [B, N] (tag classes), scores [B] and words [B]; ``bonus``: ``cky.parse``'s
        δ, added to every span's margin (more constituents where > 0); by the CRF's marginals with ``chart_mbr``."""
        chart = self.chart(source_ids, training=False)
        return cky.parse(chart.spans, chart.tags, chart.words, bonus, self.parsing.chart_mbr)

    # -- Keras plumbing ----------------------------------------------------------------------------

    def build(self, input_shape=None):
        if self.built:
            return
        ids = ops.ones((1, 2), dtype="int32")
        self.chart(ids, training=False)
        self.built = True

    @classmethod
    def extra_parameters(cls, recipe: Recipe) -> int:
        """START and STOP, W_1 and c_1, the span LayerNorm, W_2 and c_2; the tag classifier's three layers; with
        ``chart_lstm`` U the LSTM's layers; with ``char_filters`` F the character embeddings, the convolution and
        W_c, b_c; with ``chart_biaffine`` A the bracket scorer's two MLPs and U."""
        d, hidden, classes = recipe.model.d_model, recipe.parsing.chart_hidden, recipe.parsing.chart_labels + 2
        u = recipe.parsing.chart_lstm
        width, fencepost, word = (u, 2 * u, 2 * u) if u else (d, d, 2 * d)  # START/STOP, [f_g ; -b_g], a tag's input
        lstm = sum(2 * 4 * u * ((2 * d if i == 0 else 2 * u) + u + 1)
                   for i in range(recipe.parsing.chart_lstm_layers if u else 0))
        span = 2 * width + fencepost * hidden + hidden + 2 * hidden + (hidden + 1) * CHAIN * classes
        tag = (word + 1) * hidden + 2 * hidden + (hidden + 1) * classes
        f = recipe.parsing.char_filters
        chars = CHAR_ROWS * CHAR_EMBEDDING + (CHAR_WIDTH * CHAR_EMBEDDING + 1) * f + (f + 1) * d if f else 0
        return span + tag + lstm + chars + biaffine.parameters(fencepost, recipe.parsing.chart_biaffine)


def chart_texts(classes: ChartClasses) -> Tuple[List[str], List[str]]:
    """(label texts by class, "" for PADDING and EMPTY; tag texts by class, "" for PADDING): what the linearized
    tree writes for a class (``cky.linearize``)."""
    return ["", ""] + list(classes.labels), [""] + list(classes.tags)
