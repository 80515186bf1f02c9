"""The small expression language of ``derive`` in access-pattern files: ``sum(items.price * items.qty)``.

Grammar::

    expression := [function "("] arithmetic [")"]       function: sum avg min max count
    arithmetic := term (("+" | "-" | "*" | "/") term)*
    term       := path | number | "(" arithmetic ")"
    path       := name ("." name)*

It is parsed, never evaluated with ``eval``: the tree can be evaluated on a document in Python, or
rendered as a MongoDB aggregation expression. Paths that go through an array (``items.price``) are
evaluated per element of that array, and the function folds the per-element values. As in MongoDB's
arithmetic, a Decimal128 operand makes the result a Decimal128 (prices are often stored so), computed in
decimal, not through binary floats.
"""

from __future__ import annotations

import decimal
import re
from dataclasses import dataclass
from typing import Any

from bson.decimal128 import Decimal128, create_decimal128_context

_DECIMAL128 = create_decimal128_context()

FUNCTIONS = ("sum", "avg", "min", "max", "count")
_TOKEN = re.compile(r"\s*(?:(?P<number>\d+(?:\.\d+)?)|(?P<path>[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)|(?P<op>[-+*/()]))")


class ExpressionError(ValueError):
    pass


@dataclass(frozen=True)
class Path:
    path: str


@dataclass(frozen=True)
class Number:
    value: int | float


@dataclass(frozen=True)
class BinaryOp:
    op: str
    left: Any
    right: Any


@dataclass(frozen=True)
class Expression:
    function: str | None
    body: Any
    text: str

    def paths(self) -> list[str]:
        found: list[str] = []
        _collect(self.body, found)
        return found

    def array_prefix(self) -> str | None:
        """The array the function folds over: the longest common leading segment of the paths."""
        paths = self.paths()
        if self.function is None or not paths:
            return None
        heads = {p.split(".")[0] for p in paths if "." in p}
        return heads.pop() if len(heads) == 1 else None


def _collect(node: Any, found: list[str]) -> None:
    if isinstance(node, Path):
        found.append(node.path)
    elif isinstance(node, BinaryOp):
        _collect(node.left, found)
        _collect(node.right, found)


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if not match:
            raise ExpressionError(f"unexpected {text[position:].strip()[:10]!r} at character {position + 1}")
        kind = match.lastgroup
        tokens.append((kind or "", match.group(kind or 0)))
        position = match.end()
    return tokens


def parse(text: str) -> Expression:
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError("an expression is a non-empty string, e.g. sum(items.price * items.qty)")
    tokens = _tokens(text)
    function = None
    if len(tokens) >= 3 and tokens[0][0] == "path" and tokens[1] == ("op", "("):
        name = tokens[0][1]
        if name not in FUNCTIONS:
            raise ExpressionError(f"unknown function {name!r} (known: {', '.join(FUNCTIONS)})")
        if tokens[-1] != ("op", ")"):
            raise ExpressionError(f"{name}( is not closed")
        function, tokens = name, tokens[2:-1]
    parser = _Parser(tokens)
    body = parser.arithmetic()
    if parser.position != len(tokens):
        raise ExpressionError(f"unexpected {tokens[parser.position][1]!r}")
    return Expression(function, body, text)


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.position = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def arithmetic(self) -> Any:
        node = self.product()
        while (token := self.peek()) and token in (("op", "+"), ("op", "-")):
            self.position += 1
            node = BinaryOp(token[1], node, self.product())
        return node

    def product(self) -> Any:
        node = self.term()
        while (token := self.peek()) and token in (("op", "*"), ("op", "/")):
            self.position += 1
            node = BinaryOp(token[1], node, self.term())
        return node

    def term(self) -> Any:
        token = self.peek()
        if token is None:
            raise ExpressionError("the expression ends too early")
        self.position += 1
        kind, text = token
        if kind == "number":
            return Number(int(text) if text.isdigit() else float(text))
        if kind == "path":
            return Path(text)
        if token == ("op", "("):
            node = self.arithmetic()
            if self.peek() != ("op", ")"):
                raise ExpressionError("missing )")
            self.position += 1
            return node
        raise ExpressionError(f"unexpected {text!r}")


# -- evaluation on a document (pure) -------------------------------------------------------------


def _lookup(document: Any, path: str) -> Any:
    value = document
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _number(value: Any) -> int | float | decimal.Decimal | None:
    if isinstance(value, Decimal128):
        number = value.to_decimal()
        return number if number.is_finite() else None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _decimal(value: int | float | decimal.Decimal) -> decimal.Decimal:
    # A double meets a decimal as MongoDB converts it: by its shortest decimal representation.
    return value if isinstance(value, decimal.Decimal) else decimal.Decimal(repr(value))


def _arith(node: Any, scope: Any) -> int | float | decimal.Decimal | None:
    if isinstance(node, Number):
        return node.value
    if isinstance(node, Path):
        return _number(_lookup(scope, node.path))
    left, right = _arith(node.left, scope), _arith(node.right, scope)
    if left is None or right is None:
        return None
    if isinstance(left, decimal.Decimal) or isinstance(right, decimal.Decimal):
        with decimal.localcontext(_DECIMAL128):
            return _operate(node.op, _decimal(left), _decimal(right))
    return _operate(node.op, left, right)


def _operate(op: str, left: Any, right: Any) -> Any:
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    return left / right if right else None


def strip_prefix(node: Any, prefix: str) -> Any:
    if isinstance(node, Path) and node.path.startswith(prefix + "."):
        return Path(node.path[len(prefix) + 1 :])
    if isinstance(node, BinaryOp):
        return BinaryOp(node.op, strip_prefix(node.left, prefix), strip_prefix(node.right, prefix))
    return node


def evaluate(expression: Expression, document: dict[str, Any]) -> Any:
    """The value of ``expression`` for ``document`` (None when inputs are missing)."""
    if expression.function is None:
        value = _arith(expression.body, document)
        return _fold_decimals(None, [value]) if isinstance(value, decimal.Decimal) else value
    if expression.function == "count" and isinstance(expression.body, Path):
        value = _lookup(document, expression.body.path)
        if isinstance(value, list):
            return len(value)
    prefix = expression.array_prefix()
    elements = _lookup(document, prefix) if prefix else None
    if isinstance(elements, list):
        body = strip_prefix(expression.body, prefix)
        values = [_arith(body, element) for element in elements if isinstance(element, dict)]
    else:
        values = [_arith(expression.body, document)]
    if expression.function == "count":
        return len(elements) if isinstance(elements, list) else sum(v is not None for v in values)
    values = [v for v in values if v is not None]
    if any(isinstance(v, decimal.Decimal) for v in values):
        return _fold_decimals(expression.function, [_decimal(v) for v in values])
    if expression.function == "sum":
        return round(sum(values), 10) if values else 0
    if not values:
        return None
    if expression.function == "avg":
        return sum(values) / len(values)
    return min(values) if expression.function == "min" else max(values)


def _fold_decimals(function: str | None, values: list[decimal.Decimal]) -> Decimal128:
    """sum, avg, min, max (or the single value) in decimal arithmetic, as a Decimal128."""
    with decimal.localcontext(_DECIMAL128):
        if function == "avg":
            result = sum(values) / len(values)
        elif function == "min":
            result = min(values)
        elif function == "max":
            result = max(values)
        else:
            result = sum(values, decimal.Decimal(0))
        return Decimal128(result)
