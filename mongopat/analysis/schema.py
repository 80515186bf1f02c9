"""Streaming inference of a collection's shape: field paths, types, presence, arrays, cardinality.

The documents are walked once; each field path owns a small buffer of its scalar values that is folded
into bounded summaries every ``flush`` (types, distinct values, array lengths). Memory therefore grows
with the number of distinct field paths, never with the number of documents.

Paths use dots for sub-documents and ``[]`` for array elements: ``items[].price``.
"""

from __future__ import annotations

import datetime
import re
from collections import Counter
from collections.abc import Callable
from itertools import chain, compress, groupby, repeat
from operator import add, is_, itemgetter, setitem
from typing import Any

from mongopat.analysis.bsonsize import Sizes, array_sizes, document_sizes, encoded_size, layout_size, scalar_sizes
from mongopat.analysis.sentinels import NumberRange
from mongopat.analysis.sketches import DistinctCounter, Distribution
from mongopat.analysis.values import ValueSample
from mongopat.bsontypes import INT32_MAX, INT32_MIN, type_name
from mongopat.sources.extjson import decode_wrapper, decode_wrappers

# Array-length bins for the small histogram in the report.
ARRAY_LENGTH_BOUNDS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10000, 100000)

# Sub-documents whose keys are values (ids, hashes, dates, numbers) are one *map*, not thousands of fields.
# A sub-document is checked when its number of distinct keys reaches MAP_MIN_KEYS and at every doubling:
# it is a map when VALUE_KEY_SHARE of its keys have the form of a value, or, from MAP_SPARSE_KEYS keys on,
# when its keys are each present in at most MAP_SPARSE_PRESENCE of its documents on average.
MAP_MIN_KEYS = 32
MAP_SPARSE_KEYS = 256
VALUE_KEY_SHARE = 0.9
MAP_SPARSE_PRESENCE = 0.05
# The path segment that stands for any key of a map: ``tier_and_details.<key>.tier``.
MAP_KEY = "<key>"
# Value fields compared with their key (``{"<id>": {"id": "<id>"}}``) while fewer than this many are tracked.
MAP_KEY_FIELDS_TRACKED = 32

