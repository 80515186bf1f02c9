"""A dump folder as a database: mongoexport ``.json`` and mongodump ``.bson`` files, each a collection.

Files are streamed: a document at a time, never a whole file in memory. ``.gz`` variants (``mongodump
--gzip``) are read the same way. Indexes come from ``<collection>.metadata.json`` when present.
"""

from __future__ import annotations

import codecs
import gzip
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any

import bson
from bson.errors import BSONError

from mongopat.compressed import READ_ERRORS, unreadable
from mongopat.errors import InputError, SourceError
from mongopat.sources import shared_parts
from mongopat.sources.archive import ARCHIVE_SUFFIXES, ArchivedCollection, archive_records, is_archive, read_prelude
from mongopat.sources.base import CollectionStats, DocumentStream, IndexInfo, Sampling, Source
from mongopat.sources.extjson import ExtendedJSONError, JSONDecodeError, decode_document, decode_value, loads
from mongopat.timeseries.buckets import BUCKETS_PREFIX, bucket_figures, held, unpack
from mongopat.timeseries.options import TimeSeriesOptions

JSON_SUFFIXES = (".json", ".json.gz")
BSON_SUFFIXES = (".bson", ".bson.gz")
METADATA_SUFFIXES = (".metadata.json", ".metadata.json.gz")
# Largest document a server accepts, plus headroom for what mongodump may hold (16 MiB + 16 KiB).
MAX_BSON_DOCUMENT = 16 * 1024 * 1024 + 16 * 1024
_ARRAY_CHUNK = 1 << 20
BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark some tools write at the start of a file
# Bytes of a mongoexport file the analysis parses at a time (whole lines: about a hundred documents of
# the benchmark's orders; 128 KiB took 3% more time than this with one worker on its optional orders).
_LINES_CHUNK = 1 << 15
# Text a --pretty or --jsonArray document may span before a parse error is taken as real (well above the
# JSON of a 16 MiB BSON document).
MAX_JSON_DOCUMENT = 8 * MAX_BSON_DOCUMENT
# Files smaller than this are read by one process: starting workers costs more than it saves.
MIN_PARALLEL_BYTES = 8 * 1024 * 1024


def _after_line(lines: int) -> str:
    return f"after line {lines:,}" if lines > 0 else "before its first line"


def _open(path: Path) -> IO[bytes]:
    try:
        return gzip.open(path, "rb") if path.name.endswith(".gz") else path.open("rb")
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from None


def _strip_suffix(name: str, suffixes: tuple[str, ...]) -> str | None:
    for suffix in suffixes:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return None


def _has_collection_files(folder: Path) -> bool:
    return any(_collection_name(entry.name) is not None for entry in folder.iterdir() if entry.is_file())


def _collection_name(filename: str) -> str | None:
    if _strip_suffix(filename, METADATA_SUFFIXES) is not None:
        return None
    return _strip_suffix(filename, JSON_SUFFIXES + BSON_SUFFIXES)


# The first key of every JSON document mongopat writes (reports, recommendations, check results, snapshots,
# guides) and of SARIF logs: such a file in a dump folder is output, not a collection.
OUTPUT_FIRST_KEYS = (
    b'"report_version"',
    b'"recommendations_version"',
    b'"check_version"',
    b'"snapshot_version"',
    b'"guide_version"',
    b'"json_schema_version"',
    b'"$schema"',
)


def is_mongopat_output(path: Path) -> bool:
    """True for a JSON file whose top-level object opens with one of :data:`OUTPUT_FIRST_KEYS`."""
    try:
        with _open(path) as handle:
            head = handle.read(256)
    except (*READ_ERRORS, SourceError):
        return False
    head = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    if head[:1] != b"{":
        return False
    return head[1:].lstrip().startswith(OUTPUT_FIRST_KEYS)


def archives_in(folder: Path) -> list[Path]:
    """``mongodump --archive`` files in ``folder``: by their name, or by the magic number of any other file
    that is not a collection file (mongodump lets the archive be named anything)."""
    found = []
    for entry in sorted(folder.iterdir()):
        if not entry.is_file() or entry.name.startswith("."):
            continue
        if entry.name.endswith(ARCHIVE_SUFFIXES) or (
            _collection_name(entry.name) is None
            and _strip_suffix(entry.name, METADATA_SUFFIXES) is None
            and is_archive(entry)
        ):
            found.append(entry)
    return found


