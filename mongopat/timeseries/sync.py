"""Two collections of readings compared: what one lacks, holds in addition, or holds in another version.

A time-series migration keeps the original collection and its time-series copy side by side until the
application has switched, so each ``up`` makes the copy agree with the original, and ``down`` gives the
original what the application wrote to the copy. Two facts make that safe:

- A **digest** of a collection's readings (their count and the sum of a 64-bit hash of each, in any order)
  recorded when the two last agreed tells, by one scan, whether a side was written since. A reading is
  hashed in its canonical form (sub-documents' fields sorted): a time-series collection returns a
  reading's fields in its own order, and sorts its metaField's sub-documents.
- :class:`Differences` streams one side's ``(_id, hash)`` pairs into a temporary SQLite table and walks the
  other side against it, so memory stays flat whatever the collections hold.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import bson

from mongopat.timeseries.buckets import normalised_meta

Document = dict[str, Any]
MASK = (1 << 64) - 1
# Readings looked up in the table at once while walking.
CHUNK = 1000


def canonical(document: Document) -> bytes:
    """A reading's BSON with every sub-document's fields sorted (types and array order kept)."""
    return bson.encode(normalised_meta(document))


def reading_hash(document: Document) -> int:
    return int.from_bytes(hashlib.blake2b(canonical(document), digest_size=8).digest(), "little")


def key_of(value: Any) -> bytes:
    """An ``_id`` as a table key: its BSON, so that types stay apart."""
    return bson.encode({"": value})


def id_of(key: bytes) -> Any:
    return bson.decode(key)[""]


@dataclass
class Digest:
    """An order-free fingerprint of a multiset of readings."""

    count: int = 0
    total: int = 0

    def add(self, hashed: int) -> None:
        self.count += 1
        self.total = (self.total + hashed) & MASK

    def remove(self, hashed: int) -> None:
        self.count -= 1
        self.total = (self.total - hashed) & MASK

    def plus(self, other: Digest) -> Digest:
        return Digest(self.count + other.count, (self.total + other.total) & MASK)

    def to_list(self) -> list[Any]:
        # A changelog keeps it as a count and a hexadecimal string: BSON has no unsigned 64-bit integer.
        return [self.count, f"{self.total:016x}"]

    @classmethod
    def from_list(cls, value: Any) -> Digest | None:
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            return None
        return cls(int(value[0]), int(str(value[1]), 16))

    @classmethod
    def of(cls, documents: Iterable[Document]) -> Digest:
        found = cls()
        for document in documents:
            found.add(reading_hash(document))
        return found


@dataclass(frozen=True)
class Change:
    """How the replica departs from the truth at one ``_id``: ``missing`` (the truth's reading, absent from
    the replica), ``differs`` (the replica holds another version, or several readings of that ``_id``) or
    ``extra`` (only the replica has it; ``document`` is None, ``time`` its reading's time when the replica
    was read with a time field)."""

    kind: Literal["missing", "differs", "extra"]
    id: Any
    document: Document | None
    time: datetime.datetime | None = None
    # Where the replica keeps the reading (``locate``'s bytes), for a replica that is not one document a
    # reading: the bucket holding it and its place there.
    locator: bytes | None = None


@dataclass
class Summary:
    """What a comparison found, by kind of change."""

    missing: int = 0
    differs: int = 0
    extra: int = 0

    @property
    def total(self) -> int:
        return self.missing + self.differs + self.extra


class Differences:
    """The replica's readings as ``(_id, hash, how many)`` rows in a temporary SQLite file; :meth:`compare`
    walks the truth against them and keeps each change (with the truth's reading) in a second table, so
    that a caller decides what to do once both digests are known, before anything is written."""

    def __init__(
        self,
        replica: Iterable[Document],
        time_field: str | None = None,
        locate: Callable[[Document], bytes | None] | None = None,
    ) -> None:
        handle, self.path = tempfile.mkstemp(prefix="mongopat-sync-", suffix=".sqlite")
        os.close(handle)
        self.db = sqlite3.connect(self.path)
        self.db.execute("PRAGMA journal_mode=OFF")
        self.db.execute("PRAGMA synchronous=OFF")
        self.db.execute(
            "CREATE TABLE replica (k BLOB PRIMARY KEY, h INTEGER, n INTEGER, t REAL, at BLOB, seen INTEGER DEFAULT 0)"
        )
        self.db.execute("CREATE TABLE changes (i INTEGER PRIMARY KEY, k BLOB, kind TEXT, doc BLOB, t REAL, at BLOB)")
        self.replica = Digest()
        self.truth = Digest()
        self.summary = Summary()
        rows: list[tuple[bytes, int, float | None, bytes | None]] = []
        for document in replica:
            hashed = reading_hash(document)
            self.replica.add(hashed)
            at = locate(document) if locate else None
            rows.append((key_of(document.get("_id")), _signed(hashed), _stamp(document, time_field), at))
            if len(rows) >= CHUNK:
                self._load(rows)
                rows = []
        self._load(rows)

    def _load(self, rows: list[tuple[bytes, int, float | None, bytes | None]]) -> None:
        # A second reading of one _id (time-series collections keep no unique _id) marks the row as
        # several, so that it never counts as agreeing.
        self.db.executemany(
            "INSERT INTO replica (k, h, n, t, at) VALUES (?, ?, 1, ?, ?) ON CONFLICT(k) DO UPDATE SET n = n + 1", rows
        )

    def compare(self, truth: Iterable[Document], locate: Callable[[Document], bytes | None] | None = None) -> Summary:
        """Walk the truth's readings: those the replica lacks (``missing``) or holds in another version or
        more than once (``differs``), then the ``_id``s only the replica holds (``extra``). A change found
        in the truth is located by ``locate`` where given, else where the replica keeps it."""
        chunk: list[tuple[bytes, int, Document, bytes | None]] = []
        for document in truth:
            hashed = reading_hash(document)
            self.truth.add(hashed)
            chunk.append((key_of(document.get("_id")), hashed, document, locate(document) if locate else None))
            if len(chunk) >= CHUNK:
                self._compare(chunk)
                chunk = []
        self._compare(chunk)
        unseen = self.db.execute("SELECT k, t, at FROM replica WHERE seen = 0")
        extra = [(k, "extra", None, t, at) for k, t, at in unseen]
        self.db.executemany("INSERT INTO changes (k, kind, doc, t, at) VALUES (?, ?, ?, ?, ?)", extra)
        self.summary.extra = len(extra)
        return self.summary

    def _compare(self, chunk: list[tuple[bytes, int, Document, bytes | None]]) -> None:
        if not chunk:
            return
        keys = [k for k, _h, _d, _at in chunk]
        marks = ",".join("?" * len(keys))
        rows = list(self.db.execute(f"SELECT k, h, n, at FROM replica WHERE k IN ({marks})", keys))
        known = {k: (h, n) for k, h, n, _at in rows}
        located = {k: at for k, _h, _n, at in rows}
        self.db.executemany("UPDATE replica SET seen = seen + 1 WHERE k = ?", [(k,) for k in keys if k in known])
        found = []
        for key, hashed, document, at in chunk:
            version = known.get(key)
            if version is None:
                found.append((key, "missing", bson.encode(document), at))
                self.summary.missing += 1
            elif version != (_signed(hashed), 1):
                found.append((key, "differs", bson.encode(document), at or located.get(key)))
                self.summary.differs += 1
        self.db.executemany("INSERT INTO changes (k, kind, doc, at) VALUES (?, ?, ?, ?)", found)

    def changes(self, *kinds: str) -> Iterator[Change]:
        """The changes kept by :meth:`compare` (of ``kinds``, or all), in the order found."""
        wanted = kinds or ("missing", "differs", "extra")
        marks = ",".join("?" * len(wanted))
        query = f"SELECT k, kind, doc, t, at FROM changes WHERE kind IN ({marks}) ORDER BY i"
        for key, kind, doc, stamp, at in self.db.execute(query, wanted):
            when = None if stamp is None else datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc)
            yield Change(kind, id_of(key), None if doc is None else bson.decode(doc), when, at)

    def replica_hash(self, value: Any) -> int | None:
        """The hash of the replica's reading of ``_id`` ``value`` as compared (None: it had none, or several)."""
        row = self.db.execute("SELECT h, n FROM replica WHERE k = ?", (key_of(value),)).fetchone()
        return None if row is None or row[1] != 1 else row[0] & MASK

    def close(self) -> None:
        self.db.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)

    def __enter__(self) -> Differences:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _signed(value: int) -> int:
    """SQLite integers are signed 64-bit."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _stamp(document: Document, time_field: str | None) -> float | None:
    when = document.get(time_field) if time_field else None
    if not isinstance(when, datetime.datetime):
        return None
    return when.replace(tzinfo=datetime.timezone.utc).timestamp()
