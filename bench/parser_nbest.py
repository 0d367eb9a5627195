"""The parser's K-best lists reranked on a treebank split: does anything beat the search's own best tree?

    python bench/parser_nbest.py                                    # the shipped parser on dev (127 trees)
    python bench/parser_nbest.py --model=exports/wd04 --alpha=0.3 --bonus=0.5,1 --gamma=0.4,0.5

The constrained search (``tasks/parsing/constraint.py``, beam K) returns every sentence's K finished trees with
their scores s = log P / lp. Each is read as its labeled spans (label, first word, end) and one tree per
sentence is picked by

    best             the search's: max s (what kt-evaluate-parser scores at the same beam and α)
    bonus β          max s + β · |spans|: a reward per constituent, for a parser whose recall trails its precision
    expected F1 τ    max Σ_j p_j F1(spans, spans_j), p = softmax(τ s) over the K trees (minimum Bayes risk)
    posterior γ τ    max Σ_{c in spans} (P(c) - γ), P(c) = Σ_j p_j [c in spans_j]: a span is worth keeping when
                     more likely than γ (lower γ, more spans; Goodman 1996's labeled-recall rule within the K)

and the picks are scored against the gold trees (``metric.score``, EVALB COLLINS). Choose on dev; the test
split is for the end. Prints a markdown table and a JSON line.
"""

import collections
import json
import math
import sys
from pathlib import Path

from absl import app, flags

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FLAGS = flags.FLAGS


def define_flags():
    """Defined when run as a script only, so that importing the module (its test) defines no flag."""
    flags.DEFINE_string("model", "saved_models/ptb_sample", "An exported parser (SavedModel directory).")
    flags.DEFINE_string("split", "dev", "A split of the parser's treebank (kt-evaluate-parser's --split).")
    flags.DEFINE_string("data_dir", None, "Where the treebank is (default: KT_DATA_DIR, else ../shared/data).")
    flags.DEFINE_integer("num_sentences", 0, "Parse the first N trees of the split only (0: all).")
    flags.DEFINE_integer("beam_size", 0, "Beam K (0: the recipe's, 21 for ptb_sample).")
    flags.DEFINE_float("alpha", 0.0, "Length penalty α of the search (the shipped parser's dev choice is 0).")
    flags.DEFINE_list("bonus", ["0.25", "0.5", "1", "2"], "β values of the bracket bonus.")
    flags.DEFINE_list("tau", ["0.5", "1"], "τ values (posterior temperature) of both Bayes-risk pickers.")
    flags.DEFINE_list("gamma", ["0.2", "0.3", "0.4", "0.5"], "γ values of the posterior picker.")


def labeled_spans(sequence: str) -> collections.Counter:
    """A linearized tree -> Counter of (label, first word, end word): its constituents, a multiset."""
    from keras_transformer.tasks.parsing import trees

    spans, stack, words = collections.Counter(), [], 0
    for token in sequence.split():
        if trees.is_open(token):
            stack.append((token[1:], words))
        elif trees.is_leaf(token):
            words += 1
        elif token == trees.CLOSE:
            label, start = stack.pop()
            spans[(label, start, words)] += 1
    return spans


def f1(a: collections.Counter, b: collections.Counter) -> float:
    both, total = sum((a & b).values()), sum(a.values()) + sum(b.values())
    return 2.0 * both / total if total else 1.0


def posteriors(scores, tau):
    top = max(scores)
    weights = [math.exp(tau * (s - top)) for s in scores]
    total = sum(weights)
    return [w / total for w in weights]


def pick(rule: str, value: float, tau: float, scores, spans) -> int:
    """The index of the tree ``rule`` picks among one sentence's K (module docstring)."""
    k = range(len(scores))
    if rule == "best":
        return 0
    if rule == "bonus":
        return max(k, key=lambda i: scores[i] + value * sum(spans[i].values()))
    p = posteriors(scores, tau)
    if rule == "expected F1":
        return max(k, key=lambda i: sum(p[j] * f1(spans[i], spans[j]) for j in k))
    mass = collections.Counter()
    for j in k:
        for span in spans[j]:
            mass[span] += p[j]
    return max(k, key=lambda i: sum((mass[span] - value) * n for span, n in spans[i].items()))