_KEY_FORMS = (
    ("objectId", re.compile(r"[0-9a-fA-F]{24}")),
    ("uuid", re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")),
    ("hex", re.compile(r"(?=[^g-zG-Z]*\d)[0-9a-fA-F]{16,}")),
    ("integer", re.compile(r"-?\d{1,19}")),
    ("date", re.compile(r"\d{4}-?\d{2}-?\d{2}([T _]\d{2}(:?\d{2}(:?\d{2}(\.\d+)?)?)?Z?)?")),
)


def key_form(key: str) -> str:
    """What a key looks like: ``objectId``, ``uuid``, ``hex``, ``integer``, ``date`` (values) or ``name``."""
    for form, pattern in _KEY_FORMS:
        if pattern.fullmatch(key):
            # Eight digits are a date (20240501) more often than a number.
            if form == "integer" and len(key) == 8 and key[4:6] <= "12" and key[:2] in ("19", "20"):
                return "date"
            return form
    return "name"


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
        "buffer_kinds",
        "buffer_typed",
        "n_object",
        "n_array",
        "document",
        "element",
        "lengths",
        "length_dist",
        "distinct",
        "limits",
        "on_dates",
        "numbers",
        "string_lengths",
        "number_sample",
        "date_sample",
        "length_sample",
    )

    def __init__(self, path: str, depth: int, in_array: bool, limits: Limits) -> None:
        self.path = path
        self.depth = depth
        self.in_array = in_array
        self.limits = limits
        self.scalars = 0  # values other than documents and arrays, counted at flush
        self.types: Counter[str] = Counter()
        self.buffer: list[Any] = []
        # The types of the first ``buffer_typed`` values of the buffer, when the walk knew them (a column of
        # values, see walk_values): the flush then need not look at every value's type again.
        self.buffer_kinds: set[type] = set()
        self.buffer_typed = 0
        self.n_object = 0
        self.n_array = 0
        self.document: DocumentShape | None = None
        self.element: Slot | None = None
        self.lengths: list[int] = []
        self.length_dist: Distribution | None = None
        self.distinct = DistinctCounter(limit=limits.distinct_limit)
        # The numbers' range and sentinel candidates (created with the first number).
        self.numbers: NumberRange | None = None
        # Strings: how many, their characters in all, the longest (created with the first string).
        self.string_lengths: list[int] | None = None
        # Samples of the numbers, dates and string lengths, for their distributions (created with the first).
        self.number_sample: ValueSample | None = None
        self.date_sample: ValueSample | None = None
        self.length_sample: Distribution | None = None
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
            # Most buffers hold one type: known from the walk, or told by a set of types (a third of a
            # Counter's cost), it is counted without a Counter pass over the values.
            kinds_seen = self.buffer_kinds if self.buffer_typed == len(buffer) else set(map(type, buffer))
            single = len(kinds_seen) == 1
            kinds = Counter({next(iter(kinds_seen)): len(buffer)}) if single else Counter(map(type, buffer))
            self.buffer_kinds, self.buffer_typed = set(), 0
            if str in kinds:
                lengths = list(map(len, buffer if single else [v for v in buffer if type(v) is str]))
                if self.string_lengths is None:
                    self.string_lengths = [0, 0, 0]
                totals = self.string_lengths
                totals[0] += len(lengths)
                totals[1] += sum(lengths)
                totals[2] = max(totals[2], max(lengths))
                if self.length_sample is None:
                    self.length_sample = Distribution()
                self.length_sample.add_many(lengths)
            if int in kinds or float in kinds:
                if self.numbers is None:
                    self.numbers = NumberRange()
                    self.number_sample = ValueSample(bounds=False)
                numbers = buffer if single else [v for v in buffer if type(v) in (int, float)]
                self.numbers.add_many(numbers)
                assert self.number_sample is not None
                self.number_sample.add_many(numbers)
            if int in kinds:
                ints = buffer if single else [v for v in buffer if type(v) is int]
                longs = 0
                if min(ints) < INT32_MIN or max(ints) > INT32_MAX:
                    longs = sum(1 for v in ints if v < INT32_MIN or v > INT32_MAX)
                self.types["int"] += len(ints) - longs
                if longs:
                    self.types["long"] += longs
                del kinds[int]
            for kind, count in kinds.items():
                self.types[type_name(kind)] += count
            if datetime.datetime in kinds:
                dates = buffer if single else [v for v in buffer if type(v) is datetime.datetime]
                if self.date_sample is None:
                    self.date_sample = ValueSample()
                self.date_sample.add_many(dates)
                if self.on_dates is not None and not self.in_array:
                    self.on_dates(self.path, dates)
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
        if other.string_lengths is not None:
            if self.string_lengths is None:
                self.string_lengths = list(other.string_lengths)
            else:
                mine, theirs = self.string_lengths, other.string_lengths
                mine[0], mine[1], mine[2] = mine[0] + theirs[0], mine[1] + theirs[1], max(mine[2], theirs[2])
        if other.numbers is not None:
            if self.numbers is None:
                self.numbers = other.numbers
            else:
                self.numbers.merge(other.numbers)
        for name in ("number_sample", "date_sample", "length_sample"):
            theirs = getattr(other, name)
            if theirs is not None:
                mine = getattr(self, name)
                if mine is None:
                    setattr(self, name, theirs)
                else:
                    mine.merge(theirs)
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

    __slots__ = ("path", "depth", "in_array", "count", "empty", "fields", "limits", "on_dates", "keys", "layouts")

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
        self.empty = 0  # empty documents ({}): a map's slot is present in the others
        self.fields: dict[str, Slot] = {}
        self.on_dates = on_dates
        # Set when this sub-document turned out to be a map: its keys, and ``fields`` holds one slot.
        self.keys: MapKeys | None = None
        # Key sequences (``tuple(document)``) whose every key already has a slot: documents laid out so are
        # walked column by column (:func:`walk_documents`).
        self.layouts: set[tuple[str, ...]] = set()

    def add_field(self, name: str) -> Slot:
        if self.keys is not None:  # recognised as a map in the middle of a document: the rest of its keys
            self.keys.add_known(name, 1)
            return self.fields[MAP_KEY]
        path = f"{self.path}.{name}" if self.path else name
        slot = Slot(path, self.depth + 1, self.in_array, self.limits)
        slot.on_dates = self.on_dates
        self.fields[name] = slot
        known = len(self.fields)
        # Maps are checked at MAP_MIN_KEYS keys and every doubling (cheap: a new key). A whole document is one
        # only when its keys have the form of values (a document keyed by ids); sparse top-level fields are
        # fields.
        if (
            known >= MAP_MIN_KEYS
            and known & (known - 1) == 0
            and (self._looks_like_map() if self.path else self._keyed_by_values())
        ):
            self.to_map()
            assert self.keys is not None
            self.keys.occurrences += 1  # the value the caller is about to fold in under this key
            return self.fields[MAP_KEY]
        return slot

    def _keyed_by_values(self) -> bool:
        names = [name for name in self.fields if name != "_id"]
        return sum(1 for name in names if key_form(name) != "name") >= VALUE_KEY_SHARE * len(names)

    def _looks_like_map(self) -> bool:
        names = list(self.fields)
        values = sum(1 for name in names if key_form(name) != "name")
        if values >= VALUE_KEY_SHARE * len(names):
            return True
        if len(names) < MAP_SPARSE_KEYS or not self.count:
            return False
        self.flush()
        occurrences = sum(slot.count for slot in self.fields.values())
        return occurrences <= MAP_SPARSE_PRESENCE * len(names) * self.count

    def to_map(self) -> None:
        """Fold every key's slot into the one slot of the map (``path.<key>``); later documents go straight
        there (:func:`walk_map`)."""
        if self.keys is not None:
            return
        self.flush()
        keys = MapKeys(self.limits)
        merged = Slot(f"{self.path}.{MAP_KEY}" if self.path else MAP_KEY, self.depth + 1, self.in_array, self.limits)
        merged.on_dates = self.on_dates
        # A document keyed by ids keeps its _id apart: it names the document, it is no entry of the map.
        kept = {"_id": self.fields["_id"]} if not self.path and "_id" in self.fields else {}
        for name, slot in self.fields.items():
            if name in kept:
                continue
            keys.add_known(name, slot.count)
            _repath(slot, merged.path)
            merged.merge(slot)
        keys.documents_before = self.count
        # In place: the walk that called add_field holds this dict.
        self.fields.clear()
        self.fields.update(kept)
        self.fields[MAP_KEY] = merged
        self.keys = keys

    def flush(self) -> None:
        for slot in self.fields.values():
            slot.flush()
        if self.keys is not None:
            self.keys.flush()

    def paths(self) -> int:
        """Slots at and below this shape: the columns a walk of its documents fills."""
        return sum(1 for _ in iter_slots(self))

    def merge(self, other: DocumentShape) -> None:
        if other.keys is not None or self.keys is not None:
            # One part of the stream saw enough keys to call this a map: then it is one in both.
            self.to_map()
            other.to_map()
            assert self.keys is not None and other.keys is not None
            self.keys.merge(other.keys)
        self.count += other.count
        self.empty += other.empty
        for name, slot in other.fields.items():
            mine = self.fields.get(name)
            if mine is None:
                self.fields[name] = slot
            else:
                mine.merge(slot)


