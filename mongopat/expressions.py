"""The small expression language of ``derive`` in access-pattern files: ``sum(items.price * items.qty)``.

Grammar::

    expression := [function "("] arithmetic [")"]       function: sum avg min max count
    arithmetic := term (("+" | "-" | "*" | "/") term)*
    term       := path | number | "(" arithmetic ")"
    path       := name ("." name)*

It is parsed, never evaluated with ``eval``: the tree is evaluated on a document in Python
(:func:`evaluate`), or rendered as an aggregation expression a server computes (:func:`aggregation`);
both give the same BSON value for the same document. Paths that go through an array (``items.price``)
are evaluated per element of that array, and the function folds the per-element values.

The arithmetic is MongoDB's: an int32 result that overflows becomes a long, a long that overflows a
double; a long operand keeps the result a long; ``/`` gives a double; a Decimal128 operand makes the
result a Decimal128, computed in decimal, with a double converted as ``$toDecimal`` converts it (15
significant digits: 2.5 is ``2.50000000000000``); ``sum`` and ``avg`` of doubles carry each addition's
rounding error as mongod's ``$sum`` does, and ``min`` and ``max`` give the value itself. Where MongoDB
would fail the whole update, a value is null instead: an operand that is not a finite number (missing,
null, a string, NaN...) and a division by zero.
"""

from __future__ import annotations

import decimal
import functools
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from bson.decimal128 import Decimal128, create_decimal128_context
from bson.int64 import Int64

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
        return self._array_prefix

    @functools.cached_property
    def program(self) -> Program:
        """The body as a function of a document (:func:`_compiled`)."""
        return _compiled(self.body)

    @functools.cached_property
    def element_body(self) -> Any:
        """The body as read on an element of the array the function folds over (the array's name taken off)."""
        return strip_prefix(self.body, self.array_prefix() or "")

    @functools.cached_property
    def element_program(self) -> Program:
        """The body as a function of an element of the array the function folds over."""
        return _compiled(self.element_body)

    @functools.cached_property
    def element_sum(self) -> Callable[[list[Any]], float | None] | None:
        """``sum`` over an array whose elements' body is two of their fields combined (``price * qty``),
        as one loop (:func:`_summed_pairs`); None for any other expression."""
        body = self.element_body
        if self.function != "sum" or self.array_prefix() is None or type(body) is not BinaryOp:
            return None
        double = _DOUBLE_OPERATIONS.get(body.op)
        if double is None or type(body.left) is not Path or type(body.right) is not Path:
            return None
        if "." in body.left.path + body.right.path:
            return None
        return _summed_pairs(body.left.path, body.right.path, double)

    @functools.cached_property
    def _array_prefix(self) -> str | None:
        # Once per expression (parse shares one per text): a migration evaluates it for every document.
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
    return _parse(text)


@functools.lru_cache(maxsize=256)
def _parse(text: str) -> Expression:
    # Parsed once per text: a migration's transform parses its expression for every document, and the
    # tree is immutable (frozen dataclasses), so every caller may share it.
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

_INT32 = 2**31
_INT64 = 2**63
Value = int | float | decimal.Decimal


def _lookup(document: Any, path: str) -> Any:
    if "." not in path:  # the usual case, a field of an array's element: no split
        return document.get(path) if isinstance(document, dict) else None
    value = document
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _number(value: Any) -> Value | None:
    """A finite number, or None (Decimal128 as a decimal; bool is not a number in BSON)."""
    kind = type(value)
    if kind is int:
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if isinstance(value, Decimal128):
        number = value.to_decimal()
        return number if number.is_finite() else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _decimal(value: Value) -> decimal.Decimal:
    """``value`` as ``$toDecimal`` converts it: a double to 15 significant digits (2.5 is 2.50000000000000)."""
    if isinstance(value, decimal.Decimal):
        return value
    if isinstance(value, int):
        return decimal.Decimal(value)
    if value == 0:
        return decimal.Decimal("-0") if math.copysign(1.0, value) < 0 else decimal.Decimal(0)
    return decimal.Decimal(f"{value:.14e}")


def _integer(result: int, long: bool) -> int:
    """An integer result typed as MongoDB types it: a long when an operand was one (or int32 overflowed)."""
    return Int64(result) if long or not -_INT32 <= result < _INT32 else result


def _arith(node: Any, scope: Any) -> Value | None:
    """The value of an arithmetic node, walking the tree (the reference :func:`_compiled` is held to)."""
    kind = type(node)  # the node classes above have no subclasses
    if kind is Path:
        return _number(_lookup(scope, node.path))
    if kind is Number:
        return node.value
    return _combine(node.op, _arith(node.left, scope), _arith(node.right, scope))