def resolve_dump_folder(path: Path, database: str | None) -> tuple[Path, str]:
    """The folder holding the collection files and the database name it stands for.

    ``mongodump`` writes ``dump/<db>/<coll>.bson``: pointing at ``dump/`` works when it holds one
    database or when ``--db`` names one.
    """
    if not path.exists():
        raise SourceError(f"dump folder not found: {path}")
    if not path.is_dir():
        hint = (
            f"a mongodump --archive file is read-only here: 'mongopat unpack {path} --to dump' writes it out as a "
            "dump folder to run migrations on"
        )
        raise SourceError(f"--dump expects a folder here, got a file: {path}", hint=hint if is_archive(path) else None)
    try:
        if _has_collection_files(path):
            return path, database or path.resolve().name
        databases = sorted(p.name for p in path.iterdir() if p.is_dir() and _has_collection_files(p))
    except PermissionError as exc:
        raise SourceError(f"cannot read dump folder {path}: {exc.strerror}") from None
    if database:
        if database in databases:
            return path / database, database
        raise SourceError(
            f"database {database!r} not found in {path}",
            hint=f"folders with collections: {', '.join(databases) or 'none'}",
        )
    if len(databases) == 1:
        return path / databases[0], databases[0]
    if not databases:
        raise SourceError(
            f"no collection files in {path}",
            hint="expected <collection>.json (mongoexport) or <collection>.bson (mongodump) files",
        )
    raise SourceError(f"{path} holds several databases ({', '.join(databases)})", hint="choose one with --db")


