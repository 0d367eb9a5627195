"""The parser's additions to the model (§6.3; none of them in the paper): ``ParsingConfig``, a recipe's ``parsing``
section, read by ``tasks/parsing/model.py``. Each field's docstring is its flag's help (``--align_words``)."""

from __future__ import annotations

import dataclasses

from keras_transformer.config.common import _require


@dataclasses.dataclass(frozen=True)
class ParsingConfig:
    """What the parsing task adds to the decoder's input and to the training loss, or the chart parser that replaces
    the decoder (docs/parsing.md)."""

    align_words: bool = False
    """Parsing (§6.3; not in the paper): add the encoder output of the next word to bracket (word k, k = leaves
    written so far; Ma et al., 2017) to the decoder input, through a learned D x D projection (docs/parsing.md)."""
    word_span: bool = False
    """Parsing, with --align_words: also the encoder outputs at the last piece of word k and of word k-1, the gap
    where brackets close and open (Stern et al., 2017), through a 3D x D projection (docs/parsing.md)."""
    bracket_depth: bool = False
    """Parsing, with --align_words: also a learned embedding of the brackets open after the prefix (depths past 63
    share one row; docs/parsing.md)."""
    tag_loss: float = 0.0
    """Parsing, with --align_words and tag leaves: weight of an auxiliary training loss in which the encoder output
    at each word's first piece predicts its POS tag (Søgaard & Goldberg, 2016); 0: off (docs/parsing.md)."""
    chart_labels: int = 0
    """Parsing: > 0 replaces the decoder by a span classifier over the encoder's fenceposts and CKY decoding
    (a chart parser: Stern et al., 2017; Kitaev & Klein, 2018), with room for this many phrase labels and as many
    POS tags (the tokenizer's, counted when training starts); 0: the paper's sequence-to-sequence parser."""
    chart_hidden: int = 250
    """Parsing, with --chart_labels: the hidden width of the span and tag classifiers (Kitaev & Klein, 2018)."""
    chart_hinge: float = 0.0
    """Parsing, with --chart_labels: weight of a tree-level loss added to the local one, per sentence: Kitaev &
    Klein's (2018) hinge, the loss-augmented best tree's score over the gold tree's (tasks/parsing/chart.py);
    0: local span classification alone."""
    chart_crf: bool = False
    """Parsing, with --chart_labels: train the spans' outermost labels as a tree CRF (the log-probability of the
    gold tree among all binary trees, by the inside algorithm; Zhang et al., 2020, the outside parser's loss) instead
    of classifying each span on its own (tasks/parsing/chart.py); not with --chart_hinge."""
    chart_crf_local: bool = False
    """Parsing, with --chart_crf: keep the outermost labels' local loss beside the CRF (both terms summed) instead
    of replacing it."""
    chart_mbr: float = 0.0
    """Parsing, with --chart_crf: > 0 decodes by minimum Bayes risk, CKY over each span's CRF marginal probability
    of being a constituent less this threshold τ (the outside parser's decoding; α lowers τ), instead of the CRF's
    most probable tree (tasks/parsing/cky.py); 0: off."""
    chart_lstm: int = 0
    """Parsing, with --chart_labels: > 0 reads the fenceposts from a bidirectional LSTM of this many units per
    direction over the encoder's words (Stern et al., 2017; Gaddy et al., 2018), --chart_lstm_layers deep, instead of
    from the encoder's outputs split in halves (Kitaev & Klein, 2018); 0: off (tasks/parsing/chart.py)."""
    chart_lstm_layers: int = 1
    """Parsing, with --chart_lstm: the LSTM's layers (2 over the encoder's 4 in ptb_sample_chart, as Stern et al.,
    2017 read words)."""
    chart_lstm_dropout: float = 0.0
    """Parsing, with --chart_lstm: dropout on the last LSTM layer's outputs, before the span and tag classifiers (the
    outside parser's dropout after its BiLSTM); 0: none there (dropout is still applied before each LSTM layer)."""
    chart_biaffine: int = 0
    """Parsing, with --chart_labels: > 0 adds to every phrase label of a span's outermost row a bracket score, biaffine
    over two MLPs of this width at its fenceposts (Dozat & Manning, 2017; Zhang et al., 2020, the outside parser's span
    scorer; tasks/parsing/chart.py); 0: off."""
    char_filters: int = 0
    """Parsing, with --chart_labels: > 0 adds to each sentence piece's input a vector of its word's characters, this
    many width-3 convolution filters max-pooled over the word (Ma & Hovy, 2016), for rare words (Kitaev & Klein,
    2018 read characters too); 0: off."""

    def __post_init__(self):
        _require(not self.word_span or self.align_words, "word_span", "needs align_words")
        _require(not self.bracket_depth or self.align_words, "bracket_depth", "needs align_words")
        _require(not self.tag_loss or self.align_words, "tag_loss", "needs align_words")
        _require(self.tag_loss >= 0.0, "tag_loss", f"must be >= 0, got {self.tag_loss}")
        _require(self.chart_labels >= 0, "chart_labels", f"must be >= 0, got {self.chart_labels}")
        _require(self.chart_hidden > 0, "chart_hidden", f"must be positive, got {self.chart_hidden}")
        _require(self.chart_lstm >= 0, "chart_lstm", f"must be >= 0, got {self.chart_lstm}")
        _require(not self.chart_lstm or self.chart_labels, "chart_lstm", "needs chart_labels")
        _require(self.chart_lstm_layers > 0, "chart_lstm_layers", f"must be positive, got {self.chart_lstm_layers}")
        _require(0.0 <= self.chart_lstm_dropout < 1.0, "chart_lstm_dropout",
                 f"must be in [0, 1), got {self.chart_lstm_dropout}")
        _require(not self.chart_lstm_dropout or self.chart_lstm, "chart_lstm_dropout", "needs chart_lstm")
        _require(self.chart_biaffine >= 0, "chart_biaffine", f"must be >= 0, got {self.chart_biaffine}")
        _require(not self.chart_biaffine or self.chart_labels, "chart_biaffine", "needs chart_labels")
        _require(self.char_filters >= 0, "char_filters", f"must be >= 0, got {self.char_filters}")
        _require(not self.char_filters or self.chart_labels, "char_filters", "needs chart_labels")
        _require(self.chart_hinge >= 0.0, "chart_hinge", f"must be >= 0, got {self.chart_hinge}")
        _require(not self.chart_hinge or self.chart_labels, "chart_hinge", "needs chart_labels")
        _require(not self.chart_crf or self.chart_labels, "chart_crf", "needs chart_labels")
        _require(not (self.chart_crf and self.chart_hinge), "chart_crf", "one tree-level loss: not with chart_hinge")
        _require(not self.chart_crf_local or self.chart_crf, "chart_crf_local", "needs chart_crf")
        _require(0.0 <= self.chart_mbr < 1.0, "chart_mbr", f"must be in [0, 1), got {self.chart_mbr}")
        _require(not self.chart_mbr or self.chart_crf, "chart_mbr", "needs chart_crf")
        _require(not (self.chart_labels and self.align_words), "chart_labels",
                 "a chart parser has no decoder to align; not with align_words")