def _combine(op: str, left: Value | None, right: Value | None) -> Value | None:
    """``left op right`` typed as MongoDB types it (null when an operand is null or the divisor 0)."""
    if left is None or right is None or (op == "/" and right == 0):
        return None
    kinds = (type(left), type(right))
    if kinds == (float, float) or kinds == (float, int) or kinds == (int, float):  # no int, long or decimal rules
        return _operate(op, float(left), float(right))
    if isinstance(left, decimal.Decimal) or isinstance(right, decimal.Decimal):
        with decimal.localcontext(_DECIMAL128):
            if op == "+":  # $add folds its operands into a total that starts at 0: 3E+2 + 3E+2 is 600
                return decimal.Decimal(0) + _decimal(left) + _decimal(right)
            return _operate(op, _decimal(left), _decimal(right))
    if isinstance(left, int) and isinstance(right, int) and op != "/":
        result = _operate(op, left, right)
        if -_INT64 <= result < _INT64:
            return _integer(result, isinstance(left, Int64) or isinstance(right, Int64))
        left, right = float(left), float(right)  # a long that overflows: MongoDB computes in doubles
    return _operate(op, float(left), float(right))


Program = Callable[[Any], "Value | None"]


def _compiled(node: Any) -> Program:
    """An arithmetic node as a function of the scope: :func:`_arith` without walking the tree again for
    every document (a migration evaluates one expression on every document, and every element of its
    array)."""
    kind = type(node)
    if kind is Number:
        value = node.value
        return lambda scope: value
    if kind is Path:
        path = node.path
        if "." in path:
            return lambda scope: _number(_lookup(scope, path))

        def field(scope: Any) -> Value | None:
            if type(scope) is not dict:
                return _number(scope.get(path)) if isinstance(scope, dict) else None
            value = scope.get(path)
            kind = type(value)
            if kind is int:
                return value
            if kind is float:
                return value if value - value == 0.0 else None  # NaN and infinities give NaN
            return _number(value)

        return field
    left, right, op = _compiled(node.left), _compiled(node.right), node.op

    def general(scope: Any) -> Value | None:
        return _combine(op, left(scope), right(scope))

    double = _DOUBLE_OPERATIONS.get(op)
    if double is None:
        return general
    if type(node.left) is Path and type(node.right) is Path and "." not in node.left.path + node.right.path:
        return _field_pair(node.left.path, node.right.path, double, general)

    def combined(scope: Any) -> Value | None:
        # Two doubles, or a double and an int: what _combine computes, without its dispatch.
        a, b = left(scope), right(scope)
        kind_a, kind_b = type(a), type(b)
        if (kind_a is float and (kind_b is float or kind_b is int)) or (kind_a is int and kind_b is float):
            return double(float(a), float(b))  # type: ignore[arg-type]
        return _combine(op, a, b)

    return combined


def _field_pair(first: str, second: str, double: Callable[[float, float], float], general: Program) -> Program:
    """Two fields of the scope combined (``price * qty``), read straight from it. Two doubles, or a double
    and an int, whose result is finite are combined here: a finite result means finite operands. The rest
    (a missing field, a NaN, an overflow, ints, decimals) goes to ``general``."""

    def pair(scope: Any) -> Value | None:
        if type(scope) is dict:
            a, b = scope.get(first), scope.get(second)
            kind_a, kind_b = type(a), type(b)
            if (kind_a is float and (kind_b is float or kind_b is int)) or (kind_a is int and kind_b is float):
                result = double(float(a), float(b))  # type: ignore[arg-type]
                if result - result == 0.0:
                    return result
        return general(scope)

    return pair


# The operators whose double arithmetic has no special case (division by zero gives null: _combine).
_DOUBLE_OPERATIONS: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
}


def _operate(op: str, left: Any, right: Any) -> Any:
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    return left / right


def strip_prefix(node: Any, prefix: str) -> Any:
    if isinstance(node, Path) and node.path.startswith(prefix + "."):
        return Path(node.path[len(prefix) + 1 :])
    if isinstance(node, BinaryOp):
        return BinaryOp(node.op, strip_prefix(node.left, prefix), strip_prefix(node.right, prefix))
    return node


