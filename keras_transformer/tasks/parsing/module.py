"""The constituency parser an export serves (§6.3): sentences in, trees out.

    Parser(model, tokenizer, recipe, parallel_searches=2)   a ``serving.module.ServingModule``
    ChartParsing(model, tokenizer, recipe)                   the same signatures over a ``chart.ChartParser``
    EnsembleChartParsing(models, tokenizer, recipe, weights)  ... over chart parsers of one tokenizer
    parser_module(model, tokenizer, recipe, **kwargs)         the one of the two that serves ``model``
    fill_slots(linearized, inputs, slots) -> trees [B]      the words into the decoder's slots, in the graph
    split_words(sentence) -> [str]                           how words are split, as the graph splits them

Signatures of the SavedModel (decoding defaults from the recipe; §6.3: beam 21, α 0.3, input + 300):

    serving_default     inputs [B] string (space-separated words, PTB tokens)
        -> trees [B] string "(S (NP (XX Ms.) (XX Haag)) (VP (XX plays) (NP (XX Elianti))) (XX .))",
           linearized [B] string "(S (NP XX XX ) (VP XX (NP XX ) ) XX )", scores [B] float32,
           truncated [B] bool (more subwords than the model reads: see below)
    parse_with_options  inputs, beam_size [] int32, alpha [] float32, extra_length [] int32 -> the same

The search is constrained (``constraint.py``): every output is one tree with exactly one slot per word, and
the words go into the slots in the graph (a word's "(" and ")" written -LRB- and -RRB-; POS tags are the
placeholder XX: the parser brackets, it does not tag). Inputs are checked as a translator's are
(``serving/checks.py``). A sentence longer than the model's inputs (``checks.max_source_length``) is parsed
over its first words (``truncated`` True); the rest are put under the root, after them. A blank input
(empty or whitespace only) is not parsed: its tree is "" (``serving.module``). A batch is dealt to ``parallel_searches``
constrained searches run at once, as a translator's (``decoding/parallel.py``; the same trees).
"""

from __future__ import annotations

import re
from typing import List

import tensorflow as tf

from keras_transformer.decoding import translate_ids
from keras_transformer.serving import checks
from keras_transformer.serving.module import EnsembleMembers, ServingModule
from keras_transformer.tasks.parsing import chart, cky, constraint
from keras_transformer.tasks.parsing import trees as trees_lib

_WHITESPACE = r"[ \t\n\r\f\v]+"  # how words are split, in the graph and in Python alike


def split_words(sentence: str) -> List[str]:
    return [w for w in re.split(_WHITESPACE, sentence) if w]


