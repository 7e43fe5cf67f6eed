"""-k EXPR: pytest's keyword expressions over a case's names, parsed here (never eval()).

    expr   := or_expr
    or_expr  := and_expr ("or" and_expr)*
    and_expr := not_expr ("and" not_expr)*
    not_expr := "not" not_expr | "(" expr ")" | WORD

A WORD matches when it is a substring of any of the case's names, ignoring case (as pytest's -k
does); the names are the case id, each folder and the file name in it, the operator, the case_name
and an ONNX case's onnx_op (ReduceSum, Split, ...).

Parentheses and `not` may nest MAX_NESTING deep: deeper is a usage error naming the column, not a
RecursionError. Chains of `and`/`or` (left-deep trees of any length) are parsed and evaluated in loops.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Union

from ..errors import InputError, cut, quoted

# pytest's identifier characters: words, and the : + - . [ ] \ / of test ids.
_TOKEN = re.compile(r"[()]|[\w:+\-.\[\]\\/]+")
_KEYWORDS = ("and", "or", "not")
# Far beyond any expression a person writes, far below Python's recursion limit (1000 frames).
MAX_NESTING = 100


@dataclass(frozen=True)
class Word:
    text: str


@dataclass(frozen=True)
class Not:
    operand: "Node"


@dataclass(frozen=True)
class Both:
    left: "Node"
    right: "Node"


@dataclass(frozen=True)
class Either:
    left: "Node"
    right: "Node"


Node = Union[Word, Not, Both, Either]


def _tokens(text: str) -> list[tuple[str, int]]:
    """(token, column) pairs: parentheses and words; whitespace separates."""
    tokens, position = [], 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return tokens
        match = _TOKEN.match(text, position)
        if match is None:
            raise _error(text, f"unexpected character {quoted(text[position])} at column {position + 1}")
        tokens.append((match.group(), position + 1))
        position = match.end()


def _error(text: str, what: str) -> InputError:
    return InputError(f"-k {quoted(cut(text))}: {what} (expected words joined by and, or, not and parentheses)")


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokens(text)
        self.at = 0
        self.depth = 0  # parentheses and 'not's open around the current token

    def peek(self) -> str | None:
        return self.tokens[self.at][0] if self.at < len(self.tokens) else None

    def column(self) -> int:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else len(self.text) + 1

    def take(self) -> str:
        token = self.tokens[self.at][0]
        self.at += 1
        return token

    def parse(self) -> Node:
        if not self.tokens:
            raise _error(self.text, "empty expression")
        node = self.either()
        if self.peek() is not None:
            raise _error(self.text, f"unexpected {quoted(self.peek())} at column {self.column()}")
        return node

    def either(self) -> Node:
        node = self.both()
        while self.peek() == "or":
            self.take()
            node = Either(node, self.both())
        return node

    def both(self) -> Node:
        node = self.negation()
        while self.peek() == "and":
            self.take()
            node = Both(node, self.negation())
        return node

    def negation(self) -> Node:
        token = self.peek()
        if token in ("not", "("):
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise _error(self.text, f"parentheses and 'not' nested more than {MAX_NESTING} deep at column "
                                        f"{self.column()}")
            self.take()
            node = Not(self.negation()) if token == "not" else self.group()
            self.depth -= 1
            return node
        if token is None or token == ")" or token in _KEYWORDS:
            what = "end of expression" if token is None else repr(token)
            raise _error(self.text, f"expected a word at column {self.column()}, found {what}")
        return Word(self.take())

    def group(self) -> Node:
        """The inside of '(' ... ')', the '(' taken."""
        node = self.either()
        if self.peek() != ")":
            raise _error(self.text, f"missing ')' at column {self.column()}")
        self.take()
        return node


def parse(text: str) -> Node:
    """The expression's tree; InputError (exit 2) naming the column of the first problem."""
    return _Parser(text).parse()


def evaluate(node: Node, names: Iterable[str]) -> bool:
    lowered = [name.lower() for name in names]
    return _evaluate(node, lowered)


def _evaluate(node: Node, names: list[str]) -> bool:
    if isinstance(node, Word):
        needle = node.text.lower()
        return any(needle in name for name in names)
    if isinstance(node, Not):
        return not _evaluate(node.operand, names)
    # `a or b or c ...` is a left-deep tree as long as the chain: walked down its left spine in a loop,
    # so that only parentheses and 'not' (at most MAX_NESTING) cost stack frames.
    kind = type(node)
    operands = []
    while isinstance(node, kind):
        operands.append(node.right)
        node = node.left
    operands.append(node)
    values = (_evaluate(operand, names) for operand in reversed(operands))
    return all(values) if kind is Both else any(values)


def matcher(text: str | None) -> Callable[[Iterable[str]], bool]:
    """A predicate over a case's names: everything matches when there is no expression."""
    if text is None:
        return lambda names: True
    tree = parse(text)
    return lambda names: evaluate(tree, names)