class MapKeys:
    """The keys of a map: how many distinct ones, their form, how many per document, and which field of the
    values repeats the key. Bounded like any other path: a DistinctCounter and a few counters."""

    __slots__ = ("distinct", "buffer", "per_document", "occurrences", "documents_before",
                 "key_fields", "key_fields_seen", "lengths")  # fmt: skip

    def __init__(self, limits: Limits) -> None:
        self.distinct = DistinctCounter(limit=limits.distinct_limit, top_limit=0)
        self.buffer: list[str] = []
        self.per_document = Distribution()
        self.lengths: list[int] = []
        self.occurrences = 0
        # Documents walked before the sub-document was recognised as a map (their keys per document are
        # counted in ``occurrences`` but not in ``per_document``).
        self.documents_before = 0
        self.key_fields: Counter[str] = Counter()  # value field -> values where it equals the key
        self.key_fields_seen = 0  # values that were documents

    def add_known(self, key: str, occurrences: int) -> None:
        self.buffer.append(key)
        self.occurrences += occurrences

    def flush(self) -> None:
        if self.buffer:
            self.distinct.add_many(self.buffer)
            self.buffer = []
        if self.lengths:
            self.per_document.add_many(self.lengths)
            self.lengths = []

    def merge(self, other: MapKeys) -> None:
        self.flush()
        other.flush()
        self.distinct.merge(other.distinct)
        self.per_document.merge(other.per_document)
        self.occurrences += other.occurrences
        self.documents_before += other.documents_before
        self.key_fields.update(other.key_fields)
        self.key_fields_seen += other.key_fields_seen

    def summary(self, value_path: str, documents: int) -> dict[str, Any]:
        self.flush()
        # The distinct keys kept (all of them up to the limit, a uniform sample past it) tell the forms.
        forms = Counter(key_form(str(key)) for key in self.distinct.values)
        total = sum(forms.values()) or 1
        key_field = None
        if self.key_fields_seen:
            name, hits = max(self.key_fields.items(), key=lambda item: item[1], default=(None, 0))
            if name is not None and hits == self.key_fields_seen:
                key_field = name
        measured = self.per_document.summary() if self.per_document.n else None
        return {
            "value_path": value_path,
            "keys": min(self.distinct.estimate(), self.occurrences) if self.occurrences else self.distinct.estimate(),
            "keys_exact": self.distinct.exact,
            "key_forms": [{"form": form, "share": round(count / total, 4)} for form, count in forms.most_common()],
            "keys_per_document": {
                "mean": round(self.occurrences / documents, 2) if documents else None,
                "p50": measured["p50"] if measured else None,
                "p95": measured["p95"] if measured else None,
                "max": measured["max"] if measured else None,
                "documents_measured": self.per_document.n,
            },
            # A field of every value that holds the value's own key (``{"<id>": {"id": "<id>"}}``), if any.
            "key_in_value": key_field,
        }