class DumpSource(Source):
    kind = "dump"

    def __init__(self, path: str | Path, database: str | None = None, seed: int = 0) -> None:
        path = Path(path)
        self.location = str(path)
        self.seed = seed
        self._files: dict[str, Path] = {}
        self._metadata: dict[str, Path] = {}
        # Collections read from mongodump --archive files (read-only): name -> (archive, prelude entry).
        self._archived: dict[str, tuple[Path, ArchivedCollection]] = {}
        self._counts: dict[str, int] = {}
        # Time-series collections: name -> the options their metadata gives (None when it gives none);
        # their files (or archive blocks) hold buckets, read as the measurements they hold.
        self._timeseries: dict[str, TimeSeriesOptions | None] = {}
        self._unread: dict[str, int] = {}  # measurements of compressed buckets, not read (per collection)
        if path.is_file() and is_archive(path):
            self.folder = path.parent
            self.database = self._add_archives([path], database, required=True)
            return
        try:
            self.folder, self.database = resolve_dump_folder(path, database)
        except SourceError:
            archives = archives_in(path) if path.is_dir() else []
            if not archives:
                raise
            self.folder = path
            self.database = self._add_archives(archives, database, required=True)
            return
        for entry in sorted(self.folder.iterdir()):
            if not entry.is_file() or entry.name.startswith("."):
                continue
            meta = _strip_suffix(entry.name, METADATA_SUFFIXES)
            if meta is not None:
                self._metadata[meta] = entry
                continue
            name = _collection_name(entry.name)
            if name is not None and name.startswith(BUCKETS_PREFIX) and len(name) > len(BUCKETS_PREFIX):
                view = name[len(BUCKETS_PREFIX) :]
                self._files[view] = entry
                self._timeseries[view] = None
                continue
            if name is None or name.startswith(("system.", "mongopat_")):
                continue  # system collections, and mongopat's own bookkeeping and backups
            if entry.name.endswith(JSON_SUFFIXES) and is_mongopat_output(entry):
                continue  # a report or result mongopat wrote into the folder
            # mongodump's BSON is lossless; prefer it when both forms exist.
            if name not in self._timeseries and (name not in self._files or entry.name.endswith(BSON_SUFFIXES)):
                self._files[name] = entry
        for view in self._timeseries:
            self._timeseries[view] = TimeSeriesOptions.from_collection(self._metadata_of(view).get("options") or {})
        self._add_archives(archives_in(self.folder), self.database, required=False)

    def _add_archives(self, archives: list[Path], database: str | None, required: bool) -> str:
        """Register the collections of ``archives`` that belong to ``database`` (or to the archives' only
        database when none is named); returns the database."""
        entries = [(archive, entry) for archive in archives for entry in read_prelude(archive)]
        entries = [
            (archive, entry)
            for archive, entry in entries
            if entry.kind != "view" and not entry.name.startswith(("system.", "mongopat_"))
        ]
        databases = sorted({entry.database for _archive, entry in entries})
        if database is None:
            if len(databases) > 1:
                raise SourceError(
                    f"{self.location} holds several databases ({', '.join(databases)})", hint="choose one with --db"
                )
            if not databases:
                raise SourceError(f"no collections in {self.location}", hint="the archive holds no documents")
            database = databases[0]
        elif required and database not in databases:
            raise SourceError(
                f"database {database!r} not found in {self.location}",
                hint=f"databases in the archive: {', '.join(databases) or 'none'}",
            )
        for archive, entry in entries:
            if entry.database == database and entry.name not in self._files:
                self._archived.setdefault(entry.name, (archive, entry))
                options = TimeSeriesOptions.from_collection(entry.metadata.get("options") or {})
                if entry.kind == "timeseries" or options is not None:
                    self._timeseries[entry.name] = options
        return database

    def collections(self) -> list[str]:
        return sorted({*self._files, *self._archived})

    def file_of(self, name: str) -> Path:
        """The file holding collection ``name`` (for an archived collection, the archive)."""
        if name in self._files:
            return self._files[name]
        if name in self._archived:
            return self._archived[name][0]
        raise InputError(
            f"collection {name!r} not found in {self.location}",
            hint=f"collections: {', '.join(self.collections()) or 'none'}",
        )

    def timeseries(self, name: str) -> TimeSeriesOptions | None:
        """The options of a time-series collection (None for any other, or when its metadata is missing)."""
        return self._timeseries.get(name)

    def _bucket_records(self, name: str) -> Iterator[tuple[int, bytes]]:
        """The raw buckets of time-series collection ``name``."""
        if name in self._archived:
            archive, entry = self._archived[name]
            return archive_records(archive, entry.database, BUCKETS_PREFIX + entry.name)
        return _bson_records(self.file_of(name))

    def _records_reader(self, name: str):
        """``(reader of (position, raw record)), decoder of one record)`` for collection ``name``."""
        path = self.file_of(name)
        if name in self._timeseries:
            options = self._timeseries[name]
            return (
                lambda: _measurement_records(path, self._bucket_records(name), options, self._unread, name)
            ), _decode_bson_record
        if name in self._archived:
            archive, entry = self._archived[name]
            return (lambda: archive_records(archive, entry.database, entry.name)), _decode_bson_record
        if path.name.endswith(BSON_SUFFIXES):
            return (lambda: _bson_records(path)), _decode_bson_record
        return (lambda: _json_records(path)), _decode_json_record

    def stats(self, name: str) -> CollectionStats:
        path = self.file_of(name)
        stats = CollectionStats(size_bytes=None)
        if name in self._counts:
            stats.count, stats.count_exact = self._counts[name], True
        where = f"{path.name} (mongodump archive)" if name in self._archived else path.name
        stats.notes.append(f"read from {where}")
        if name in self._timeseries:
            buckets = bucket_figures(path, self._bucket_records(name), self._timeseries[name])
            stats.count, stats.count_exact = buckets.measurements, True
            stats.notes.extend(buckets.notes(name, self._timeseries[name]))
            stats.timeseries = buckets.to_dict(self._timeseries[name])
        return stats

    def indexes(self, name: str) -> tuple[list[IndexInfo], list[str]]:
        self.file_of(name)
        if name in self._archived:
            specs = self._archived[name][1].metadata.get("indexes", [])
            indexes = [index_from_spec(spec) for spec in specs if isinstance(spec, dict)]
            return indexes, ["index usage is not recorded in dumps"]
        if self._metadata.get(name) is None:
            return [], ["no metadata.json beside the dump: indexes unknown"]
        metadata = self._metadata_of(name)
        indexes = []
        for spec in metadata.get("indexes", []) if isinstance(metadata, dict) else []:
            indexes.append(index_from_spec(spec))
        return indexes, ["index usage is not recorded in dumps"]

    def _metadata_of(self, name: str) -> dict[str, Any]:
        """What ``<name>.metadata.json`` holds ({} when there is none)."""
        meta_path = self._metadata.get(name)
        if meta_path is None:
            return {}
        with _open(meta_path) as handle:
            try:
                metadata = decode_value(json.loads(handle.read()))
            except (ValueError, ExtendedJSONError) as exc:
                raise InputError(f"{meta_path}: not valid metadata JSON: {exc}") from None
        return metadata if isinstance(metadata, dict) else {}

    # -- documents -------------------------------------------------------------------------------

    def documents(
        self, name: str, sample_size: int | None, decoded: bool = True, part: FilePart | None = None
    ) -> DocumentStream:
        path = self.file_of(name)
        if name in self._archived or name in self._timeseries:
            records, _decode = self._records_reader(name)

            def reader(path: Path, part: FilePart | None = None) -> Iterator[tuple[dict[str, Any], int]]:
                return (_decode_bson_record(path, offset, raw) for offset, raw in records())

        elif path.name.endswith(BSON_SUFFIXES):
            reader = _read_bson
        else:
            reader = _read_json
            if not decoded and (part is not None or sample_size is None):
                return self._json_batches(name, path, part)
        if part is not None:
            sampling = Sampling("file", None, f"bytes {part.start}-{part.end} of {path.name}", natural_order=True)
            return DocumentStream(sampling, reader(path, part))
        if sample_size is None:
            sampling = Sampling("file", None, f"every document of {path.name}", natural_order=True, complete=True)
            return DocumentStream(sampling, self._unread_said(name, sampling, self._counting(name, reader(path))))
        sampling = Sampling("file-reservoir", sample_size, f"uniform random sample of {path.name} (seed {self.seed})")
        return DocumentStream(
            sampling, self._unread_said(name, sampling, self._reservoir(name, path, sample_size, sampling))
        )

    def _unread_said(self, name: str, sampling: Sampling, items: Iterator[Any]) -> Iterator[Any]:
        """``items``; then, where compressed buckets held measurements none of them could come from, the
        sampling is not complete (the collection's count stays the buckets' own)."""
        yield from items
        unread = self._unread.get(name)
        if unread:
            sampling.complete = False
            sampling.note += f" ({unread:,} measurements of compressed buckets not read)"

    def _json_batches(self, name: str, path: Path, part: FilePart | None) -> DocumentStream:
        """The analysis's read of a JSON file (or of a part of it): batches of documents still holding their
        Extended JSON wrappers."""

        def locate(index: int) -> str:
            return f"{path}:{_line_of_record(path, part, index)}"

        if part is not None:
            sampling = Sampling("file", None, f"bytes {part.start}-{part.end} of {path.name}", natural_order=True)
            return DocumentStream(sampling, _read_json_batches(path, part), undecoded=True, locate=locate)
        sampling = Sampling("file", None, f"every document of {path.name}", natural_order=True, complete=True)
        batches = self._counting(name, _read_json_batches(path), batches=True)
        return DocumentStream(sampling, batches, undecoded=True, locate=locate)

    def _counting(self, name: str, items: Iterator[Any], batches: bool = False):
        """``items`` (documents, or batches of documents), counting the documents."""
        count = 0
        for item in items:
            count += len(item[0]) if batches else 1
            yield item
        self._counts[name] = count

    def _reservoir(self, name: str, path: Path, size: int, sampling: Sampling):
        # Keep raw records (bytes) in the reservoir and decode only the survivors.
        rng = random.Random(self.seed)
        kept: list[tuple[int, bytes]] = []
        total = 0
        records, decode = self._records_reader(name)
        for position, record in records():
            total += 1
            if len(kept) < size:
                kept.append((position, record))
            else:
                slot = rng.randrange(total)
                if slot < size:
                    kept[slot] = (position, record)
        self._counts[name] = total
        if total <= size:
            sampling.method, sampling.complete, sampling.natural_order = "file", True, True
            sampling.note = f"every document of {path.name} (fewer than the sample size)"
        kept.sort()
        for position, record in kept:
            yield decode(path, position, record)

    def partitions(self, name: str, parts: int) -> list[FilePart] | None:
        """Split a plain (not gzip, not --jsonArray, not --pretty, not an archive) file into ``parts`` ranges
        of whole documents."""
        if name in self._archived or name in self._timeseries:
            return None
        return partition_file(self.file_of(name), parts)

    def share_parts(self, name: str, parts: list[FilePart], context: Any) -> shared_parts.SharedParts | None:
        """The parts of a mongoexport file as parts that processes forked from ``context`` read while taking
        work from each other (None for other files: see shared_parts)."""
        path = self.file_of(name)
        if name in self._archived or name in self._timeseries or path.name.endswith(BSON_SUFFIXES):
            return None
        return shared_parts.SharedParts(path, parts, context)

    def count_existing_ids(self, name: str, values: list[Any]) -> int | None:
        wanted = set()
        for value in values:
            try:
                wanted.add(value)
            except TypeError:
                continue
        if not wanted:
            return 0
        path = self.file_of(name)
        records, decode = self._records_reader(name)
        found = set()
        for position, record in records():
            document, _size = decode(path, position, record)
            identifier = document.get("_id")
            try:
                if identifier in wanted:
                    found.add(identifier)
            except TypeError:
                continue
        return len(found)


