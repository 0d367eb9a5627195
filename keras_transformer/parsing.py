"""The constituency parser (§6.3): sentences in, trees out, as a ``tf.Module``, a SavedModel, and over many lines.

    Parser(model, tokenizer, recipe)      the module; ``export.export`` writes it for a corpus-ptb recipe
    load_parser(model_arg, checkpoint="latest", data_dir=None) -> LoadedParser   a SavedModel or a work directory
    parse_lines(parser, sentences, batch_size=32, beam_size=None, alpha=None, extra_length=None, constrained=True)
        -> Parses(trees, linearized, scores, repaired, problems)
    evaluate(parser, gold_trees, ...) -> parse_scoring.score's dict + repaired, seconds, decoding options

Signatures of the SavedModel (decoding defaults from the recipe; §6.3: beam 21, α 0.3, input + 300):

    serving_default     inputs [B] string (space-separated words, PTB tokens)
        -> trees [B] string "(S (NP (XX Ms.) (XX Haag)) (VP (XX plays) (NP (XX Elianti))) (XX .))",
           linearized [B] string "(S (NP XX XX ) (VP XX (NP XX ) ) XX )", scores [B] float32
    parse_with_options  inputs, beam_size [] int32, alpha [] float32, extra_length [] int32 -> the same

The search is constrained (``decoding/tree_constraint.py``): every output is
one tree with exactly one slot per word, and the words go into the slots in
the graph (a word's "(" and ")" written -LRB- and -RRB-; POS tags are the
placeholder XX: the parser brackets, it does not tag). Inputs are checked as
a translator's are (``export.checked_rank``, ``checked_options``). A
sentence longer than the model's inputs (``export.max_source_length``) is
parsed over its first words; the rest are put under the root, after them.
A batch is dealt to ``parallel_searches`` constrained searches run at once,
as a translator's (``export.py``, ``decoding/parallel.py``; the same trees).

``parse_lines`` checks every tree in Python (one tree over exactly the
input's words) and repairs any that is not (``trees.repair``), counting them:
0 with the constraint, by construction. ``constrained=False`` (work
directories only) decodes with the plain beam search and repairs in Python,
which measures how often a free decoder's output is not a tree.
"""

from __future__ import annotations

import collections
import json
import re
import time
import types
from pathlib import Path
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from keras_transformer import PAD_ID, export, inference, parse_scoring
from keras_transformer.config import PARALLEL_SEARCHES
from keras_transformer.data import trees as trees_lib
from keras_transformer.data.tokenizer import append_eos
from keras_transformer.decoding import translate_ids, tree_constraint

SIGNATURES = ("serving_default", "parse_with_options")
_WHITESPACE = r"[ \t\n\r\f\v]+"  # how words are split, in the graph and in Python alike


def split_words(sentence: str) -> List[str]:
    return [w for w in re.split(_WHITESPACE, sentence) if w]


def fill_slots(linearized, inputs, slots):
    """linearized [B] ("(S (NP XX XX ) ...)"), inputs [B] sentences, slots [B] int32 -> trees [B] string.

    The k-th ``XX`` of row b becomes "(XX word_k)"; words past the row's slots go under the root, after them.
    """
    words = tf.strings.split(inputs)  # [B, (n)] split at runs of ASCII whitespace, as split_words
    words = words.with_flat_values(tf.strings.regex_replace(tf.strings.regex_replace(
        words.flat_values, r"\(", "-LRB-"), r"\)", "-RRB-"))  # [B, (n)]
    flat_words = tf.concat([words.flat_values, [trees_lib.SLOT]], axis=0)  # [W + 1]: a spare for missing words
    tokens = tf.strings.split(linearized, sep=" ")  # [B, (m)]
    flat = tokens.flat_values  # [M]
    row = tokens.value_rowids()  # [M]
    is_slot = tf.equal(flat, trees_lib.SLOT)  # [M]
    ordinal = tf.cumsum(tf.cast(is_slot, tf.int64), exclusive=True)  # [M] slots before each token, all rows
    ordinal -= tf.gather(tf.concat([[0], tf.cumsum(tf.math.bincount(
        tf.cast(row, tf.int32), weights=tf.cast(is_slot, tf.int64), minlength=tf.shape(words.row_lengths())[0],
        dtype=tf.int64))], axis=0), row)  # [M] slots before each token in its own row
    lengths = tf.gather(words.row_lengths(), row)  # [M]
    index = tf.where(ordinal < lengths, tf.gather(words.row_starts(), row) + ordinal, tf.size(flat_words,
                                                                                              tf.int64) - 1)
    filled = tf.where(is_slot, "(XX " + tf.gather(flat_words, index) + ")", flat)  # [M]
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