def _repath(slot: Slot, path: str) -> None:
    """Give ``slot`` and everything below it the paths they have under ``path``."""
    slot.path = path
    if slot.document is not None:
        slot.document.path = path
        for name, child in slot.document.fields.items():
            _repath(child, f"{path}.{name}")
    if slot.element is not None:
        _repath(slot.element, path + "[]")


# Layouts remembered per document shape: past this many, a layout's keys are looked up again each time.
LAYOUTS_KEPT = 1024


def walk_documents(
    shape: DocumentShape,
    docs: list[dict[str, Any]],
    measure: bool = True,
    doc_layouts: list[tuple[str, ...]] | None = None,
) -> list[int] | None:
    """Fold a batch of documents into ``shape``, in order, with the result of :func:`walk_document` on each.
    With ``measure``, returns their BSON sizes (None when one cannot be told: see
    :mod:`mongopat.analysis.bsonsize`; always None without ``measure``, for documents whose size is known).

    Documents whose keys the shape knows are walked column by column: each field's values across them go
    to its slot at once, in document order, so the work per value is done by C loops (``zip``,
    ``set(map(type, ...))``, ``list.extend``) instead of a Python loop per value. They need not share their
    keys: exports made by applications rarely do (optional fields), while their sub-documents often do. A
    document with keys the shape has not seen yet, an empty one, and the documents of a map are walked one
    by one, after the columns of the documents before them, so slots are created, and maps recognised,
    exactly when the one-by-one walk would. ``doc_layouts``: each document's keys, in order, when the
    caller has them already (the walk leaves every document's keys as they were).
    """
    layouts = shape.layouts
    if doc_layouts is None:
        doc_layouts = list(map(tuple, docs))
    if shape.keys is None and layouts.issuperset(doc_layouts):  # the common case, once the shape has learnt
        return _walk_columns(shape, docs, doc_layouts, measure)
    fields = shape.fields
    sizes: list[int] | None = [] if measure else None
    # Documents of known keys, with their layouts, walked together before the next one-by-one.
    known: list[dict[str, Any]] = []
    known_layouts: list[tuple[str, ...]] = []

    def walk_known() -> None:
        nonlocal sizes
        if known:
            sizes = _extended(sizes, _walk_columns(shape, known, known_layouts, measure))
            known.clear()
            known_layouts.clear()

    for layout, group in groupby(docs, tuple):
        run = list(group)
        while run:
            if shape.keys is not None or not layout:
                walk_known()
                for doc in run:
                    walk_document(shape, doc)
                sizes = _measured(sizes, run)
                break
            if layout not in layouts:
                if not all(key in fields for key in layout):
                    walk_known()
                    walk_document(shape, run[0])  # creates the new keys' slots
                    sizes = _measured(sizes, run[:1])
                    del run[0]
                    continue
                if len(layouts) < LAYOUTS_KEPT:
                    layouts.add(layout)
            known += run
            known_layouts += [layout] * len(run)
            break
    walk_known()
    return sizes


