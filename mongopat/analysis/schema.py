"""Streaming inference of a collection's shape: field paths, types, presence, arrays, cardinality.

The documents are walked once; each field path owns a small buffer of its scalar values that is folded
into bounded summaries every ``flush`` (types, distinct values, array lengths). Memory therefore grows
with the number of distinct field paths, never with the number of documents.

Paths use dots for sub-documents and ``[]`` for array elements: ``items[].price``.
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Callable
from typing import Any

from mongopat.analysis.sketches import DistinctCounter, Distribution
from mongopat.bsontypes import INT32_MAX, INT32_MIN, type_name
from mongopat.sources.extjson import decode_wrapper

# Array-length bins for the small histogram in the report.
ARRAY_LENGTH_BOUNDS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10000, 100000)


class Limits:
    """Memory bounds of the inference; defaults suit collections with up to thousands of paths."""

    def __init__(self, distinct_limit: int = 10_000, top_values: int = 10, low_cardinality: int = 20) -> None:
        self.distinct_limit = distinct_limit
        self.top_values = top_values
        self.low_cardinality = low_cardinality


class Slot:
    """Where values occur: a field of a document, or the elements of an array."""

    __slots__ = (
        "path",
        "depth",
        "in_array",
        "scalars",
        "types",
        "buffer",
        "n_object",
        "n_array",
        "document",
        "element",
        "lengths",
        "length_dist",
        "distinct",
        "limits",
        "on_dates",
    )

    def __init__(self, path: str, depth: int, in_array: bool, limits: Limits) -> None:
        self.path = path
        self.depth = depth
        self.in_array = in_array
        self.limits = limits
        self.scalars = 0  # values other than documents and arrays, counted at flush
        self.types: Counter[str] = Counter()
        self.buffer: list[Any] = []
        self.n_object = 0
        self.n_array = 0
        self.document: DocumentShape | None = None
        self.element: Slot | None = None
        self.lengths: list[int] = []
        self.length_dist: Distribution | None = None
        self.distinct = DistinctCounter(limit=limits.distinct_limit)
        # Called with the dates of this path at each flush (used for insert-rate profiles).
        self.on_dates: Callable[[str, list[datetime.datetime]], None] | None = None

    @property
    def count(self) -> int:
        """Occurrences: documents holding this field, or elements of this array (derived, not counted in
        the walk, to keep the hot loop short)."""
        return self.scalars + len(self.buffer) + self.n_object + self.n_array

    def make_document(self) -> DocumentShape:
        self.document = DocumentShape(self.path, self.depth, self.in_array, self.limits, self.on_dates)
        return self.document

    def make_element(self) -> Slot:
        self.element = Slot(self.path + "[]", self.depth, True, self.limits)
        self.element.on_dates = self.on_dates
        return self.element

    def flush(self) -> None:
        buffer = self.buffer
        if buffer:
            self.scalars += len(buffer)
            kinds = Counter(map(type, buffer))
            if int in kinds:
                ints = [v for v in buffer if type(v) is int]
                longs = 0
                if min(ints) < INT32_MIN or max(ints) > INT32_MAX:
                    longs = sum(1 for v in ints if v < INT32_MIN or v > INT32_MAX)
                self.types["int"] += len(ints) - longs
                if longs:
                    self.types["long"] += longs
                del kinds[int]
            for kind, count in kinds.items():
                self.types[type_name(kind)] += count
            if datetime.datetime in kinds and self.on_dates is not None and not self.in_array:
                self.on_dates(self.path, [v for v in buffer if type(v) is datetime.datetime])
            self.distinct.add_many(buffer)
            self.buffer = []
        if self.lengths:
            if self.length_dist is None:
                self.length_dist = Distribution()
            self.length_dist.add_many(self.lengths)
            self.lengths = []
        if self.document is not None:
            self.document.flush()
        if self.element is not None:
            self.element.flush()

    def merge(self, other: Slot) -> None:
        """Fold in the same path's slot from another part of the stream (both flushed)."""
        self.scalars += other.scalars
        self.types.update(other.types)
        self.n_object += other.n_object
        self.n_array += other.n_array
        if other.length_dist is not None:
            if self.length_dist is None:
                self.length_dist = other.length_dist
            else:
                self.length_dist.merge(other.length_dist)
        self.distinct.merge(other.distinct)
        if other.document is not None:
            if self.document is None:
                self.document = other.document
            else:
                self.document.merge(other.document)
        if other.element is not None:
            if self.element is None:
                self.element = other.element
            else:
                self.element.merge(other.element)

    def all_types(self) -> Counter[str]:
        types = Counter(self.types)
        if self.n_object:
            types["object"] += self.n_object
        if self.n_array:
            types["array"] += self.n_array
        return types


