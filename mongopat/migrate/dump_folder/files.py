"""A dump folder's files as mongopat keeps them: the changelog (``mongopat_changelog.json``) and the lock
(``mongopat_lock.json``), each rewritten atomically; the collections' files (``.json``, ``.bson``, either
gzipped) to find, read, count and write in their own format; the names of the backups a step keeps.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

import bson
from bson import json_util

from mongopat import __version__
from mongopat.errors import InputError
from mongopat.migrate.bookkeeping import LeaseLock, LockLost, host_name, new_entry, utcnow
from mongopat.migrate.contracts import ChangelogEntry, StepState
from mongopat.migrate.dump_folder.catalog import write_durably
from mongopat.migrate.dump_folder.partial_lines import partial_versions
from mongopat.migrate.transform_api import Document
from mongopat.sources.dump import (
    BSON_SUFFIXES,
    JSON_SUFFIXES,
    FilePart,
    _bson_records,
    _json_layout,
    _json_records,
    _open,
    _read_bson,
    bson_records_and_documents,
    json_lines_and_documents,
    read_json_documents,
)
from mongopat.sources.extjson import encode_document, encode_lines, loads
from mongopat.timeseries.buckets import BUCKETS_PREFIX, unpack
from mongopat.timeseries.options import TimeSeriesOptions

CHANGELOG_FILE = "mongopat_changelog.json"
LOCK_FILE = "mongopat_lock.json"
TMP_SUFFIX = ".mongopat-tmp"


def _fsync_write(path: Path, data: bytes) -> None:
    write_durably(path, path.with_name(f".{path.name}{TMP_SUFFIX}"), data)


class FileChangelog:
    """The changelog as a small file of Extended JSON lines, rewritten atomically on every change."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / CHANGELOG_FILE
        self.entries: dict[str, ChangelogEntry] = {}
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    entry = json_util.loads(line)
                    self.entries[entry["_id"]] = entry

    def _save(self) -> None:
        lines = [
            json_util.dumps(entry, json_options=json_util.CANONICAL_JSON_OPTIONS) for entry in self.entries.values()
        ]
        _fsync_write(self.path, ("\n".join(lines) + "\n").encode() if lines else b"")

    def all(self) -> dict[str, ChangelogEntry]:
        return json_util.loads(json_util.dumps(self.entries))

    def get(self, migration_id: str) -> ChangelogEntry | None:
        return self.all().get(migration_id)

    def start(self, migration_id: str, checksum: str, description: str, steps: list[StepState]) -> None:
        entry = self.entries.get(migration_id)
        if entry is None or entry.get("state") == "rolled_back":
            self.entries[migration_id] = new_entry(migration_id, checksum, description, steps)
        else:
            entry.update(ChangelogEntry(state="running", error=None, host=host_name(), mongopat_version=__version__))
        self._save()

    def step(self, migration_id: str, index: int, **fields: Any) -> None:
        self.entries[migration_id]["steps"][index].update(cast(StepState, fields))
        self._save()

    def add_counts(self, migration_id: str, read: int, written: int) -> None:
        entry = self.entries[migration_id]
        entry["read"] += read
        entry["written"] += written
        self._save()

    def finish(self, migration_id: str, state: str, started: float, error: str | None = None, **fields: Any) -> None:
        entry = self.entries[migration_id]
        entry.update(cast(ChangelogEntry, {"state": state, "finished_at": utcnow(), "error": error, **fields}))
        entry["duration_s"] = round(entry.get("duration_s", 0) + time.monotonic() - started, 3)
        self._save()

    def set(self, migration_id: str, **fields: Any) -> None:
        self.entries[migration_id].update(cast(ChangelogEntry, fields))
        self._save()

    def remove(self, migration_id: str) -> None:
        self.entries.pop(migration_id, None)
        self._save()