def partition_file(path: Path, parts: int, min_bytes: int | None = None) -> list[FilePart] | None:
    """``parts`` ranges of whole documents of a plain collection file (None for one under ``min_bytes``,
    by default :data:`MIN_PARALLEL_BYTES`, gzipped or a ``--jsonArray``: read it whole)."""
    if parts < 2 or path.name.endswith(".gz"):
        return None
    size = path.stat().st_size
    if size < (MIN_PARALLEL_BYTES if min_bytes is None else min_bytes):
        return None
    if path.name.endswith(BSON_SUFFIXES):
        return _bson_partitions(path, size, parts)
    with _open(path) as handle:
        if _json_layout(handle) != "lines":
            return None
    return _json_partitions(path, size, parts)


@dataclass(frozen=True)
class FilePart:
    """A byte range of whole documents. ``first_line`` numbers its first line, for error messages; None
    until one is needed (:func:`first_line_of`): counting the lines before a part reads the file up to it."""

    start: int
    end: int
    first_line: int | None = 1
    # Set for a part read alongside others that may take the rest of it (see shared_parts): the key of
    # their shared state, and the part's index there.
    shared: int | None = None
    index: int = 0


def first_line_of(path: Path, part: FilePart) -> int:
    if part.first_line is not None:
        return part.first_line
    newlines, position = 0, 0
    with path.open("rb") as handle:
        while position < part.start:
            chunk = handle.read(min(_ARRAY_CHUNK, part.start - position))
            if not chunk:
                break
            newlines += chunk.count(b"\n")
            position += len(chunk)
    return newlines + 1


