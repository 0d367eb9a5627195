"""Constituency trees for parsing as translation (§6.3): read, clean, linearize, and read back with repair.

§6.3 trains the Transformer as a sequence-to-sequence parser on the WSJ part of
the Penn Treebank, after Vinyals et al. (2015), "Grammar as a Foreign Language":
the input is the sentence's words, the output its tree written depth first.

    read_trees(text, where)           -> [Tree]   bracketed trees ("( (S (NP-SBJ (NNP Ms.) ...)) )")
    clean(tree)                       -> Tree     empty elements and function tags removed
    linearize(tree)                   -> "(S (NP XX XX ) (VP XX (NP XX ) ) XX )"
    delinearize(sequence, words, tags=None) -> Tree   the inverse (strict: a malformed sequence is a ValueError)
    repair(sequence, num_words)       -> Repaired  any decoder output made a well-formed sequence with num_words slots
    to_string(tree)                   -> "(S (NP (NNP Ms.) (NNP Haag)) ...)"   one line, as EVALB reads it
    fold(tree, leaf, node)            -> a value built bottom-up, without recursion

Linearization. As in Vinyals et al., every word with its POS tag becomes the
placeholder slot ``XX`` (the parser brackets the words it is given; it never
has to copy them), a constituent opens with ``(LABEL`` and closes with a bare
``)``; tokens are separated by single spaces. The words go back into the slots
in order (``delinearize``), so ``delinearize(linearize(t), words(t), tags(t))
== t`` for every cleaned tree ``t`` (tests/parsing checks all sample trees).

Cleaning (standard practice, and EVALB's COLLINS.prm conventions): empty
elements (``-NONE-``) are removed, with the constituents they leave empty;
function tags and indices are stripped (``NP-SBJ-1`` -> ``NP``, ``PP-LOC=2``
-> ``PP``; ``ADVP|PRT`` -> ``ADVP``); the treebank's unlabelled outer bracket
(or TOP/ROOT) is dropped. POS tags stay in the gold trees: scoring finds the
punctuation by them.

Repair. A decoder may emit a ``)`` that closes nothing, leave brackets open,
open a constituent it never fills, or emit more or fewer slots than there are
words. ``repair`` drops unmatched ``)``, unknown tokens and empty constituents,
closes what is open, drops surplus slots from the right (and the constituents
they leave empty), appends missing slots to the root, and puts several
top-level items under one root labelled ``S`` (the commonest root label). The
constrained beam search (``constraint.py``) never needs it; it is
the safety net for unconstrained decoding and for sequences from elsewhere.

Depth. An unconstrained decoder may nest hundreds of brackets; every function
here walks trees with a stack of its own (``fold``), never with Python's
recursion, so no depth raises RecursionError.

Reading is written here rather than taken from NLTK's ``Tree.fromstring`` (not a dependency; its errors give a
character index, not the file and line) or PYEVALB's ``create_from_bracket_string`` (one tree per string; an unclosed
bracket passes silently, one ``)`` too many is an IndexError).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, List, Optional, Sequence, Tuple, TypeVar, Union

SLOT = "XX"  # a word (with its POS tag) in the linearized tree
TAG_LEAF = "@"  # with DataConfig.tree_leaves "tag", a word is its POS tag after this: "@NN", "@,", "@-LRB-"
CLOSE = ")"
ROOT_LABEL = "S"  # the root that repair (and cleaning, for a forest) puts several top-level items under
NONE_TAG = "-NONE-"  # the treebank's empty elements
_OUTER = ("", "TOP", "ROOT")  # labels of the treebank's outer bracket
_TOKEN = re.compile(r"\(|\)|[^\s()]+")
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Tree:
    """A constituent: its label and children; a child is a Tree or, under a POS tag (a preterminal), a word."""

    label: str
    children: Tuple[Union["Tree", str], ...]

    @property
    def is_preterminal(self) -> bool:
        return len(self.children) == 1 and isinstance(self.children[0], str)


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def read_trees(text: str, where: str = "<text>") -> List[Tree]:
    """Every bracketed tree in ``text``, in order. ``where`` (a file name) starts each error: "where:line: ...".

    A node holds either one word (a preterminal) or subtrees; anything else is a ValueError naming the line.
    """
    trees: List[Tree] = []
    stack: List[list] = []  # [label or None (not yet read), children, offset of its "("]
    for match in _TOKEN.finditer(text):
        token, offset = match.group(), match.start()
        if token == "(":
            if stack and stack[-1][0] is None:
                stack[-1][0] = ""  # "( (S ...": the treebank's unlabelled outer bracket
            stack.append([None, [], offset])
        elif token == CLOSE:
            if not stack:
                raise ValueError(f"{where}:{_line(text, offset)}: ')' closes no bracket")
            label, children, start = stack.pop()
            words = [c for c in children if isinstance(c, str)]
            if not children or (words and len(children) > 1):
                raise ValueError(f"{where}:{_line(text, start)}: bracket ({label or ''} ...) must hold one word or "
                                 f"subtrees, holds {len(words)} word(s) and {len(children) - len(words)} subtree(s)")
            node = Tree(label or "", tuple(children))
            (stack[-1][1] if stack else trees).append(node)
        elif not stack:
            raise ValueError(f"{where}:{_line(text, offset)}: {token!r} outside any bracket")
        elif stack[-1][0] is None:
            stack[-1][0] = token  # the label comes first
        else:
            stack[-1][1].append(token)
    if stack:
        raise ValueError(f"{where}:{_line(text, stack[-1][2])}: bracket ({stack[-1][0] or ''} ...) is never closed")
    return trees


def strip_function_tags(label: str) -> str:
    """``NP-SBJ-1`` -> ``NP``, ``PP-LOC=2`` -> ``PP``, ``ADVP|PRT`` -> ``ADVP``; ``-NONE-``, ``-LRB-`` unchanged."""
    if label.startswith("-"):
        return label
    return re.split(r"[-=|]", label, maxsplit=1)[0]


def fold(tree: Tree, leaf: Callable[[Tree], T], node: Callable[[Tree, List[T]], T]) -> T:
    """``leaf(preterminal)`` for each preterminal, left to right, and ``node(constituent, [its children's values])``
    for each constituent after its children: the value of the root, computed with a stack, not recursion."""
    values: List[List[T]] = [[]]  # the values of the children met so far, one list per open constituent
    stack: List[Tuple[Tree, bool]] = [(tree, False)]  # (node, its children are done)
    while stack:
        current, done = stack.pop()
        if current.is_preterminal:
            values[-1].append(leaf(current))
        elif done:
            children = values.pop()
            values[-1].append(node(current, children))
        else:
            stack.append((current, True))
            values.append([])
            stack.extend((child, False) for child in reversed(current.children))
    return values[0][0]


def _clean_node(node: Tree, children: List[Optional[Tree]]) -> Optional[Tree]:
    kept = tuple(c for c in children if c is not None)
    return Tree(strip_function_tags(node.label), kept) if kept else None


def clean(tree: Tree) -> Optional[Tree]:
    """The tree without empty elements, function tags and the outer bracket; None when no word is left."""
    while tree.label in _OUTER and len(tree.children) == 1 and not tree.is_preterminal:
        tree = tree.children[0]
    cleaned = fold(tree, lambda leaf: None if leaf.label == NONE_TAG else leaf, _clean_node)
    if cleaned is not None and cleaned.label in _OUTER:  # an outer bracket over several constituents
        cleaned = Tree(ROOT_LABEL, cleaned.children)
    if cleaned is not None and cleaned.is_preterminal:  # a one-word tree: give the word a constituent
        cleaned = Tree(ROOT_LABEL, (cleaned,))
    return cleaned


def _concat(first: list, children: List[list], last: list) -> list:
    return first + [item for child in children for item in child] + last


def preterminals(tree: Tree) -> List[Tree]:
    """The (tag, word) leaves, left to right."""
    return fold(tree, lambda leaf: [leaf], lambda node, children: _concat([], children, []))


def words(tree: Tree) -> List[str]:
    return [leaf.children[0] for leaf in preterminals(tree)]


def tags(tree: Tree) -> List[str]:
    return [leaf.label for leaf in preterminals(tree)]


def labels(tree: Tree) -> List[str]:
    """The constituent labels (not POS tags), depth first."""
    return fold(tree, lambda leaf: [], lambda node, children: _concat([node.label], children, []))


def _tokens(tree: Tree, tag_leaves: bool) -> List[str]:
    return fold(tree, lambda leaf: [TAG_LEAF + leaf.label if tag_leaves else SLOT],
                lambda node, children: _concat([f"({node.label}"], children, [CLOSE]))


def linearize(tree: Tree, tag_leaves: bool = False) -> str:
    """The tree as the decoder's target: "(S (NP XX XX ) (VP XX ) XX )" (module docstring), or with
    ``tag_leaves`` "(S (NP @NNP @NNP ) (VP @VBZ ) @. )"."""
    return " ".join(_tokens(tree, tag_leaves))


def is_open(token: str) -> bool:
    return token.startswith("(") and len(token) > 1


def is_leaf(token: str) -> bool:
    """A word's place in a linearized tree: the slot XX or a tag leaf such as @NN."""
    return token == SLOT or (token.startswith(TAG_LEAF) and len(token) > 1)


def leaf_tag(token: str) -> str:
    """The POS tag a leaf writes: XX for the slot, NN for @NN."""
    return SLOT if token == SLOT else token[len(TAG_LEAF):]


def delinearize(sequence: str, words: Sequence[str], tags: Optional[Sequence[str]] = None) -> Tree:
    """The tree of a well-formed ``sequence`` with ``words`` in its leaves, under ``tags`` (default: each leaf's
    own, ``XX`` for a slot).

    Raises ValueError on a malformed sequence (``repair`` it first) or when the slots and words differ in number.
    """
    if tags is not None and len(tags) != len(words):
        raise ValueError(f"tags: {len(tags)} for {len(words)} words")
    stack: List[Tuple[str, list]] = []
    roots: List[Tree] = []
    slot = 0
    for token in sequence.split():
        if is_open(token):
            stack.append((token[1:], []))
        elif is_leaf(token) and stack:
            if slot >= len(words):
                raise ValueError(f"sequence: more slots than the {len(words)} words")
            stack[-1][1].append(Tree(leaf_tag(token) if tags is None else tags[slot], (words[slot],)))
            slot += 1
        elif token == CLOSE and stack and stack[-1][1]:
            label, children = stack.pop()
            (stack[-1][1] if stack else roots).append(Tree(label, tuple(children)))
        else:
            raise ValueError(f"sequence: unexpected {token!r} after {slot} slots (not a well-formed tree; repair it)")
    if stack or len(roots) != 1 or slot != len(words):
        raise ValueError(f"sequence: {len(stack)} bracket(s) left open, {len(roots)} root(s), {slot} slots for "
                         f"{len(words)} words (not a well-formed tree; repair it)")
    return roots[0]


@dataclasses.dataclass(frozen=True)
class Repaired:
    """A well-formed sequence and what was wrong with the original (empty when nothing was).

    Problems, in the order met: "unmatched )", "unknown token", "empty constituent", "unclosed (", "too many
    slots", "too few slots", "no single root", "no tree".
    """

    sequence: str
    problems: Tuple[str, ...]

    @property
    def repaired(self) -> bool:
        return bool(self.problems)


def _forest(tokens: Sequence[str], problems: List[str]) -> list:
    """The top-level items of ``tokens`` read as brackets, each a leaf token or [label, children]; what does not fit
    (an unmatched ``)``, an unknown token, an empty or unclosed constituent) is dropped or closed and named in
    ``problems``."""
    forest: list = []
    stack: list = []
    for token in tokens:
        if is_leaf(token):
            (stack[-1][1] if stack else forest).append(token)
        elif token == CLOSE:
            if not stack:
                problems.append("unmatched )")
                continue
            node = stack.pop()
            if node[1]:
                (stack[-1][1] if stack else forest).append(node)
            else:
                problems.append("empty constituent")
        elif is_open(token):
            stack.append([token[1:], []])
        else:
            problems.append("unknown token")
    while stack:
        problems.append("unclosed (")
        node = stack.pop()
        if node[1]:
            (stack[-1][1] if stack else forest).append(node)
        else:
            problems.append("empty constituent")
    return forest


def _write(forest: list) -> List[str]:
    """The tokens of a forest of ``_forest``'s items, with a stack (an item may nest deep)."""
    tokens: List[str] = []
    stack = list(reversed(forest))
    while stack:
        item = stack.pop()
        if isinstance(item, str):  # a leaf, or the CLOSE pushed below
            tokens.append(item)
        else:
            tokens.append(f"({item[0]}")
            stack.append(CLOSE)
            stack.extend(reversed(item[1]))
    return tokens


def repair(sequence: str, num_words: int, root_label: str = ROOT_LABEL) -> Repaired:
    """``sequence`` made a well-formed tree with exactly ``num_words`` slots (module docstring), and what was fixed.

    A well-formed sequence with the right slots comes back unchanged with no problems. With ``num_words`` 0 the
    result is the empty sequence.
    """
    problems: List[str] = []
    forest = _forest(sequence.split(), problems)
    tokens = _write(forest)
    slots = sum(map(is_leaf, tokens))
    if slots > num_words:
        problems.append("too many slots")
        last = [i for i, token in enumerate(tokens) if is_leaf(token)][num_words:]  # the surplus, from the right
        for i in reversed(last):
            del tokens[i]
        forest = _forest(tokens, [])  # the constituents the surplus leaves empty go
    elif slots < num_words:
        problems.append("too few slots")
    if not num_words:
        return Repaired("", tuple(problems))
    if len(forest) == 1 and not isinstance(forest[0], str):
        root = forest[0]
    else:
        problems.append("no single root" if forest else "no tree")
        root = [root_label, forest]
    root[1].extend([SLOT] * max(0, num_words - slots))
    return Repaired(" ".join(_write([root])), tuple(problems))


def escape_word(word: str) -> str:
    """A word as the treebank writes it inside brackets: "(" -> -LRB-, ")" -> -RRB-."""
    return word.replace("(", "-LRB-").replace(")", "-RRB-")


def to_string(tree: Tree) -> str:
    """One line of PTB brackets, "(S (NP (NNP Ms.) (NNP Haag)) (. .))", as EVALB and PYEVALB read it."""
    return fold(tree, lambda leaf: f"({leaf.label} {escape_word(leaf.children[0])})",
                lambda node, children: f"({node.label} " + " ".join(children) + ")")
