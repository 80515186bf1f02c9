"""``mongodump --archive`` files (plain or ``--gzip``), read as a read-only set of collections.

The format, as mongo-tools write it: a little-endian uint32 magic number; a prelude of BSON documents
(an archive header, then one per collection: database, name, metadata JSON with the indexes) ended by
the terminator ``ff ff ff ff``; then blocks, each a BSON namespace header ``{db, collection, EOF, CRC}``
followed by documents of that collection and a terminator. Blocks of several collections interleave
(mongodump writes collections concurrently); a header with ``EOF: true`` closes its collection.

Reading one collection streams the whole archive once and keeps only its blocks' documents: nothing is
held in memory but the current document.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import bson
from bson.errors import BSONError

from mongopat.compressed import READ_ERRORS, open_sniffed, unreadable
from mongopat.errors import InputError, SourceError

MAGIC = 0x8199E26D
TERMINATOR = 0xFFFFFFFF
# Largest document a server accepts, plus headroom (the same bound as for .bson files).
MAX_DOCUMENT = 16 * 1024 * 1024 + 16 * 1024
ARCHIVE_SUFFIXES = (".archive", ".archive.gz", ".agz")


@dataclass
class ArchivedCollection:
    """One collection of an archive, as its prelude describes it."""

    database: str
    name: str
    kind: str  # "collection", "view", "timeseries"
    metadata: dict[str, Any] = field(default_factory=dict)
    metadata_text: str = ""  # as mongodump wrote it (what its .metadata.json file holds)


def is_archive(path: Path) -> bool:
    """True when ``path`` starts with the archive magic number (after gunzip when gzipped)."""
    try:
        with open_sniffed(path) as handle:
            return int.from_bytes(handle.read(4), "little") == MAGIC
    except (*READ_ERRORS, SourceError):
        return False


class _Reader:
    """Length-prefixed BSON documents and terminators from a byte stream, with offsets for errors."""

    def __init__(self, path: Path, handle: IO[bytes]) -> None:
        self.path = path
        self.handle = handle
        self.offset = 0

    def read(self, size: int) -> bytes:
        try:
            data = self.handle.read(size)
        except READ_ERRORS as exc:
            raise unreadable(self.path, exc, f"at byte {self.offset:,} of the archive (decompressed)") from None
        self.offset += len(data)
        return data

    def next(self) -> tuple[int, bytes | None] | None:
        """``(offset, raw document)``, ``(offset, None)`` for a terminator, None at the end of the file."""
        start = self.offset
        header = self.read(4)
        if not header:
            return None
        if len(header) < 4:
            raise InputError(f"{self.path}: truncated archive at byte {start}")
        length = int.from_bytes(header, "little")
        if length == TERMINATOR:
            return start, None
        if length < 5 or length > MAX_DOCUMENT:
            raise InputError(f"{self.path}: invalid BSON length {length} at byte {start} of the archive")
        body = self.read(length - 4)
        if len(body) < length - 4:
            raise InputError(f"{self.path}: truncated archive at byte {start}")
        return start, header + body

    def document(self, raw: bytes, offset: int) -> dict[str, Any]:
        try:
            return bson.decode(raw)
        except (BSONError, ValueError, OverflowError) as exc:
            raise InputError(f"{self.path}: invalid BSON document at byte {offset} of the archive: {exc}") from None


def _start(path: Path, handle: IO[bytes]) -> _Reader:
    reader = _Reader(path, handle)
    if int.from_bytes(reader.read(4), "little") != MAGIC:
        raise InputError(f"{path}: not a mongodump archive (wrong magic number)")
    return reader


def _prelude(reader: _Reader) -> list[ArchivedCollection]:
    collections: list[ArchivedCollection] = []
    first = True
    while True:
        item = reader.next()
        if item is None:
            raise InputError(f"{reader.path}: truncated archive (the prelude is not closed)")
        offset, raw = item
        if raw is None:
            return collections
        document = reader.document(raw, offset)
        if first:  # the archive header: versions, nothing to keep
            first = False
            continue
        metadata: dict[str, Any] = {}
        text = document.get("metadata")
        if isinstance(text, str) and text:
            try:
                from mongopat.sources.extjson import decode_value

                metadata = decode_value(json.loads(text))
            except ValueError as exc:
                name = document.get("collection")
                raise InputError(f"{reader.path}: metadata of {name!r} is not JSON: {exc}") from None
        collections.append(
            ArchivedCollection(
                str(document.get("db", "")),
                str(document.get("collection", "")),
                str(document.get("type") or "collection"),
                metadata if isinstance(metadata, dict) else {},
                text if isinstance(text, str) else "",
            )
        )


def read_prelude(path: Path) -> list[ArchivedCollection]:
    """The collections an archive holds (reads only the start of the file)."""
    with open_sniffed(path) as handle:
        return _prelude(_start(path, handle))


def _records(path: Path) -> Iterator[tuple[dict[str, Any], int, bytes | None]]:
    """Every document of the archive with the namespace header of its block, ``(header, offset in the
    uncompressed stream, raw BSON)``, in the archive's order; a header that closes its collection
    (``EOF``) comes as ``(header, offset, None)``."""
    with open_sniffed(path) as handle:
        reader = _start(path, handle)
        _prelude(reader)
        while True:
            item = reader.next()
            if item is None:
                return
            offset, raw = item
            if raw is None:
                raise InputError(f"{path}: unexpected terminator at byte {offset} of the archive")
            header = reader.document(raw, offset)
            if header.get("EOF"):
                yield header, offset, None
            while True:
                item = reader.next()
                if item is None:
                    name = header.get("collection")
                    raise InputError(f"{path}: truncated archive (a block of {name!r} is not closed)")
                offset, raw = item
                if raw is None:
                    break
                yield header, offset, raw


def all_records(path: Path) -> Iterator[tuple[str, str, bytes]]:
    """``(database, collection, raw BSON)`` of every document of the archive, in the archive's order (one
    pass, whatever the interleaving)."""
    for header, _offset, raw in _records(path):
        if raw is not None:
            yield str(header.get("db", "")), str(header.get("collection", "")), raw


def archive_records(path: Path, database: str, collection: str) -> Iterator[tuple[int, bytes]]:
    """``(offset in the uncompressed stream, raw BSON)`` of every document of one collection."""
    for header, offset, raw in _records(path):
        if header.get("db") == database and header.get("collection") == collection:
            if raw is None:
                return  # the collection is complete; the rest of the archive holds other collections only
            yield offset, raw
