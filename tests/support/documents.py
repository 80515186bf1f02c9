"""Documents declared as data, for rule cases: a template evaluated once per document.

A template is a document whose values may be expressions, written as MongoDB aggregation expressions are
(one ``$``-key mapping); the operators below are a small set with MongoDB's names where MongoDB has one.

- ``"$i"`` the document's place in the collection (0, 1, ...); ``"$j"`` an element's place in ``$array``
  (or the name given by ``as``); ``"$$REMOVE"`` leaves the field (or element) out.
- ``$add``, ``$multiply``, ``$subtract``, ``$divide``, ``$mod``, ``$floorDiv``: numbers.
- ``$eq``, ``$ne``, ``$lt``, ``$lte``, ``$gt``, ``$gte``, ``$and``, ``$or``, ``$cond: [if, then, else]``.
- ``$concat``: strings, numbers printed; ``$chars: n`` n letters "x"; ``$arrayElemAt``, ``$slice``;
  ``$arrayToObject`` (``[[key, value], ...]``: keys made from values, as a map's are).
- ``$range: [start, end]``; ``$array: {length, of, as}`` ``length`` elements, each ``of`` evaluated.
- ``$date: {days, hours, minutes, seconds}`` a date after ``START``; ``$oid: {days, ..., n}`` an ObjectId
  made at that date (``n`` its counter, ``$i`` unless given), so collections can refer to one another.
- ``$literal`` a value taken as written.

A collection's documents are groups, ``[{count, document}]`` or ``[{count, set}]`` (``set``: a template of
``tests/rules/document_sets.yaml``), numbered on from one group to the next."""

from __future__ import annotations

import datetime
import functools
import operator
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import yaml
from bson import ObjectId

from tests.support.evidence import START, oid_at
from tests.support.paths import DOCUMENT_SETS

Scope = Mapping[str, Any]
REMOVE = object()


def _numbers(combine: Callable[[Any, Any], Any]) -> Callable[[list[Any]], Any]:
    return lambda values: functools.reduce(combine, values)


def _pair(compare: Callable[[Any, Any], Any]) -> Callable[[list[Any]], Any]:
    return lambda values: compare(values[0], values[1])


def _delta(arguments: Mapping[str, Any]) -> datetime.timedelta:
    units = {unit: arguments[unit] for unit in ("days", "hours", "minutes", "seconds") if unit in arguments}
    return datetime.timedelta(**units)


def _object_id(arguments: Mapping[str, Any], scope: Scope) -> ObjectId:
    return oid_at(START + _delta(arguments), arguments.get("n", scope["i"]))


# Operators whose arguments are evaluated first: (values) -> value.
EVALUATED: dict[str, Callable[[Any], Any]] = {
    "$add": _numbers(operator.add),
    "$multiply": _numbers(operator.mul),
    "$subtract": _pair(operator.sub),
    "$divide": _pair(operator.truediv),
    "$mod": _pair(operator.mod),
    "$floorDiv": _pair(operator.floordiv),
    "$eq": _pair(operator.eq),
    "$ne": _pair(operator.ne),
    "$lt": _pair(operator.lt),
    "$lte": _pair(operator.le),
    "$gt": _pair(operator.gt),
    "$gte": _pair(operator.ge),
    "$and": all,
    "$or": any,
    "$concat": lambda values: "".join(str(value) for value in values),
    "$chars": lambda n: "x" * n,
    "$arrayElemAt": lambda values: values[0][values[1]],
    "$slice": lambda values: values[0][: values[1]],
    "$range": lambda values: list(range(values[0], values[1])),
    "$arrayToObject": lambda pairs: {str(key): value for key, value in pairs},
    "$date": lambda arguments: START + _delta(arguments),
}


def evaluate(template: Any, scope: Scope) -> Any:
    """The value ``template`` stands for in ``scope`` (``REMOVE`` for ``$$REMOVE``)."""
    if isinstance(template, str):
        if template == "$$REMOVE":
            return REMOVE
        if template.startswith("$"):
            if template[1:] not in scope:
                raise ValueError(f"{template} names no counter in a document template (a string: $literal)")
            return scope[template[1:]]
        return template
    if isinstance(template, list):
        return [value for value in (evaluate(item, scope) for item in template) if value is not REMOVE]
    if not isinstance(template, dict):
        return template
    if len(template) == 1:
        [(key, argument)] = template.items()
        if key.startswith("$"):
            return _operator(key, argument, scope)
    document = {}
    for key, item in template.items():
        value = evaluate(item, scope)
        if value is not REMOVE:
            document[key] = value
    return document


def _operator(name: str, argument: Any, scope: Scope) -> Any:
    if name == "$literal":
        return argument
    if name == "$cond":
        condition, then, otherwise = argument
        return evaluate(then if evaluate(condition, scope) else otherwise, scope)
    if name == "$array":
        length, element = evaluate(argument["length"], scope), argument["of"]
        name_of_place = argument.get("as", "j")
        return [evaluate(element, {**scope, name_of_place: place}) for place in range(length)]
    if name == "$oid":
        return _object_id(evaluate(argument, scope), scope)
    if name not in EVALUATED:
        raise ValueError(f"unknown operator {name} in a document template")
    return EVALUATED[name](evaluate(argument, scope))


@functools.cache
def _sets() -> dict[str, Any]:
    return yaml.safe_load(DOCUMENT_SETS.read_text(encoding="utf-8"))


def documents(groups: list[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
    """The documents ``groups`` declare, numbered across the groups."""
    place = 0
    for group in groups:
        template = _sets()[group["set"]] if "set" in group else group["document"]
        for _ in range(group["count"]):
            yield evaluate(template, {"i": place})
            place += 1