def fill_slots(linearized, inputs, slots):
    """linearized [B] ("(S (NP XX XX ) ...)"), inputs [B] sentences, slots [B] int32 -> trees [B] string.

    The k-th leaf of row b becomes "(XX word_k)" (a slot) or "(NN word_k)" (a tag leaf "@NN"); words past the
    row's leaves go under the root, after them as "(XX word)".
    """
    words = tf.strings.split(inputs)  # [B, (n)] split at runs of ASCII whitespace, as split_words
    words = words.with_flat_values(tf.strings.regex_replace(tf.strings.regex_replace(
        words.flat_values, r"\(", "-LRB-"), r"\)", "-RRB-"))  # [B, (n)]
    flat_words = tf.concat([words.flat_values, [trees_lib.SLOT]], axis=0)  # [W + 1]: a spare for missing words
    tokens = tf.strings.split(linearized, sep=" ")  # [B, (m)]
    flat = tokens.flat_values  # [M]
    row = tokens.value_rowids()  # [M]
    is_tag = tf.strings.regex_full_match(flat, re.escape(trees_lib.TAG_LEAF) + ".+")  # [M] "@NN": a tag leaf
    is_leaf = tf.logical_or(tf.equal(flat, trees_lib.SLOT), is_tag)  # [M] a leaf
    ordinal = tf.cumsum(tf.cast(is_leaf, tf.int64), exclusive=True)  # [M] leaves before each token, all rows
    ordinal -= tf.gather(tf.concat([[0], tf.cumsum(tf.math.bincount(
        tf.cast(row, tf.int32), weights=tf.cast(is_leaf, tf.int64), minlength=tf.shape(words.row_lengths())[0],
        dtype=tf.int64))], axis=0), row)  # [M] slots before each token in its own row
    lengths = tf.gather(words.row_lengths(), row)  # [M]
    index = tf.where(ordinal < lengths, tf.gather(words.row_starts(), row) + ordinal, tf.size(flat_words,
                                                                                              tf.int64) - 1)
    tag = tf.where(is_tag, tf.strings.regex_replace(flat, "^" + re.escape(trees_lib.TAG_LEAF), ""),
                   trees_lib.SLOT)  # [M] a leaf's POS tag, XX for a slot
    filled = tf.where(is_leaf, "(" + tag + " " + tf.gather(flat_words, index) + ")", flat)  # [M]
    trees = tf.strings.reduce_join(tokens.with_flat_values(filled), axis=1, separator=" ")  # [B]
    trees = tf.strings.regex_replace(trees, r" \)", ")")  # "(XX Haag) )" -> "(XX Haag))", as trees.to_string
    position = tf.ragged.range(words.row_lengths())  # [B, (n)]
    past = position.flat_values >= tf.repeat(tf.cast(slots, tf.int64), words.row_lengths())  # [W]
    rest = tf.ragged.boolean_mask(words, position.with_flat_values(past))  # [B, (n - slots)]
    rest = tf.strings.reduce_join(rest.with_flat_values("(XX " + rest.flat_values + ")"), axis=1,
                                  separator=" ")  # [B]
    ends = tf.maximum(tf.strings.length(trees) - 1, 0)  # [B]
    closed = tf.strings.substr(trees, tf.zeros_like(ends), ends) + " " + rest + ")"  # [B]
    trees = tf.where(tf.equal(rest, ""), trees, tf.where(tf.equal(trees, ""), "(S " + rest + ")", closed))
    return trees


class Parser(ServingModule):
    """Constrained beam-search parsing of raw sentences with one model and its tokenizer (§6.3)."""

    OPTIONS_SIGNATURE = "parse_with_options"

    def __init__(self, model, tokenizer, recipe, with_text: bool = True, name: str = "parser", **kwargs):
        if not with_text or tokenizer is None:
            raise ValueError("ids_only: a parser's export is text in, trees out; it has no ids-only form")
        super().__init__(model, tokenizer, recipe, True, name, **kwargs)
        self._tokens = constraint.token_kinds(tokenizer)  # which pieces open, close and fill a slot
        # Not an attribute of the module, so not saved in the SavedModel: for measuring, from work directories.
        self._untracked.unconstrained = tf.function(self._unconstrained,
                                                    input_signature=[checks.STRINGS, *checks.OPTIONS],
                                                    autograph=False)

    @property
    def linearize_unconstrained(self):
        """(inputs, beam_size, alpha, extra_length) -> {"linearized", "scores"} of the plain beam search."""
        return self._untracked.unconstrained

    def _decode_text(self, inputs, beam_size, alpha, extra_length, nbest):
        """The best tree of each input (no n-best outputs, whatever ``nbest``): each search stops once its best
        hypothesis is settled (``num_hypotheses`` 1)."""
        source_ids, truncated = self.encode(inputs)  # [B, S], [B]
        sequences, scores = constraint.parse_ids(self.model, source_ids, self._tokens, beam_size, alpha,
                                                 extra_length, self.parallel_searches,
                                                 num_hypotheses=1)  # [B, K, T], [B, K]
        linearized = self.tokenizer.detokenize(sequences[:, 0, :])  # [B]
        slots = constraint.count_words(source_ids, tf.constant(self._tokens.word_starts, tf.bool))  # [B]
        return {"trees": fill_slots(linearized, inputs, slots), "linearized": linearized, "scores": scores[:, 0],
                "truncated": truncated}

    def _unconstrained(self, inputs, beam_size, alpha, extra_length):
        inputs = checks.checked_rank(inputs, "inputs")  # [B]
        sequences, scores = translate_ids(self.model, self.source_ids(inputs), beam_size, alpha, extra_length,
                                          self.parallel_searches, num_hypotheses=1)
        return {"linearized": self.tokenizer.detokenize(sequences[:, 0, :]), "scores": scores[:, 0]}