class Parser(tf.Module):
    """Constrained beam-search parsing of raw sentences with one model and its tokenizer (§6.3)."""

    def __init__(self, model, tokenizer, recipe, name: str = "parser", parallel_searches: int = PARALLEL_SEARCHES):
        super().__init__(name=name)
        self.parallel_searches = parallel_searches  # searches a batch is dealt to (decoding/parallel.py)
        self._untracked = types.SimpleNamespace(model=model)  # held out of the SavedModel's graph (export.py)
        self.model_variables = [v.value for v in model.variables]
        self._tokenizer = tokenizer
        self._tokens = tree_constraint.token_kinds(tokenizer)
        self._max_source_length = export.max_source_length(recipe)
        self._defaults = (recipe.decode.beam_size, recipe.decode.alpha, recipe.decode.extra_length)
        self.parse_with_options = tf.function(self._with_options, input_signature=[export._STRINGS, *export._OPTIONS])
        self.serving_default = tf.function(self._with_defaults, input_signature=[export._STRINGS])
        # Not an attribute of the module, so not saved in the SavedModel: for measuring, from work directories.
        self._untracked.unconstrained = tf.function(self._unconstrained,
                                                    input_signature=[export._STRINGS, *export._OPTIONS])

    @property
    def model(self):
        return self._untracked.model

    @property
    def linearize_unconstrained(self):
        """(inputs, beam_size, alpha, extra_length) -> {"linearized", "scores"} of the plain beam search."""
        return self._untracked.unconstrained

    @property
    def max_source_length(self) -> int:
        return self._max_source_length

    def signatures(self) -> dict:
        return {name: getattr(self, name) for name in SIGNATURES}

    def _with_options(self, inputs, beam_size, alpha, extra_length):
        return self._parse(export.checked_rank(inputs, "inputs"), *export.checked_options(beam_size, alpha,
                                                                                          extra_length))

    def _with_defaults(self, inputs):
        return self._parse(export.checked_rank(inputs, "inputs"), *self._defaults)

    def _source_ids(self, inputs):
        """inputs [B] -> source_ids [B, S]: subwords + EOS, PAD after, truncated as in training."""
        source_ids = append_eos(self._tokenizer.tokenize(inputs)).to_tensor(PAD_ID)  # [B, S]
        return export.truncate_source(source_ids, self._max_source_length)  # [B, S]

    def _parse(self, inputs, beam_size, alpha, extra_length):
        source_ids = self._source_ids(inputs)  # [B, S]
        sequences, scores = tree_constraint.parse_ids(self.model, source_ids, self._tokens, beam_size, alpha,
                                                      extra_length, self.parallel_searches)  # [B, K, T], [B, K]
        linearized = self._tokenizer.detokenize(sequences[:, 0, :])  # [B]
        slots = tree_constraint.count_words(source_ids, tf.constant(self._tokens.word_starts, tf.bool))  # [B]
        return {"trees": fill_slots(linearized, inputs, slots), "linearized": linearized, "scores": scores[:, 0]}

    def _unconstrained(self, inputs, beam_size, alpha, extra_length):
        inputs = export.checked_rank(inputs, "inputs")  # [B]
        sequences, scores = translate_ids(self.model, self._source_ids(inputs), beam_size, alpha, extra_length,
                                          self.parallel_searches)
        return {"linearized": self._tokenizer.detokenize(sequences[:, 0, :]), "scores": scores[:, 0]}


class LoadedParser(NamedTuple):
    fn: Callable  # (inputs [B], beam_size, alpha, extra_length) -> {"trees", "linearized", "scores"}
    unconstrained: Optional[Callable]  # the plain beam search (work directories): -> {"linearized", "scores"}
    defaults: Tuple[int, float, int]  # the recipe's (beam_size, alpha, extra_length)
    recipe: object  # the config.Recipe it was trained with
    description: str
    owner: object  # keeps the functions' variables alive