class FileLock(LeaseLock):
    """The lease as ``mongopat_lock.json`` in the dump folder, created exclusively."""

    def __init__(self, folder: Path, lease_seconds: float = 60.0) -> None:
        super().__init__(lease_seconds)
        self.path = folder / LOCK_FILE

    def _document(self) -> dict[str, Any]:
        now = utcnow()
        return {
            "_id": "migrate",
            "holder": self.holder,
            "host": host_name(),
            "pid": os.getpid(),
            "acquired_at": now,
            "expires_at": now + self.lease,
        }

    def current(self) -> dict[str, Any] | None:
        try:
            return json_util.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None

    def _remove(self, holder: str, expires_at: Any) -> bool:
        # Moved aside first, so that a run taking the lock over meanwhile keeps its new file: only the lease
        # seen is removed; another one is put back.
        aside = self.path.with_name(f".{self.path.name}.unlock{TMP_SUFFIX}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return False
        try:
            moved = json_util.loads(aside.read_text(encoding="utf-8"))
        except ValueError:
            moved = {}
        if moved.get("holder") == holder and moved.get("expires_at") == expires_at:
            aside.unlink()
            return True
        with contextlib.suppress(FileExistsError):  # not ours to remove: back, unless a newer lock exists
            os.link(aside, self.path)
        aside.unlink()
        return False

    def _write(self, exclusive: bool) -> bool:
        """Write the lease through a temporary file of this holder's own, so the lock file is never seen
        empty or half written: created with a hard link when ``exclusive`` (fails if it exists), else
        replaced. An empty lock file once let a second run take a fresh lock over as unreadable."""
        own = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.holder)
        temporary = self.path.with_name(f".{self.path.name}.{own}{TMP_SUFFIX}")
        with temporary.open("wb") as handle:
            handle.write(json_util.dumps(self._document()).encode())
            handle.flush()
            os.fsync(handle.fileno())
        try:
            if exclusive:
                os.link(temporary, self.path)
            else:
                temporary.replace(self.path)
        except FileExistsError:
            return False
        finally:
            temporary.unlink(missing_ok=True)
        return True

    def _try(self) -> bool:
        if self._write(exclusive=True):
            return True
        current = self.current()
        if current is not None and current.get("expires_at") and current["expires_at"] >= utcnow():
            return current.get("holder") == self.holder
        self._write(exclusive=False)  # expired (or unreadable): take it over, then check we won
        time.sleep(0.05)
        current = self.current()
        return bool(current and current.get("holder") == self.holder)

    def renew(self) -> None:
        current = self.current()
        if not current or current.get("holder") != self.holder:
            raise LockLost("the migration lock was lost (lease expired and taken over); stopping")
        self._write(exclusive=False)

    def release(self) -> None:
        if self.held:
            current = self.current()
            if current and current.get("holder") == self.holder:
                self.path.unlink(missing_ok=True)
            self.held = False


