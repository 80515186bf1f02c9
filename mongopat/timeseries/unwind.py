"""What a collection holds as readings, for the timeseries step: its documents, or the elements of the
buckets an application made by hand (the bucket pattern), unwound.

A hand-made bucket is one document of a series holding its readings in an array: ``{_id, <series>,
<array>: [{<time>, ...measurements}, ...], <count>?, <start>?, <end>?}``. Unwound, each element becomes a
reading of its own with the bucket's series field (the time-series collection's metaField). An element
without an ``_id`` gets one made from its bucket's ``_id`` and its place there, so that copying it again
after a crash finds it, and a ``_id`` that starts with its time, as a client's ObjectId does. ``down`` puts
what the application wrote to the time-series collection back into buckets: a reading changed or removed
there changes or leaves its element, its bucket's count follows; readings the application inserted there
go into new buckets of their series, ``max_readings`` at most each, their start and end its first and
last time. Other summaries a bucket keeps (sums, minimums) are not recomputed.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import bson
from bson import ObjectId

from mongopat.timeseries.sync import Change, reading_hash

Document = dict[str, Any]


@dataclass(frozen=True)
class Place:
    """Where a reading of a hand-made bucket sits: the bucket's ``_id``, the element's index, and the hash
    the bucket had when it was read (``down`` changes it only while it still has it)."""

    bucket: Any
    index: int
    bucket_hash: int

    def to_bytes(self) -> bytes:
        return bson.encode({"b": self.bucket, "i": self.index, "h": f"{self.bucket_hash:016x}"})

    @classmethod
    def from_bytes(cls, raw: bytes) -> Place:
        found = bson.decode(raw)
        return cls(found["b"], int(found["i"]), int(found["h"], 16))


def made_id(bucket_id: Any, index: int, when: datetime.datetime) -> ObjectId:
    """The ``_id`` of an element that has none: its time's seconds, then a hash of its bucket and place."""
    seconds = int(when.replace(tzinfo=datetime.timezone.utc).timestamp()) & 0xFFFFFFFF
    digest = hashlib.blake2b(bson.encode({"b": bucket_id, "i": index}), digest_size=8).digest()
    return ObjectId(seconds.to_bytes(4, "big") + digest)


class Readings:
    """The readings of a collection's documents: each document with a date in the time field (``array``
    None), or the dated elements of each hand-made bucket."""

    def __init__(
        self,
        time_field: str,
        array: str | None = None,
        meta_field: str | None = None,
        count_field: str | None = None,
        start_field: str | None = None,
        end_field: str | None = None,
        max_readings: int = 1000,
    ) -> None:
        self.time_field, self.array, self.meta_field = time_field, array, meta_field
        self.count_field, self.start_field, self.end_field = count_field, start_field, end_field
        self.max_readings = max_readings
        self._place: Place | None = None  # of the reading :meth:`stream` yielded last

    @property
    def unwinds(self) -> bool:
        return self.array is not None

    def _dated(self, value: Any) -> bool:
        return isinstance(value, datetime.datetime)

    def of(self, document: Document) -> list[Document]:
        """The dated readings ``document`` holds."""
        return [reading for reading, _place in self._with_places(document)]

    def _with_places(self, document: Document) -> Iterator[tuple[Document, Place | None]]:
        if self.array is None:
            if self._dated(document.get(self.time_field)):
                yield document, None
            return
        elements = document.get(self.array)
        if not isinstance(elements, list):
            return
        bucket_hash = reading_hash(document)
        for index, element in enumerate(elements):
            if not isinstance(element, dict) or not self._dated(element.get(self.time_field)):
                continue
            reading: Document = {}
            if "_id" not in element:
                reading["_id"] = made_id(document.get("_id"), index, element[self.time_field])
            reading.update(element)
            if self.meta_field is not None and self.meta_field in document:
                reading[self.meta_field] = document[self.meta_field]
            yield reading, Place(document.get("_id"), index, bucket_hash)

    def refused(self, document: Document) -> int:
        """Readings of ``document`` without a date, which no time-series collection takes."""
        if self.array is None:
            return 0 if self._dated(document.get(self.time_field)) else 1
        elements = document.get(self.array)
        if not isinstance(elements, list):
            return 0
        return sum(1 for e in elements if not (isinstance(e, dict) and self._dated(e.get(self.time_field))))

    def stream(self, documents: Iterable[Document]) -> Iterator[Document]:
        """Every dated reading of ``documents``; :meth:`locate` names the place of the one yielded last."""
        for document in documents:
            for reading, place in self._with_places(document):
                self._place = place
                yield reading

    def locate(self, _reading: Document) -> bytes | None:
        return None if self._place is None else self._place.to_bytes()

    def pending(self, last_id: Any) -> dict[str, Any]:
        """Documents holding readings inserted after the copy's last one: new documents (and buckets)."""
        if self.array is None:
            return {"_id": {"$gt": last_id}, self.time_field: {"$type": "date"}}
        return {"_id": {"$gt": last_id}}

    # -- down: the time-series collection's readings back into buckets --------------------------------

    def element_of(self, reading: Document, place: Place | None) -> Document:
        """A reading as an element of its bucket: without the series field, and without an ``_id`` that
        was made for it."""
        element = {k: v for k, v in reading.items() if k != self.meta_field}
        when = element.get(self.time_field)
        if place is not None and self._dated(when) and element.get("_id") == made_id(place.bucket, place.index, when):
            del element["_id"]
        return element

    def rebuilt(self, bucket: Document, changes: list[Change]) -> Document | None:
        """``bucket`` with each change to one of its readings made (None: no reading is left in it)."""
        assert self.array is not None
        elements = list(bucket.get(self.array) or [])
        removed = set()
        for change in changes:
            place = Place.from_bytes(change.locator) if change.locator else None
            if place is None or place.index >= len(elements):
                continue
            if change.kind == "extra":
                removed.add(place.index)
            elif change.document is not None:
                elements[place.index] = self.element_of(change.document, place)
        kept = [e for i, e in enumerate(elements) if i not in removed]
        if not kept:
            return None
        rebuilt = dict(bucket)
        rebuilt[self.array] = kept
        if self.count_field and self.count_field in bucket:
            rebuilt[self.count_field] = len(kept)
        return rebuilt

    def new_buckets(self, readings: list[Document]) -> list[Document]:
        """Buckets of the series for readings that no bucket held (inserted into the time-series
        collection by the application), in time order, :attr:`max_readings` at most each."""
        assert self.array is not None
        by_series: dict[bytes, list[Document]] = {}
        for reading in readings:
            by_series.setdefault(bson.encode({"m": reading.get(self.meta_field)}), []).append(reading)
        buckets = []
        for group in by_series.values():
            group.sort(key=lambda r: r[self.time_field])
            for start in range(0, len(group), self.max_readings):
                chunk = group[start : start + self.max_readings]
                bucket: Document = {"_id": ObjectId()}
                if self.meta_field is not None and self.meta_field in chunk[0]:
                    bucket[self.meta_field] = chunk[0][self.meta_field]
                if self.start_field:
                    bucket[self.start_field] = chunk[0][self.time_field]
                if self.end_field:
                    bucket[self.end_field] = chunk[-1][self.time_field]
                if self.count_field:
                    bucket[self.count_field] = len(chunk)
                bucket[self.array] = [self.element_of(r, None) for r in chunk]
                buckets.append(bucket)
        return buckets