class DocumentShape:
    """The fields seen in documents at one place: the root, a sub-document, or documents inside an array."""

    __slots__ = ("path", "depth", "in_array", "count", "fields", "limits", "on_dates")

    def __init__(
        self,
        path: str,
        depth: int,
        in_array: bool,
        limits: Limits,
        on_dates: Callable[[str, list[datetime.datetime]], None] | None = None,
    ) -> None:
        self.path = path
        self.depth = depth
        self.in_array = in_array
        self.limits = limits
        self.count = 0
        self.fields: dict[str, Slot] = {}
        self.on_dates = on_dates

    def add_field(self, name: str) -> Slot:
        path = f"{self.path}.{name}" if self.path else name
        slot = Slot(path, self.depth + 1, self.in_array, self.limits)
        slot.on_dates = self.on_dates
        self.fields[name] = slot
        return slot

    def flush(self) -> None:
        for slot in self.fields.values():
            slot.flush()

    def merge(self, other: DocumentShape) -> None:
        self.count += other.count
        for name, slot in other.fields.items():
            mine = self.fields.get(name)
            if mine is None:
                self.fields[name] = slot
            else:
                mine.merge(slot)


def walk_document(shape: DocumentShape, doc: dict[str, Any]) -> None:
    """Fold one document into ``shape``. The hot loop of analysis: keep it lean.

    Documents straight from a mongoexport file may still hold Extended JSON wrappers (``{"$oid": ...}``):
    they are decoded here, in place, rather than in a separate pass over the document, which would cost
    as much again as the whole walk.
    """
    shape.count += 1
    fields = shape.fields
    for key, value in doc.items():
        slot = fields.get(key)
        if slot is None:
            slot = shape.add_field(key)
        kind = type(value)
        if kind is dict:
            if value and next(iter(value))[:1] == "$":
                decoded = decode_wrapper(value)
                if decoded is not value:
                    doc[key] = decoded
                    slot.buffer.append(decoded)
                    continue
            slot.n_object += 1
            walk_document(slot.document or slot.make_document(), value)
        elif kind is list:
            slot.n_array += 1
            slot.lengths.append(len(value))
            walk_array(slot.element or slot.make_element(), value)
        else:
            slot.buffer.append(value)


def walk_array(slot: Slot, items: list[Any]) -> None:
    # Same branches as walk_document, written out again on purpose: a shared helper would add a
    # function call per value to the hottest loop of the tool.
    append = slot.buffer.append
    for index, value in enumerate(items):
        kind = type(value)
        if kind is dict:
            if value and next(iter(value))[:1] == "$":
                decoded = decode_wrapper(value)
                if decoded is not value:
                    items[index] = decoded
                    append(decoded)
                    continue
            slot.n_object += 1
            walk_document(slot.document or slot.make_document(), value)
        elif kind is list:
            slot.n_array += 1
            slot.lengths.append(len(value))
            walk_array(slot.element or slot.make_element(), value)
        else:
            append(value)


def iter_slots(shape: DocumentShape):
    """Every field slot below ``shape``, depth first, in first-seen order."""
    for slot in shape.fields.values():
        yield slot, shape
        yield from _iter_slot_children(slot)


def _iter_slot_children(slot: Slot):
    if slot.document is not None:
        yield from iter_slots(slot.document)
    if slot.element is not None:
        element = slot.element
        if element.n_array:
            # Arrays of arrays: the inner arrays get an entry of their own (path ``m[]``).
            yield element, None
        yield from _iter_slot_children(element)