class DumpFolder:
    """The files of a dump folder as collections: find, read, write (atomically), rename."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def timeseries(self, name: str) -> TimeSeriesOptions | None:
        """The options of time-series collection ``name`` (its buckets' file beside its metadata), or None."""
        if self.file_of(name) is not None or self.file_of(BUCKETS_PREFIX + name) is None:
            return None
        meta = self.folder / f"{name}.metadata.json"
        if not meta.exists():
            return None
        try:
            data = json_util.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return TimeSeriesOptions.from_collection(data.get("options") or {}) if isinstance(data, dict) else None

    def file_of(self, name: str) -> Path | None:
        for suffix in BSON_SUFFIXES + JSON_SUFFIXES:
            candidate = self.folder / f"{name}{suffix}"
            if candidate.exists():
                return candidate
        return None

    def suffix_like(self, name: str) -> str:
        path = self.file_of(name)
        if path is None:
            raise InputError(f"collection {name!r} not found in {self.folder}")
        return next(s for s in BSON_SUFFIXES + JSON_SUFFIXES if path.name.endswith(s))

    def read(self, name: str) -> Iterator[Document]:
        """The documents of a collection; of a time-series collection, its readings unpacked."""
        path = self.file_of(name)
        if path is None:
            options = self.timeseries(name)
            buckets = self.file_of(BUCKETS_PREFIX + name)
            if options is None or buckets is None:
                return iter(())
            return (m for bucket in decoded_documents(buckets) for m in unpack(bucket, options).measurements)
        return decoded_documents(path)

    def read_heads(self, name: str, heads: frozenset[str]) -> Iterator[Document]:
        """The documents of a collection, each holding at least its top-level fields ``heads`` (those it
        has), decoded: of a mongoexport file, only those are decoded (``partial_lines.py``), which is most
        of the time of reading a file whole for a few fields of each document (a context's parent map, its
        referenced fields)."""
        path = self.file_of(name)
        if path is None or not path.name.endswith(JSON_SUFFIXES):
            return self.read(name)
        return (version.document for version, _parsed in partial_versions(path, heads))

    def count(self, name: str) -> int:
        path = self.file_of(name)
        if path is None and self.timeseries(name) is not None:
            return sum(1 for _ in self.read(name))
        return 0 if path is None else count_records(path)

    def canonical(self, name: str) -> bool:
        path = self.file_of(name)
        if path is None or not path.name.endswith(JSON_SUFFIXES):
            return False
        with _open(path) as handle:
            head = handle.read(4096)
        return written_canonical(head)

    def temp_path(self, final_name: str) -> Path:
        return self.folder / f".{final_name}{TMP_SUFFIX}"


# What only canonical Extended JSON writes: an int32 wrapped, a finite double wrapped (relaxed wraps NaN and
# the infinities too), a long wrapped outside a date (relaxed writes a date before 1970 or after 9999 so).
_FINITE_DOUBLE = re.compile(rb'"\$numberDouble"\s*:\s*"(?!NaN"|Infinity"|-Infinity")')
_LONG = re.compile(rb'"\$numberLong"')
_DATE_LONG = re.compile(rb'"\$date"\s*:\s*\{\s*"\$numberLong"')


def written_canonical(head: bytes) -> bool:
    """Whether the start of a JSON export is in canonical Extended JSON (else relaxed), so that what a step
    writes into it is in the same mode."""
    if b'"$numberInt"' in head or _FINITE_DOUBLE.search(head):
        return True
    return len(_LONG.findall(head)) > len(_DATE_LONG.findall(head))


class DocumentWriter:
    """Writes documents to a temporary file in a collection's format; ``close`` makes it durable."""

    def __init__(self, path: Path, suffix: str, canonical: bool) -> None:
        self.path = path
        self.bson = suffix.startswith(".bson")
        self.canonical = canonical
        raw: IO[bytes] = path.open("wb")
        self.raw = raw
        # Closed in close(), which every caller reaches through try/finally.
        self.handle: IO[bytes] = gzip.open(raw, "wb") if suffix.endswith(".gz") else raw  # type: ignore[assignment]  # noqa: SIM115
        self.count = 0

    def write(self, document: Document) -> None:
        self.handle.write(self.record(document))
        self.count += 1

    def record(self, document: Document) -> bytes:
        """One document in this file's format (a JSON line ended by its newline), for :meth:`write_encoded`."""
        return bson.encode(document) if self.bson else encode_document(document, self.canonical) + b"\n"

    def encode(self, documents: list[Document]) -> bytes:
        """:meth:`record` of each of ``documents``, encoded together (a batch's side documents)."""
        if self.bson:
            return b"".join(map(bson.encode, documents))
        return encode_lines(documents, self.canonical)

    def as_written(self, record: bytes) -> bytes:
        """A document as the collection's file held it (a BSON document, a line of an export in this
        writer's format) as this file writes it back: as it was, a line ended by one newline."""
        if self.bson or (record[-1:] == b"\n" and record[-2:-1] != b"\r"):
            return record
        return record.rstrip(b"\r\n") + b"\n"

    def append_file(self, path: Path, documents: int) -> None:
        """The file at ``path``, holding ``documents`` documents in this file's format, after what is
        written: copied by the kernel where it can (``copy_file_range``, Linux), else read and written."""
        with path.open("rb") as source:
            size, copied = os.fstat(source.fileno()).st_size, 0
            if self.handle is self.raw and hasattr(os, "copy_file_range"):
                self.raw.flush()  # what is buffered goes first: the kernel appends at the file's offset
                with contextlib.suppress(OSError):  # a file system that cannot: the rest by hand
                    while copied < size and (
                        step := os.copy_file_range(source.fileno(), self.raw.fileno(), size - copied)
                    ):
                        copied += step
            source.seek(copied)
            shutil.copyfileobj(source, self.handle, 1 << 20)
        self.count += documents

    def write_encoded(self, data: bytes, documents: int) -> None:
        """``data``, holding ``documents`` documents in this file's format, in one write."""
        self.handle.write(data)
        self.count += documents

    def close(self, durable: bool = True) -> None:
        """Close the file; ``durable``: once it is on disk (a worker's part, appended to the real file
        later, need not be)."""
        if self.handle is not self.raw:
            self.handle.close()
        self.raw.flush()
        if durable:
            os.fsync(self.raw.fileno())
        self.raw.close()


def backup_name(migration_id: str, index: int, file_name: str) -> str:
    return f"mongopat_backup__{migration_id}__{index}__{file_name}"


def records_and_documents(path: Path, part: FilePart | None = None) -> Iterator[tuple[bytes | None, Document]]:
    """The documents of a collection file (of ``part`` of it), each decoded and with its record as the
    file holds it (None where it has none of its own: a ``--jsonArray`` or ``--pretty`` export), so that a
    document a step leaves alone is written back byte for byte."""
    if path.name.endswith(BSON_SUFFIXES):
        return bson_records_and_documents(path, part)
    return json_lines_and_documents(path, part)


def decoded_documents(path: Path) -> Iterator[Document]:
    """Fully decoded documents of a collection file (BSON types restored)."""
    if path.name.endswith(BSON_SUFFIXES):
        return (doc for doc, _size in _read_bson(path))
    return read_json_documents(path)


def plain_documents(path: Path, part: FilePart | None = None) -> Iterator[Document]:
    """Documents of a file (of ``part`` of it) as plain structures, for verification: Extended JSON
    wrappers stay undecoded, which is enough to count documents, sum counts and measure arrays, and
    several times faster."""
    if path.name.endswith(BSON_SUFFIXES):
        return (bson.decode(raw) for _offset, raw in _bson_records(path, part))
    return (record if isinstance(record, dict) else loads(record) for _line, record in _json_records(path, part))


def count_records(path: Path) -> int:
    """Documents in a collection file, exactly, without parsing them (lines, or BSON length headers)."""
    if path.name.endswith(BSON_SUFFIXES):
        return sum(1 for _ in _bson_records(path))
    with _open(path) as handle:
        if _json_layout(handle) != "lines":  # a --jsonArray or --pretty export: count its documents properly
            return sum(1 for _ in _json_records(path))
        return _nonblank_lines(handle)


# Lines holding nothing but whitespace (bytes.isspace's): one after a newline (found from the newline, which
# the regex engine looks for fast), and the first line of a chunk.
_BLANK_AFTER_NEWLINE = re.compile(rb"\n[ \t\r\x0b\x0c]*(?=\n)")
_BLANK_FIRST = re.compile(rb"[ \t\r\x0b\x0c]*\n")


def _nonblank_lines(handle: IO[bytes], size: int = 1 << 20) -> int:
    """The lines of ``handle`` from where it stands that hold more than whitespace: newlines counted a MiB
    at a time, blank lines taken off (a loop over lines costs a Python step each)."""
    found, tail = 0, b""
    while chunk := handle.read(size):
        data = tail + chunk
        cut = data.rfind(b"\n") + 1  # the chunk's whole lines; the rest starts the next one
        blank = len(_BLANK_AFTER_NEWLINE.findall(data, 0, cut)) + (1 if _BLANK_FIRST.match(data, 0, cut) else 0)
        found += data.count(b"\n", 0, cut) - blank
        tail = data[cut:]
    return found + (1 if tail and not tail.isspace() else 0)


def write_json_lines(path: Path, documents: list[Document]) -> None:
    """Helper for tests and the demo: a mongoexport file from documents."""
    path.write_bytes(b"".join(encode_document(d) + b"\n" for d in documents))