def _json_partitions(path: Path, size: int, parts: int) -> list[FilePart]:
    boundaries = [0]
    with path.open("rb") as handle:
        for index in range(1, parts):
            handle.seek(max(boundaries[-1], size * index // parts))
            handle.readline()  # finish the line the cut fell into
            boundaries.append(handle.tell())
    boundaries.append(size)
    return [
        FilePart(boundaries[i], boundaries[i + 1], 1 if i == 0 else None)
        for i in range(parts)
        if boundaries[i] < boundaries[i + 1]
    ]


def _bson_partitions(path: Path, size: int, parts: int) -> list[FilePart]:
    targets = [size * index // parts for index in range(1, parts)]
    boundaries = [0]
    with path.open("rb") as handle:
        offset = 0
        while targets and offset < size:
            header = handle.read(4)
            if len(header) < 4:
                break
            if offset >= targets[0]:
                boundaries.append(offset)
                targets.pop(0)
            offset += max(5, int.from_bytes(header, "little"))
            handle.seek(offset)
    boundaries.append(size)
    return [
        FilePart(boundaries[i], boundaries[i + 1])
        for i in range(len(boundaries) - 1)
        if boundaries[i] < boundaries[i + 1]
    ]


def index_from_spec(spec: dict[str, Any]) -> IndexInfo:
    key = spec.get("key", {})
    return IndexInfo(
        name=str(spec.get("name", "")),
        key=[(str(field), direction) for field, direction in key.items()],
        unique=bool(spec.get("unique", False)),
        sparse=bool(spec.get("sparse", False)),
        ttl_seconds=int(spec["expireAfterSeconds"]) if "expireAfterSeconds" in spec else None,
        partial=_plain(spec.get("partialFilterExpression")),
        hidden=bool(spec.get("hidden", False)),
        collation=_plain(spec.get("collation")),
    )


def _plain(value: Any) -> Any:
    if value is None:
        return None
    return json.loads(bson.json_util.dumps(value))


# -- readers: each yields (document, bson size) --------------------------------------------------


def _decode_json_record(path: Path, line_number: int, record: bytes | dict[str, Any]) -> tuple[dict[str, Any], int]:
    try:
        document = decode_document(record) if type(record) is bytes else decode_value(record)
    except (JSONDecodeError, ExtendedJSONError, ValueError) as exc:
        raise InputError(f"{path}:{line_number}: not a valid Extended JSON document: {json_problem(exc)}") from None
    try:
        size = len(bson.encode(document))
    except (BSONError, OverflowError, TypeError) as exc:
        raise InputError(f"{path}:{line_number}: document cannot be encoded as BSON: {exc}") from None
    return document, size


def _decode_bson_record(path: Path, offset: int, record: bytes) -> tuple[dict[str, Any], int]:
    try:
        return bson.decode(record), len(record)
    except (BSONError, ValueError, OverflowError) as exc:
        raise InputError(f"{path}: invalid BSON document at byte {offset}: {exc}") from None


def _measurement_records(
    path: Path,
    buckets: Iterator[tuple[int, bytes]],
    options: TimeSeriesOptions | None,
    unread: dict[str, int],
    name: str,
) -> Iterator[tuple[int, bytes]]:
    """The measurements of a time-series collection's buckets, each as raw BSON at its bucket's offset
    (plus its rank: offsets stay unique and in order); ``unread[name]``, those of compressed buckets. Without
    options (no metadata) no measurement can be told from its bucket: none is read, and the collection's
    notes say so."""
    unread[name] = 0
    for offset, raw in buckets:
        bucket, _size = _decode_bson_record(path, offset, raw)
        if options is None:
            unread[name] += held(bucket)
            continue
        found = unpack(bucket, options)
        unread[name] += found.compressed
        for rank, measurement in enumerate(found.measurements):
            yield offset + rank, bson.encode(measurement)


def _read_json(path: Path, part: FilePart | None = None) -> Iterator[tuple[dict[str, Any], int]]:
    for line_number, record in _json_records(path, part):
        yield _decode_json_record(path, line_number, record)


def read_json_documents(path: Path) -> Iterator[dict[str, Any]]:
    """Decoded documents without their BSON sizes (for rewriting files, where sizes are not needed)."""
    for line_number, record in _json_records(path):
        yield decode_json_record(path, line_number, record)


def json_lines_and_documents(path: Path, part: FilePart | None = None) -> Iterator[tuple[bytes | None, dict[str, Any]]]:
    """Each document of a JSON export (of ``part`` of it) decoded, with its line as the file holds it (None
    for the documents of a ``--jsonArray`` or ``--pretty`` export, which have no line of their own)."""
    for line_number, record in _json_records(path, part):
        yield (record if type(record) is bytes else None), decode_json_record(path, line_number, record)


def bson_records_and_documents(path: Path, part: FilePart | None = None) -> Iterator[tuple[bytes, dict[str, Any]]]:
    """Each document of a BSON file (of ``part`` of it) decoded, with its bytes as the file holds them."""
    for offset, record in _bson_records(path, part):
        yield record, _decode_bson_record(path, offset, record)[0]


def decode_json_record(path: Path, line_number: int, record: Any) -> dict[str, Any]:
    """A line of a mongoexport file (bytes) or a parsed document, decoded; the line is named on error."""
    try:
        return decode_document(record) if type(record) is bytes else decode_value(record)
    except (JSONDecodeError, ExtendedJSONError, ValueError) as exc:
        raise InputError(f"{path}:{line_number}: not a valid Extended JSON document: {json_problem(exc)}") from None


def json_problem(exc: Exception) -> str:
    """The parser's complaint with a column within the line, not an offset into a buffer."""
    if isinstance(exc, JSONDecodeError) and hasattr(exc, "msg") and hasattr(exc, "pos"):
        return f"{exc.msg} (column {exc.pos + 1})"
    return str(exc)


def _read_json_batches(path: Path, part: FilePart | None = None) -> Iterator[tuple[list[dict[str, Any]], int]]:
    """The documents of a JSON file (or part), Extended JSON wrappers left in place (the analysis decodes
    them), in batches with the bytes their records take in the file.

    A mongoexport file is read a chunk of whole lines at a time and each chunk parsed by one C loop; the
    documents of a ``--jsonArray`` or ``--pretty`` export come one a batch, with 0 bytes (not known).
    """
    line = 0  # lines read before the chunk being read
    with _open(path) as handle:
        try:
            if part is None:
                layout = _json_layout(handle)
                if layout != "lines":  # one document a batch: their sizes are not known before parsing
                    for _line, record in _json_value_records(path, handle, array=layout == "array"):
                        yield [record], 0
                    return
                remaining = -1  # to the end of the file
            else:
                handle.seek(part.start)
                remaining = part.end - part.start
            start = 0 if part is None else part.start
            shared, shared_index = None, 0
            if part is not None and part.shared is not None:
                shared, shared_index = shared_parts.lookup(part.shared), part.index
                remaining = -1  # to where the shared state says the part ends, which a thief may move back
            position = start

            def line_number(index: int, before: int) -> int:
                return (1 if part is None else first_line_of(path, part)) + before + index

            while remaining:
                if shared is not None:
                    size = shared.claim(shared_index, _LINES_CHUNK)
                    if not size:
                        return
                else:
                    size = _LINES_CHUNK if remaining < 0 else min(_LINES_CHUNK, remaining)
                data = handle.read(size)
                if not data:
                    return
                if data[-1:] != b"\n":
                    data += handle.readline()  # the rest of the line the chunk cut (a part ends with a line)
                position += len(data)
                if shared is not None:
                    shared.reached(shared_index, position)
                if remaining > 0:
                    remaining = max(0, remaining - len(data))
                lines = data.split(b"\n")
                if not lines[-1]:
                    lines.pop()
                if line == 0 and start == 0 and lines[0].startswith(BOM):
                    lines[0] = lines[0][len(BOM) :]
                yield _parse_lines(path, lines, partial(line_number, before=line)), len(data)
                line += len(lines)
        except READ_ERRORS as exc:
            where = _after_line(line) if part is None else f"after {line:,} line(s) from byte {part.start:,}"
            raise unreadable(path, exc, where) from None


def _parse_lines(path: Path, lines: list[bytes], line_number: Callable[[int], int]) -> list[dict[str, Any]]:
    """Parse lines of JSON, each an object; blank lines are skipped. Errors name the file and the line
    (``line_number`` of an index into ``lines``, only asked when there is an error)."""
    try:
        documents = list(map(loads, lines))
        if set(map(type, documents)) <= {dict}:
            return documents
    except JSONDecodeError:
        pass
    # A blank line, a bad one or one that is not an object: again one by one, to skip or to name it.
    documents = []
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            document = loads(line)
        except JSONDecodeError as exc:
            where = f"{path}:{line_number(index)}"
            raise InputError(f"{where}: not a valid Extended JSON document: {json_problem(exc)}") from None
        if type(document) is not dict:
            raise InputError(f"{path}:{line_number(index)}: expected a JSON object, found {type(document).__name__}")
        documents.append(document)
    return documents


def _line_of_record(path: Path, part: FilePart | None, index: int) -> int:
    """The line of the ``index``-th document (from 0) of a JSON file or part: read again, for an error
    message only."""
    for position, (line_number, _record) in enumerate(_json_records(path, part)):
        if position == index:
            return line_number
    return 0


def _read_bson(path: Path, part: FilePart | None = None) -> Iterator[tuple[dict[str, Any], int]]:
    for offset, record in _bson_records(path, part):
        yield _decode_bson_record(path, offset, record)


def _json_records(path: Path, part: FilePart | None = None) -> Iterator[tuple[int, Any]]:
    """Lines of a mongoexport file (bytes), or the parsed documents of a ``--jsonArray`` or ``--pretty``
    export (dicts)."""
    with _open(path) as handle:
        if part is not None:
            yield from _json_part_records(path, handle, part)
            return
        try:
            layout = _json_layout(handle)
        except READ_ERRORS as exc:
            raise unreadable(path, exc, "in its first 64 KiB") from None
        if layout != "lines":
            yield from _json_value_records(path, handle, array=layout == "array")
            return
        line_number = 0
        try:
            for line_number, line in enumerate(handle, 1):
                if line_number == 1 and line.startswith(BOM):
                    line = line[len(BOM) :]
                if line.strip():
                    yield line_number, line
        except READ_ERRORS as exc:
            raise unreadable(path, exc, _after_line(line_number)) from None


def _json_part_records(path: Path, handle: IO[bytes], part: FilePart) -> Iterator[tuple[int, bytes]]:
    line_number = first_line_of(path, part)
    handle.seek(part.start)
    position = part.start
    try:
        for line in handle:
            if position >= part.end:
                return
            position += len(line)
            if line_number == 1 and line.startswith(BOM):
                line = line[len(BOM) :]
            if line.strip():
                yield line_number, line
            line_number += 1
    except READ_ERRORS as exc:
        raise unreadable(path, exc, _after_line(line_number - 1)) from None


def _json_layout(handle: IO[bytes]) -> str:
    """How a mongoexport file lays out its documents: ``lines`` (one a line, the default), ``array``
    (``--jsonArray``) or ``pretty`` (``--pretty``: indented documents over many lines, one after another).
    Works for gzip and plain files alike: reads the first chunk, then rewinds."""
    head = handle.read(65536)
    handle.seek(0)
    stripped = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    if stripped[:1] == b"[":
        return "array"
    if stripped[:1] != b"{" or b"\n" not in stripped:
        return "lines"  # one document, or not JSON at all: the line reader says which line is wrong
    first_line = stripped.split(b"\n", 1)[0].strip()
    if first_line == b"{":
        return "pretty"
    try:
        json.loads(first_line)
    except ValueError:
        return "pretty"  # the first line does not close its document: documents span lines
    return "lines"


def _json_value_records(path: Path, handle: IO[bytes], array: bool) -> Iterator[tuple[int, Any]]:
    """The documents of a ``--jsonArray`` (``array``) or ``--pretty`` export, parsed one at a time from a
    sliding buffer, each with the line it starts on."""
    decoder = json.JSONDecoder()
    reader = codecs.getincrementaldecoder("utf-8-sig")()
    buffer = ""
    position = 0
    line = 1
    opened = False
    eof = False

    def fill() -> bool:
        nonlocal buffer, position, eof
        lines_read = line - 1 + buffer.count("\n", position)  # whole lines before the chunk about to be read
        try:
            chunk = handle.read(_ARRAY_CHUNK)
        except READ_ERRORS as exc:
            raise unreadable(path, exc, _after_line(lines_read)) from None
        eof = not chunk
        pending = len(reader.getstate()[0])  # bytes of a character the previous chunk cut
        try:
            text = reader.decode(chunk, final=eof)
        except UnicodeDecodeError as exc:
            where = lines_read + 1 + chunk.count(b"\n", 0, max(exc.start - pending, 0))
            raise InputError(
                f"{path}:{where}: not UTF-8 text: byte 0x{exc.object[exc.start]:02x} cannot start or continue "
                "a character",
                hint="mongoexport writes UTF-8; a file saved by another tool (Latin-1?) must be converted",
            ) from None
        buffer = buffer[position:] + text
        position = 0
        return not eof

    def skip(chars: str) -> None:
        nonlocal position, line
        while True:
            while position < len(buffer) and buffer[position] in chars:
                if buffer[position] == "\n":
                    line += 1
                position += 1
            if position < len(buffer) or eof or not fill():
                return

    while True:
        skip(" \t\r\n")
        if position >= len(buffer):
            if array:
                raise InputError(f"{path}:{line}: the JSON array is not closed (truncated file?)")
            return
        char = buffer[position]
        if array and not opened:
            if char != "[":
                raise InputError(f"{path}:{line}: expected a JSON array")
            opened = True
            position += 1
            continue
        if array and char == "]":
            return
        if array and char == ",":
            position += 1
            continue
        while True:
            try:
                element, end = decoder.raw_decode(buffer, position)
                break
            except json.JSONDecodeError as exc:
                # Incomplete document: read more, unless there is nothing more to read or the buffer already
                # holds more than any document could (then the error is real, not a cut).
                where = line + buffer.count("\n", position, exc.pos)
                if eof or len(buffer) - position > MAX_JSON_DOCUMENT or not fill():
                    raise InputError(f"{path}:{where}: not a valid JSON document: {exc.msg}") from None
        if type(element) is not dict:
            raise InputError(f"{path}:{line}: expected a JSON object, found {type(element).__name__}")
        yield line, element
        line += buffer.count("\n", position, end)
        position = end


def _bson_records(path: Path, part: FilePart | None = None) -> Iterator[tuple[int, bytes]]:
    offset = part.start if part is not None else 0
    end = part.end if part is not None else None
    with _open(path) as handle:
        read = handle.read
        try:
            handle.seek(offset)
            while end is None or offset < end:
                header = read(4)
                if not header:
                    return
                if len(header) < 4:
                    raise InputError(f"{path}: truncated BSON document at byte {offset}")
                length = int.from_bytes(header, "little")
                if length < 5 or length > MAX_BSON_DOCUMENT:
                    raise InputError(f"{path}: invalid BSON document length {length} at byte {offset}")
                body = read(length - 4)
                if len(body) < length - 4:
                    raise InputError(f"{path}: truncated BSON document at byte {offset}")
                yield offset, header + body
                offset += length
        except READ_ERRORS as exc:
            decompressed = " of the decompressed data" if path.name.endswith(".gz") else ""
            raise unreadable(path, exc, f"at byte {offset:,}{decompressed}") from None