def load_parser(model_arg, checkpoint: str = "latest", data_dir=None) -> LoadedParser:
    """A parser SavedModel (kt-export of a corpus-ptb run) or a parser's training work directory."""
    from keras_transformer import checkpoints
    from keras_transformer.config import Recipe

    path = Path(model_arg)
    if inference.is_saved_model(path):
        if checkpoint != "latest":
            raise ValueError(f"--checkpoint: {path} is an exported SavedModel; checkpoints apply to work directories")
        import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

        loaded = export.load_saved_model(path)
        if "parse_with_options" not in loaded.signatures:
            raise ValueError(f"--model: {path} is not a parser (no parse_with_options signature); kt-translate "
                             "serves translators")
        info = json.loads(Path(path, "assets", export.EXPORT_INFO).read_text())
        signature = loaded.signatures["parse_with_options"]

        def call(inputs, beam_size, alpha, extra_length):
            return signature(inputs=inputs, beam_size=beam_size, alpha=alpha, extra_length=extra_length)

        d = info["decode"]
        return LoadedParser(call, None, (d["beam_size"], d["alpha"], d["extra_length"]),
                            Recipe.from_dict(info["recipe"]), str(path), loaded)
    if not path.is_dir():
        raise FileNotFoundError(f"--model: {path} is neither a SavedModel nor a training work directory")
    model, recipe, tok = checkpoints.load_for_inference(path, checkpoint, data_dir)
    if recipe.data.corpus != "ptb":
        raise ValueError(f"--model: {path} was trained on corpus {recipe.data.corpus}, not a treebank; "
                         "kt-translate serves translators")
    parser = Parser(model, tok, recipe)
    d = recipe.decode
    return LoadedParser(parser.parse_with_options, parser.linearize_unconstrained,
                        (d.beam_size, d.alpha, d.extra_length), recipe,
                        f"{path} ({checkpoints.resolve_checkpoint(path, checkpoint)})", parser)


class Parses(NamedTuple):
    trees: List[str]  # one line of PTB brackets per sentence, words in place, POS tags XX
    linearized: List[str]  # the decoder's best sequence, as it came
    scores: np.ndarray  # [N] log P / lp of the best sequence
    repaired: int  # outputs that were not one tree over exactly the sentence's words
    problems: collections.Counter  # what repair fixed, by kind


def _checked(tree: str, words: List[str]) -> bool:
    try:
        found = trees_lib.read_trees(tree)
    except ValueError:
        return False
    return len(found) == 1 and trees_lib.words(found[0]) == [trees_lib.escape_word(w) for w in words]


def parse_lines(parser: LoadedParser, sentences: Sequence[str], batch_size: int = 32,
                beam_size: Optional[int] = None, alpha: Optional[float] = None,
                extra_length: Optional[int] = None, constrained: bool = True) -> Parses:
    """Trees of ``sentences`` (space-separated words), in input order; None options take the recipe's."""
    if not constrained and parser.unconstrained is None:
        raise ValueError("constrained: unconstrained decoding needs a work directory, not a SavedModel")
    options = tuple(d if v is None else v for v, d in zip((beam_size, alpha, extra_length), parser.defaults))
    tensors = (tf.constant(options[0], tf.int32), tf.constant(options[1], tf.float32),
               tf.constant(options[2], tf.int32))
    n = len(sentences)
    trees, linearized, scores = [""] * n, [""] * n, np.zeros([n], np.float32)
    repaired, problems = 0, collections.Counter()
    for batch in inference.length_batches(list(sentences), batch_size):
        inputs = tf.constant([sentences[i] for i in batch], tf.string)
        out = (parser.fn if constrained else parser.unconstrained)(inputs, *tensors)
        made = out["trees"].numpy() if constrained else [b""] * len(batch)
        for i, tree, sequence, score in zip(batch, made, out["linearized"].numpy(), out["scores"].numpy()):
            words = split_words(sentences[i])
            tree, sequence = tree.decode("utf-8"), sequence.decode("utf-8")
            if not (constrained and (_checked(tree, words) if words else not tree)):
                fixed = trees_lib.repair(sequence, len(words))
                if fixed.repaired or constrained:
                    repaired += 1
                    problems.update(fixed.problems or ("tree does not hold the sentence's words",))
                tree = trees_lib.to_string(trees_lib.delinearize(fixed.sequence, words)) if words else ""
            trees[i], linearized[i], scores[i] = tree, sequence, score
    return Parses(trees, linearized, scores, repaired, problems)


def evaluate(parser: LoadedParser, gold_trees: Sequence[trees_lib.Tree], batch_size: int = 32,
             beam_size: Optional[int] = None, alpha: Optional[float] = None, extra_length: Optional[int] = None,
             constrained: bool = True) -> Tuple[dict, Parses]:
    """Parses the gold trees' sentences and scores them (``parse_scoring.score``, EVALB COLLINS.prm).

    Returns (scores + {"repaired", "constrained", "seconds", "beam_size", "alpha", "extra_length"}, the parses).
    """
    sentences = [" ".join(trees_lib.words(tree)) for tree in gold_trees]
    start = time.time()
    parses = parse_lines(parser, sentences, batch_size, beam_size, alpha, extra_length, constrained)
    seconds = time.time() - start
    test = [trees_lib.read_trees(tree)[0] for tree in parses.trees]
    scores = parse_scoring.score(gold_trees, test)
    options = dict(zip(("beam_size", "alpha", "extra_length"), (
        d if v is None else v for v, d in zip((beam_size, alpha, extra_length), parser.defaults))))
    return dict(scores, repaired=parses.repaired, repair_problems=dict(parses.problems), constrained=constrained,
                seconds=round(seconds, 2), **options), parses
