"""What the pure transforms of the step modules (:mod:`mongopat.migrate.operations`) share: the
:class:`Context` a runner gathers for them from other documents (parents, referenced documents,
aggregates), their :class:`Result`, and helpers on dotted paths. No database here.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bson import Decimal128, Int64, ObjectId, Timestamp

Document = dict[str, Any]

# Values no transform can change in place: shared between a document and its copy. (A Regex, a DBRef, a
# Binary subclass or a SON is not among them: those are deep-copied.)
_SHARED = frozenset(
    (str, int, float, bool, type(None), bytes, datetime.datetime, ObjectId, Decimal128, Int64, Timestamp)
)


def copy_document(value: Any) -> Any:
    """A copy of ``value`` no change to which reaches the original: dicts and lists copied all the way down,
    immutable values shared. Equal to ``copy.deepcopy`` on documents, and a few times faster, since most
    of a document's values are strings and numbers."""
    kind = type(value)
    if kind is dict:
        return {key: item if type(item) in _SHARED else copy_document(item) for key, item in value.items()}
    if kind is list:
        return [item if type(item) in _SHARED else copy_document(item) for item in value]
    if kind in _SHARED:
        return value
    return copy.deepcopy(value)


@dataclass
class Context:
    """What a transform may know beyond the document itself, keyed by the document's own values."""

    parents: dict[Any, Any] = field(default_factory=dict)  # tree: _id -> parent _id
    references: dict[Any, Document] = field(default_factory=dict)  # extended reference: local value -> fields
    aggregates: dict[Any, Document] = field(default_factory=dict)  # pre-aggregation: local value -> results


class ContextSource(Protocol):
    """Where a step's :meth:`~mongopat.migrate.operations.base.DocumentOperation.context` reads other
    documents: each backend's (a server, a dump folder, the placeholders of a preview)."""

    def documents(
        self, collection: str, field: str | None, values: list[Any] | None, fields: list[str]
    ) -> Iterable[Document]:
        """The documents of ``collection`` whose ``field`` is one of ``values`` (every document when
        ``field`` is None), with at least ``fields`` and ``field``."""
        ...


@dataclass
class Result:
    document: Document
    side: dict[str, list[Document]] = field(default_factory=dict)


def get_path(document: Document, path: str) -> Any:
    if "." not in path:  # a top-level field, the usual case: no split
        return document.get(path) if isinstance(document, dict) else None
    value: Any = document
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def has_path(document: Document, path: str) -> bool:
    if "." not in path:
        return isinstance(document, dict) and path in document
    value: Any = document
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return False
        value = value[part]
    return True


def set_path(document: Document, path: str, value: Any) -> None:
    if "." not in path:
        document[path] = value
        return
    parts = path.split(".")
    target = document
    for part in parts[:-1]:
        if not isinstance(target.get(part), dict):
            target[part] = {}
        target = target[part]
    target[parts[-1]] = value


def pop_path(document: Document, path: str) -> Any:
    if "." not in path:
        return document.pop(path, None) if isinstance(document, dict) else None
    parts = path.split(".")
    target: Any = document
    for part in parts[:-1]:
        target = target.get(part) if isinstance(target, dict) else None
    if isinstance(target, dict):
        return target.pop(parts[-1], None)
    return None


def heads(*paths: str) -> frozenset[str]:
    """The top-level fields of dotted paths (``a.b.c`` is in ``a``)."""
    return frozenset(path.split(".", 1)[0] for path in paths)


def matches_rule(doc: Document, rule: dict[str, Any]) -> bool:
    if "when_has" in rule and not has_path(doc, rule["when_has"]):
        return False
    return not ("when_missing" in rule and has_path(doc, rule["when_missing"]))


def hashable_key(value: Any) -> Any:
    """``value`` as a dict key: itself when hashable, its repr otherwise (documents, arrays), tagged so
    that no string equals it; a boolean tagged too, as BSON never takes ``true`` for ``1`` (Python does).
    The runtime keys the maps of a :class:`Context` with it and the transforms look them up with it."""
    if isinstance(value, bool):
        return (bool, value)
    try:
        hash(value)
    except TypeError:
        return (type(value), repr(value))
    return value