def nbest(model, recipe, tokenizer, sentences, beam_size, alpha):
    """(K, [(linearized, score)] of every finished tree of each sentence, best first)."""
    import tensorflow as tf

    from keras_transformer.decoding.lines import length_batches
    from keras_transformer.tasks.parsing import constraint
    from keras_transformer.tasks.parsing.module import Parser

    parser = Parser(model, tokenizer, recipe)
    tokens = constraint.token_kinds(tokenizer)
    beam_size = beam_size or recipe.decode.beam_size
    out = [None] * len(sentences)
    for batch in length_batches(list(sentences), 32):
        source_ids = parser.source_ids(tf.constant([sentences[i] for i in batch]))  # [B, S]
        sequences, scores = constraint.parse_ids(model, source_ids, tokens, beam_size, alpha,
                                                 recipe.decode.extra_length, parser.parallel_searches)
        b, k, t = sequences.shape  # [B, K, T]
        text = tokenizer.detokenize(tf.reshape(sequences, [b * k, t])).numpy().reshape(b, k)
        for row, i in enumerate(batch):
            out[i] = [(seq.decode("utf-8"), float(s)) for seq, s in zip(text[row], scores[row].numpy())
                      if s > -1e8]  # an empty slot of the K (fewer finished) scores NEG_INF
    return beam_size, out


def main(argv):
    del argv
    import tensorflow_text  # noqa: F401  (the SentencePiece ops)

    from keras_transformer.data import corpora
    from keras_transformer.serving import loading
    from keras_transformer.tasks.parsing import metric, treebank, trees

    model, recipe, tokenizer = loading.load_exported(FLAGS.model)
    gold = treebank.load(recipe.data, FLAGS.split, corpora.resolve_data_dir(FLAGS.data_dir)).trees
    gold = gold[:FLAGS.num_sentences] if FLAGS.num_sentences else gold
    words = [trees.words(tree) for tree in gold]
    beam_size, lists = nbest(model, recipe, tokenizer, [" ".join(w) for w in words], FLAGS.beam_size, FLAGS.alpha)
    spans = [[labeled_spans(seq) for seq, _ in hyps] for hyps in lists]
    scores = [[s for _, s in hyps] for hyps in lists]
    rules = [("best", 0.0, 1.0)] + [("bonus", float(b), 1.0) for b in FLAGS.bonus]
    for tau in map(float, FLAGS.tau):
        rules += [("expected F1", 0.0, tau)] + [("posterior", float(g), tau) for g in FLAGS.gamma]
    rows = []
    for rule, value, tau in rules:
        picks = [pick(rule, value, tau, s, sp) for s, sp in zip(scores, spans)]
        test = [trees.delinearize(hyps[i][0], w) for hyps, i, w in zip(lists, picks, words)]
        result = metric.score(gold, test)
        rows.append({"rule": rule, "beta_or_gamma": value, "tau": tau, "changed": sum(i > 0 for i in picks),
                     **{key: round(result[key], 2) for key in ("precision", "recall", "f1")},
                     "constituents": result["test_brackets"], "gold_constituents": result["gold_brackets"]})
    print(f"{FLAGS.model}, {FLAGS.split} ({len(gold)} trees), beam {beam_size}, α {FLAGS.alpha:g}\n")
    print("| rule | β or γ | τ | trees changed | LP | LR | F1 | constituents (gold) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['rule']} | {r['beta_or_gamma']:g} | {r['tau']:g} | {r['changed']} | {r['precision']:.2f} | "
              f"{r['recall']:.2f} | {r['f1']:.2f} | {r['constituents']} ({r['gold_constituents']}) |")
    print(json.dumps({"bench": "parser_nbest", "model": FLAGS.model, "split": FLAGS.split, "trees": len(gold),
                      "beam_size": beam_size, "alpha": FLAGS.alpha, "results": rows}))


if __name__ == "__main__":
    define_flags()
    app.run(main)