def _extended(sizes: list[int] | None, more: list[int] | None) -> list[int] | None:
    if sizes is None or more is None:
        return None
    sizes += more
    return sizes


def _walk_columns(
    shape: DocumentShape, docs: list[dict[str, Any]], doc_layouts: list[tuple[str, ...]], measure: bool
) -> list[int] | None:
    """Walk documents whose keys ``shape`` knows (``doc_layouts``: each one's keys, in order), a field at a
    time; their sizes, one per document."""
    fields = shape.fields
    shape.count += len(docs)
    layouts = dict.fromkeys(doc_layouts)
    if len(layouts) == 1:  # one layout: columns straight from the documents' values
        layout = doc_layouts[0]
        columns: list[Sizes] = []
        for key, values in zip(layout, zip(*map(dict.values, docs), strict=True), strict=True):
            column = list(values)
            changed, column_sizes = walk_values(fields[key], column, measure)
            if changed:  # decoded wrappers go back into the documents (any() runs the C loop to its end)
                any(map(setitem, docs, repeat(key), column))
            columns.append(column_sizes)
        if not measure:
            return None
        run_sizes = document_sizes(layout, columns)
        return [run_sizes] * len(docs) if type(run_sizes) is int else run_sizes  # type: ignore[return-value]
    totals: list[int] | None = None
    if measure:
        overheads = {layout: layout_size(layout) for layout in layouts}
        if None not in overheads.values():
            totals = list(map(overheads.__getitem__, doc_layouts))  # type: ignore[arg-type]
    everyone = range(len(docs))
    for key in dict.fromkeys(chain.from_iterable(layouts)):
        # Which documents hold the key, told by C loops (a comprehension per key was a tenth of the walk).
        holds = list(map(dict.__contains__, docs, repeat(key)))
        holders = list(compress(docs, holds))
        column = list(map(itemgetter(key), holders))
        changed, column_sizes = walk_values(fields[key], column, measure and totals is not None)
        if changed:
            any(map(setitem, holders, repeat(key), column))
        if totals is None:
            continue
        if column_sizes is None:
            totals = None
        elif len(holders) == len(docs):
            totals = list(map(add, totals, repeat(column_sizes) if type(column_sizes) is int else column_sizes))
        else:
            positions = list(compress(everyone, holds))
            each = repeat(column_sizes) if type(column_sizes) is int else column_sizes
            # totals[i] += size at each holder's position, in C: setitem returns None, so any() runs to the end
            added = map(add, map(totals.__getitem__, positions), each)  # type: ignore[arg-type]
            any(map(setitem, repeat(totals), positions, added))
    return totals


def _measured(sizes: list[int] | None, docs: list[dict[str, Any]]) -> list[int] | None:
    """``sizes`` with those of documents walked one by one, encoded."""
    if sizes is None:
        return None
    for doc in docs:
        size = encoded_size(doc)
        if size is None:
            return None
        sizes.append(size)
    return sizes