def evaluate(expression: Expression, document: dict[str, Any]) -> Any:
    """The value of ``expression`` for ``document`` (None when inputs are missing)."""
    if expression.function is None:
        return _bson(expression.program(document))
    if expression.function == "count" and isinstance(expression.body, Path):
        value = _lookup(document, expression.body.path)
        if isinstance(value, list):
            return len(value)
    prefix = expression.array_prefix()
    elements = _lookup(document, prefix) if prefix else None
    if expression.function == "count":
        if isinstance(elements, list):
            return len(elements)
        return int(expression.program(document) is not None)
    if isinstance(elements, list):
        summed = expression.element_sum
        if summed is not None and (total := summed(elements)) is not None:  # the usual arrays, in one loop
            return total
        program = expression.element_program
        values = [
            value for element in elements if isinstance(element, dict) and (value := program(element)) is not None
        ]
    else:
        value = expression.program(document)
        values = [] if value is None else [value]
    return fold(expression.function, values)


def fold(function: str, values: list[Value]) -> Any:
    """``$sum``, ``$avg``, ``$min`` or ``$max`` of the numbers ``values``, typed as MongoDB types them (NaN,
    which :func:`evaluate` never folds, is the smallest number for ``$min`` and ``$max``)."""
    if function == "sum" and values:  # the usual cases, told apart by the types at once: doubles, or int32s
        kinds = set(map(type, values))
        if kinds == {float}:
            return _sum_of_doubles(cast(list[float], values))
        if kinds == {int}:  # no long among them (a long is an Int64), nor a decimal
            total = sum(cast(list[int], values))
            if -_INT64 <= total < _INT64:
                return _integer(total, False)
    if function in ("min", "max"):
        if not values:
            return None
        pick = min if function == "min" else max
        return _bson(pick(values, key=_nan_first))  # the first of equal values, as $min and $max keep it
    if any(isinstance(v, decimal.Decimal) for v in values):
        with decimal.localcontext(_DECIMAL128):
            total = sum((_decimal(v) for v in values), decimal.Decimal(0))
            return _bson(total / len(values) if function == "avg" else total)
    if function == "avg":
        return _compensated_sum(values) / len(values) if values else None
    if all(isinstance(v, int) for v in values):
        total = sum(values)
        if -_INT64 <= total < _INT64:
            return _integer(total, any(isinstance(v, Int64) for v in values))
    return _compensated_sum(values)


def is_nan(value: Value) -> bool:
    """Whether ``value`` is a double's or a decimal's NaN."""
    if isinstance(value, decimal.Decimal):
        return value.is_nan()
    return isinstance(value, float) and math.isnan(value)


def _nan_first(value: Value) -> tuple[bool, Value]:
    # A NaN compares with nothing in Python (a decimal's raises): it sorts first, as any other NaN.
    return (False, 0) if is_nan(value) else (True, value)


def _compensated_sum(values: list[Value]) -> float:
    """The double ``$sum`` gives: a running sum with the rounding error of each addition carried in a
    second double (2Sum after Fast2Sum), the running sum returned. It is not the correctly rounded sum
    (``math.fsum``) and depends on the order: 1249.92 + 624.96 + 208.32 is 2083.2000000000003, the
    other way round 2083.2, as mongod gives them."""
    return _sum_of_doubles(_as_doubles(values))


def _sum_of_doubles(doubles: list[float]) -> float:
    """:func:`_compensated_sum` of doubles."""
    total = carried = plain = 0.0
    for x in doubles:
        plain += x  # kept for a sum that the compensation turns into NaN (infinities)
        s = x + carried  # Fast2Sum: the carried error is the smaller
        x, carried = s, carried - (s - x)
        s = total + x  # 2Sum: either may be the larger
        back = s - x
        x = (total - back) + (x - (s - back))
        total = s
        carried += x
    return plain if math.isnan(total) else total


def _summed_pairs(
    first: str, second: str, double: Callable[[float, float], float]
) -> Callable[[list[Any]], float | None]:
    """What :func:`evaluate` gives for ``sum`` of ``first op second`` over an array's elements, when every
    element is a document whose two fields are two doubles, or a double and an int, with a finite result:
    the elements' values and :func:`_sum_of_doubles` of them in one loop, without a call per element but
    ``double``'s. None (the general path decides) for anything else: an empty array, an element without
    the fields, ints, longs, decimals, a NaN or an overflow."""

    def summed(elements: list[Any]) -> float | None:
        total = carried = plain = 0.0
        for element in elements:
            if type(element) is not dict:
                return None
            a, b = element.get(first), element.get(second)
            kind_a, kind_b = type(a), type(b)
            if not ((kind_a is float and (kind_b is float or kind_b is int)) or (kind_a is int and kind_b is float)):
                return None
            x = double(float(a), float(b))  # type: ignore[arg-type]
            if x - x != 0.0:  # NaN or infinite: the general path's rules
                return None
            plain += x  # the rest is _sum_of_doubles' loop, inlined
            s = x + carried
            x, carried = s, carried - (s - x)
            s = total + x
            back = s - x
            x = (total - back) + (x - (s - back))
            total = s
            carried += x
        if not elements:
            return None
        return plain if math.isnan(total) else total

    return summed