class ChartParsing(ServingModule):
    """A chart parser's export (``chart.py``): the ``Parser``'s signatures and outputs, decoded by CKY over the
    span scores. α is the constituent bonus δ added to every span's margin (``cky.py``: α > 0 writes more
    constituents; the recipe's α is chosen on dev); beam_size and extra_length are accepted and not read (CKY is
    exact). ``scores`` is the tree's sum of span margins, ``linearized`` the tree with tag leaves, and the POS tags
    are the parser's own."""

    OPTIONS_SIGNATURE = Parser.OPTIONS_SIGNATURE

    def __init__(self, model, tokenizer, recipe, with_text: bool = True, name: str = "parser", **kwargs):
        if not with_text or tokenizer is None:
            raise ValueError("ids_only: a parser's export is text in, trees out; it has no ids-only form")
        kwargs.pop("parallel_searches", None)  # one CKY per batch: nothing to deal out
        super().__init__(model, tokenizer, recipe, True, name, **kwargs)
        self._label_texts, self._tag_texts = chart.chart_texts(chart.chart_classes(constraint.token_kinds(tokenizer)))

    def _decode_text(self, inputs, beam_size, alpha, extra_length, nbest):
        source_ids, truncated = self.encode(inputs)  # [B, S], [B]
        parse = self.predict_trees(source_ids, alpha)
        linearized = cky.linearize(parse.chains, parse.tags, parse.words, self._label_texts, self._tag_texts)
        return {"trees": fill_slots(linearized, inputs, parse.words), "linearized": linearized,
                "scores": parse.scores, "truncated": truncated}

    def predict_trees(self, source_ids, bonus) -> cky.Parse:
        return self.model.predict_trees(source_ids, bonus)


class EnsembleChartParsing(EnsembleMembers, ChartParsing):
    """``ChartParsing`` over chart parsers of one tokenizer (e.g. seeds of a recipe): CKY over the weighted mean of
    their span and tag log-probabilities (``ensemble_parse``), the first model's recipe and tokenizer."""

    def __init__(self, models, tokenizer, recipe, weights=None, **kwargs):
        if not all(isinstance(m, chart.ChartParser) for m in models):
            raise ValueError("ensemble: parsers ensemble as chart parsers (chart_labels > 0) only; a "
                             "sequence-to-sequence parser's outputs are not scored span by span")
        if len({m.num_classes for m in models}) != 1:
            raise ValueError(f"ensemble: the parsers have room for different label counts "
                             f"({', '.join(str(m.parsing.chart_labels) for m in models)} chart_labels)")
        super().__init__(models[0], tokenizer, recipe, **kwargs)
        self.hold_members(models, weights)

    def predict_trees(self, source_ids, bonus) -> cky.Parse:
        return ensemble_parse(self._ensemble.models, self.weights, source_ids, bonus)


def ensemble_parse(models, weights, source_ids, bonus=0.0) -> cky.Parse:
    """``cky.parse`` of Σ_m w_m log p_m for each span's chain rows and each word's tag (a product of the models'
    distributions, renormalised by ``cky.parse``), as a translation ensemble averages its step log-probabilities.
    source_ids [B, S]; weights summing to 1."""
    charts = [model.chart(source_ids, training=False) for model in models]

    def mean(field):  # [B, N+1, N+1, CHAIN, C] or [B, N, C]
        return tf.add_n([w * tf.nn.log_softmax(getattr(c, field), axis=-1) for w, c in zip(weights, charts)])

    return cky.parse(mean("spans"), mean("tags"), charts[0].words, bonus, models[0].parsing.chart_mbr)


def parser_module(model, tokenizer, recipe, **kwargs) -> ServingModule:
    """The module that serves a parsing model: ``ChartParsing`` for a ``chart.ChartParser``, else ``Parser``."""
    module_class = ChartParsing if isinstance(model, chart.ChartParser) else Parser
    return module_class(model, tokenizer, recipe, **kwargs)