def walk_values(slot: Slot, values: list[Any], measure: bool = True) -> tuple[bool, Sizes]:
    """Fold values of one slot, in order: a field across a run of documents, or array elements.

    Returns whether Extended JSON wrappers in ``values`` were replaced by what they decode to (the caller
    puts them back into the documents or arrays they came from), and, with ``measure``, the values' BSON
    sizes (else None).
    """
    kinds = set(map(type, values))
    if dict not in kinds and list not in kinds:
        _buffer(slot, values, kinds)
        return False, scalar_sizes(values, kinds) if measure else None
    if len(kinds) == 1 and list in kinds:
        slot.n_array += len(values)
        lengths = list(map(len, values))
        slot.lengths += lengths
        items = list(chain.from_iterable(values))
        element = slot.element or slot.make_element()
        changed, item_sizes = walk_values(element, items, measure) if items else (False, 0)
        if changed:
            start = 0
            for inner in values:
                end = start + len(inner)
                inner[:] = items[start:end]
                start = end
        return False, array_sizes(lengths, item_sizes) if measure else None
    if len(kinds) == 1 and all(values):  # documents, none empty: each has a first key
        heads = set(map(next, map(iter, values)))
        wrapped = [head[:1] == "$" for head in heads]
        if not any(wrapped):
            slot.n_object += len(values)
            return False, walk_documents(slot.document or slot.make_document(), values, measure)
        if all(wrapped):
            decoded = decode_wrappers(values, heads)
            plain = any(map(is_, decoded, values))  # documents whose first key merely starts with "$"
            values[:] = decoded
            if not plain:
                kinds = set(map(type, decoded))
                _buffer(slot, decoded, kinds)
                return True, scalar_sizes(decoded, kinds) if measure else None
    # Mixed values: one at a time, as walk_array does (wrappers already decoded above are not decoded again).
    walk_array(slot, values)
    return True, None


def _buffer(slot: Slot, values: list[Any], kinds: set[type]) -> None:
    if slot.buffer_typed == len(slot.buffer):  # every value buffered so far has its type recorded
        slot.buffer_kinds |= kinds
        slot.buffer_typed += len(values)
    slot.buffer += values


def walk_document(shape: DocumentShape, doc: dict[str, Any]) -> None:
    """Fold one document into ``shape``, a value at a time: the walk of what :func:`walk_documents` does
    not walk by columns (documents with new keys, maps, fields of mixed values). Keep it lean.

    Documents straight from a mongoexport file may still hold Extended JSON wrappers (``{"$oid": ...}``):
    they are decoded here, in place, rather than in a separate pass over the document, which would cost
    as much again as the whole walk.
    """
    shape.count += 1
    if not doc:
        shape.empty += 1
        if shape.keys is not None:
            shape.keys.lengths.append(0)
        return
    if shape.keys is not None:
        walk_map(shape, doc)
        return
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
    # function call per value to a loop that runs once per value.
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


def walk_map(shape: DocumentShape, doc: dict[str, Any]) -> None:
    """Fold one map (a sub-document whose keys are values) into its one slot; the keys are counted apart.

    The values all land in one slot, as the elements of an array do, so :func:`walk_values` walks them.
    """
    keys = shape.keys
    assert keys is not None
    names: list[str] | None = None
    if not shape.path and "_id" in doc:  # a whole document keyed by ids: its _id is walked as a field
        names = [name for name in doc if name != "_id"]
        slot = shape.fields.get("_id") or shape.fields.setdefault("_id", Slot("_id", 1, False, shape.limits))
        identifier = [doc["_id"]]
        if walk_values(slot, identifier)[0]:
            doc["_id"] = identifier[0]
    entries = doc if names is None else {name: doc[name] for name in names}
    keys.buffer.extend(entries)
    keys.lengths.append(len(entries))
    keys.occurrences += len(entries)
    tracked = keys.key_fields
    for key, value in entries.items():
        if type(value) is dict and value and next(iter(value))[:1] != "$":
            keys.key_fields_seen += 1
            for name, inner in value.items():
                if inner == key and (name in tracked or len(tracked) < MAP_KEY_FIELDS_TRACKED):
                    tracked[name] += 1
    values = list(entries.values())
    if walk_values(shape.fields[MAP_KEY], values)[0]:
        doc.update(zip(list(entries), values, strict=True))  # wrappers the walk decoded go back into the document
    if len(keys.buffer) >= 4096:
        keys.flush()


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