def _as_doubles(values: list[Value]) -> list[float]:
    """The doubles ``$sum`` adds for ``values``: each as a double, a long as two doubles that hold it
    exactly (what is below 2**32, then the rest)."""
    if set(map(type, values)) <= {float}:
        return cast(list[float], values)
    doubles = []
    for value in values:
        if isinstance(value, Int64) or (isinstance(value, int) and not -_INT32 <= value < _INT32):
            high = (abs(value) >> 32 << 32) * (1 if value >= 0 else -1)
            doubles.extend((float(value - high), float(high)))
        else:
            doubles.append(float(value))
    return doubles


def _bson(value: Value | None) -> Any:
    if isinstance(value, decimal.Decimal):
        with decimal.localcontext(_DECIMAL128):
            return Decimal128(value)
    return value


# -- the same value computed by a server ------------------------------------------------------------

_ELEMENT = "element"  # the variable an array's element is bound to while the function folds it


def aggregation(expression: Expression) -> Any:
    """An aggregation expression giving what :func:`evaluate` gives, for an update pipeline's ``$set``.

    Operators: ``$isNumber`` (MongoDB 4.4), ``$let``, ``$switch``, ``$cond``, ``$map``, ``$filter``,
    ``$isArray``, ``$anyElementTrue``, ``$toDecimal``, ``$type``, ``$size`` and the arithmetic and
    accumulator operators: all in MongoDB 5.0."""
    body, function = expression.body, expression.function
    if function is None:
        return _render(body, "$")
    prefix = expression.array_prefix()
    if function == "count":
        single = {"$cond": [{"$eq": [_render(body, "$"), None]}, 0, 1]}
        array = f"${body.path}" if isinstance(body, Path) else f"${prefix}" if prefix else None
        return {"$cond": [{"$isArray": array}, {"$size": array}, single]} if array else single
    single_fold = render_fold(function, [_render(body, "$")])
    if prefix is None:
        return single_fold
    objects = {
        "$filter": {"input": f"${prefix}", "as": _ELEMENT, "cond": {"$eq": [{"$type": f"$${_ELEMENT}"}, "object"]}}
    }
    each = {"$map": {"input": objects, "as": _ELEMENT, "in": _render(strip_prefix(body, prefix), f"$${_ELEMENT}.")}}
    return {"$cond": [{"$isArray": f"${prefix}"}, render_fold(function, each), single_fold]}


def render_fold(function: str, values: Any) -> Any:
    """The fold of the array ``values`` (numbers and nulls); with a Decimal128 among them, every value is
    converted by ``$toDecimal`` first, as :func:`fold` converts them."""
    operator = f"${function}"
    if function in ("min", "max"):
        return {operator: values}
    decimals = {"$map": {"input": "$$values", "in": {"$toDecimal": "$$this"}}}
    has_decimal = {
        "$anyElementTrue": [{"$map": {"input": "$$values", "in": {"$eq": [{"$type": "$$this"}, "decimal"]}}}]
    }
    return {
        "$let": {
            "vars": {"values": values},
            "in": {"$cond": [has_decimal, {operator: decimals}, {operator: "$$values"}]},
        }
    }


_OPERATORS = {"+": "$add", "-": "$subtract", "*": "$multiply", "/": "$divide"}


def _render(node: Any, prefix: str) -> Any:
    if isinstance(node, Number):
        return node.value
    if isinstance(node, Path):
        # A finite number, or null: NaN sorts below every number and the infinities are not strictly inside.
        ref = f"{prefix}{node.path}"
        finite = {"$and": [{"$isNumber": ref}, {"$gt": [ref, -math.inf]}, {"$lt": [ref, math.inf]}]}
        return {"$cond": [finite, ref, None]}
    operator = _OPERATORS[node.op]
    null = [{"$eq": ["$$left", None]}, {"$eq": ["$$right", None]}]
    if node.op == "/":
        null.append({"$eq": ["$$right", 0]})
    decimal_operand = {"$in": ["decimal", [{"$type": "$$left"}, {"$type": "$$right"}]]}
    return {
        "$let": {
            "vars": {"left": _render(node.left, prefix), "right": _render(node.right, prefix)},
            "in": {
                "$switch": {
                    "branches": [
                        {"case": {"$or": null}, "then": None},
                        {
                            "case": decimal_operand,
                            "then": {operator: [{"$toDecimal": "$$left"}, {"$toDecimal": "$$right"}]},
                        },
                    ],
                    "default": {operator: ["$$left", "$$right"]},
                }
            },
        }
    }
