"""The bucket step on a mongoexport file (relaxed Extended JSON lines), on every core.

The file is read in chunks of :data:`CHUNK_LINES` lines cut at fixed line numbers. Each chunk is grouped
on its own by :func:`group_chunk`, a pure function: per (series, window), the readings serialized without
their series key, how many there are and the min and max of each measurement. The first part of the file
is grouped in this process while worker processes group the later parts and spill their chunks to a
private file. :class:`BucketMerger` then takes the chunks in file order and does everything that spans
chunks (open buckets, the next sequence when a bucket is full, closing windows left behind), so the output
is the same bytes whatever the number of workers.

Readings are copied into their bucket as parsed, Extended JSON wrappers and all: only the series key, the
time and the measurements are looked at. Files this path cannot take (BSON, canonical Extended JSON,
``--jsonArray``) are bucketed from decoded documents by the dump runner instead.
"""

from __future__ import annotations

import datetime
import gc
import multiprocessing
import os
import re
import shutil
import struct
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import astuple, dataclass
from itertools import chain, islice
from operator import itemgetter
from pathlib import Path
from typing import IO, Any

import orjson

from mongopat.errors import InputError, OperationFailed
from mongopat.migrate.dump_folder.file_parts import (
    MIN_PARALLEL_BYTES,
    SPILL_PREFIX,
    Part,
    over_parts,
    plan_parts,
    start_without_ctrl_c,
)
from mongopat.migrate.operations.bucket import BucketFill, measured
from mongopat.migrate.transform_api import set_path
from mongopat.sources.dump import _json_records, _open, json_problem
from mongopat.sources.extjson import ExtendedJSONError, decode_value, decode_wrapper, to_extended

CHUNK_LINES = 1000
CLOSE_EVERY_LINES = 10_000  # how often windows well behind the newest are closed and written
PARENT_SHARE = 0.8  # of an even share: merging and writing take about a fifth of the work
_BOM = b"\xef\xbb\xbf"
_FRAME = struct.Struct("<QQ")


@dataclass(frozen=True)
class BucketSpec:
    """What the bucket step asks for, in the terms this module needs."""

    series_key: str
    time_field: str
    width: int  # window length in seconds
    capacity: int  # readings per bucket at most
    measurements: tuple[str, ...]
    sentinels: tuple[tuple[str, tuple[Any, ...]], ...] = ()  # placeholder values per measurement

    @classmethod
    def of(cls, params: dict[str, Any]) -> BucketSpec:
        return cls(
            params["series_key"],
            params["time_field"],
            params["window_seconds"],
            params["max_bucket_size"],
            tuple(params.get("measurements") or ()),
            tuple((name, tuple(values)) for name, values in sorted((params.get("sentinels") or {}).items())),
        )


@dataclass
class Group:
    """The readings of one chunk that share a series and a window."""

    series: Any
    start: float  # window start, seconds since the epoch
    count: int
    readings: bytes  # the readings serialized, comma-separated, without the series key
    low: list[Any]  # per measurement: the smallest number, or None when no reading has one
    high: list[Any]


@dataclass
class Chunk:
    first_line: int
    lines: int  # lines of the file covered, blank ones included
    records: int  # documents read
    groups: list[Group]
    passthrough: list[bytes]  # documents without a series or a time, as they were, in file order


# -- dates -------------------------------------------------------------------------------------------

_EPOCH = datetime.datetime(1970, 1, 1)
_MINUTE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d\Z")
_SECONDS = re.compile(r":([0-5]\d)(\.\d{1,9})?(?:Z|([+-])(\d\d):?(\d\d))\Z")


class _NotPlain(ValueError):
    """This chunk needs the careful, line-by-line path."""


class _Memo(dict):
    """Values of ``compute`` by key, computed on first use; forgets everything past 100,000 entries, so
    memory stays bounded however many distinct keys a file has."""

    def compute(self, key: Any) -> Any:
        raise NotImplementedError

    def __missing__(self, key: Any) -> Any:
        value = self.compute(key)
        if len(self) > 100_000:
            self.clear()
        self[key] = value
        return value


class _Minutes(_Memo):
    """``"2026-01-01T00:00"`` -> seconds since the epoch of that minute."""

    def compute(self, text: str) -> float:
        if not _MINUTE.match(text):
            raise _NotPlain(text)
        try:
            return (datetime.datetime.fromisoformat(text) - _EPOCH).total_seconds()
        except ValueError:
            raise _NotPlain(text) from None


class _Seconds(_Memo):
    """``":02.500Z"`` or ``":02+01:00"`` -> seconds into the minute, less the UTC offset."""

    def compute(self, text: str) -> float:
        match = _SECONDS.match(text)
        if not match:
            raise _NotPlain(text)
        seconds, fraction, sign, hours, minutes = match.groups()
        value = int(seconds) + (float(fraction) if fraction else 0.0)
        if sign:
            offset = int(hours) * 3600 + int(minutes) * 60
            value -= offset if sign == "+" else -offset
        return value


class _Windows(_Memo):
    """``"2026-01-01T00:00"`` -> start of the window holding that minute, for windows of whole minutes."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.width = width

    def compute(self, text: str) -> float:
        minute = _minutes[text]
        return minute - minute % self.width


class _WindowBounds(_Memo):
    """Seconds since the epoch -> the relaxed ``$date`` of that moment (every series shares the windows)."""

    def compute(self, seconds: float) -> dict[str, Any]:
        return to_extended(_EPOCH + datetime.timedelta(seconds=seconds))


_MINUTE_OF = itemgetter(slice(0, 16))  # "2026-01-01T00:00:02Z" -> "2026-01-01T00:00"
_NUMBERS = {int, float}
_minutes = _Minutes()
_seconds = _Seconds()
_window_bounds = _WindowBounds()
_windows: dict[int, _Windows] = {}


def _windows_of(width: int) -> _Windows:
    if width not in _windows:
        _windows[width] = _Windows(width)
    return _windows[width]


def epoch_of(value: Any) -> float | None:
    """Seconds since the epoch of a ``$date`` wrapper, relaxed or canonical; None when ``value`` is not
    one (or is a date Python cannot hold). An invalid ``$date`` raises ValueError, as decoding does."""
    if type(value) is not dict or len(value) != 1 or "$date" not in value:
        return None
    date = value["$date"]
    if type(date) is str:
        try:
            return _minutes[date[:16]] + _seconds[date[16:]]
        except _NotPlain:
            pass
    moment = decode_wrapper(value)  # the general decoder: every form it takes, the same errors
    if not isinstance(moment, datetime.datetime):
        return None
    return (moment - _EPOCH).total_seconds()


def series_key_of(series: Any) -> Any:
    """A dict key for a series value: strings as they are, anything else by its JSON (so that ``true``,
    ``1`` and ``{"a": 1}`` are three series, and documents can be keys at all)."""
    return series if type(series) is str else (orjson.dumps(series),)


# -- one chunk ---------------------------------------------------------------------------------------


def group_chunk(lines: list[bytes], first_line: int, spec: BucketSpec, source: str) -> Chunk:
    """Group the readings of ``lines`` (the file's lines from number ``first_line``) by series and window.

    Most chunks take a vectorised path (comprehensions over the whole chunk); a chunk with anything
    unusual in it (blank lines, a missing series or time, dates that are not plain UTC strings, series
    that are not strings, a malformed line) is done again line by line, with the same result on the
    readings both could take and a clear error naming the line otherwise.
    """
    if first_line == 1 and lines and lines[0].startswith(_BOM):
        lines = [lines[0][len(_BOM) :], *lines[1:]]
    try:
        groups = _group_plain(lines, spec)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError):
        return _group_careful(lines, first_line, spec, source)
    return Chunk(first_line, len(lines), len(lines), groups, [])


def _group_plain(lines: list[bytes], spec: BucketSpec) -> list[Group]:
    # One parse of the whole chunk as an array (a blank or broken line fails it: the careful path follows).
    documents = orjson.loads(b"[" + b",".join(lines) + b"]")
    series_key, width = spec.series_key, spec.width
    series = [document.pop(series_key) for document in documents]
    if set(map(type, series)) != {str}:
        raise _NotPlain("series")
    time_field = spec.time_field
    dates = [document[time_field]["$date"] for document in documents]
    tails = {date[16:] for date in dates}  # ":SS.fffZ", checked once each
    for tail in tails:
        _seconds[tail]  # raises _NotPlain for anything but seconds and a zone
    if width % 60 == 0 and all(tail[-1] == "Z" for tail in tails):
        # Windows of whole minutes, UTC times: the minute alone gives the window (one lookup a reading).
        starts = list(map(_windows_of(width).__getitem__, map(_MINUTE_OF, dates)))
    else:
        minutes, seconds_of = _minutes, _seconds
        starts = [t - t % width for t in [minutes[date[:16]] + seconds_of[date[16:]] for date in dates]]
    grouped: defaultdict[tuple[str, float], list[dict[str, Any]]] = defaultdict(list)
    for key, document in zip(zip(series, starts, strict=True), documents, strict=True):
        grouped[key].append(document)
    return [_group(s, start, readings, spec) for (s, start), readings in grouped.items()]


def _nested(names: tuple[str, ...], values: list[Any]) -> dict[str, Any]:
    """``{name: value}`` of the measured values, dotted names as sub-documents (as ``$min`` writes them)."""
    out: dict[str, Any] = {}
    for name, value in zip(names, values, strict=True):
        if value is not None:
            set_path(out, name, value)
    return out


def _group(series: Any, start: float, readings: list[dict[str, Any]], spec: BucketSpec) -> Group:
    low: list[Any] = []
    high: list[Any] = []
    skip = {name: frozenset(values) for name, values in spec.sentinels}
    for name in spec.measurements:
        numbers: list[Any]
        if "." in name or name in skip:
            numbers = [v for r in readings if (v := measured(r, name, skip)) is not None]
        else:
            numbers = [r.get(name) for r in readings]
            if not set(map(type, numbers)) <= _NUMBERS:  # bool, strings, missing values...: not measured
                numbers = [v for v in numbers if type(v) is int or type(v) is float]
        low.append(min(numbers) if numbers else None)
        high.append(max(numbers) if numbers else None)
    return Group(series, start, len(readings), orjson.dumps(readings)[1:-1], low, high)


def _group_careful(lines: list[bytes], first_line: int, spec: BucketSpec, source: str) -> Chunk:
    grouped: dict[Any, tuple[Any, float, list[dict[str, Any]]]] = {}
    passthrough: list[bytes] = []
    records = 0
    for offset, line in enumerate(lines):
        if not line.strip():
            continue
        records += 1
        where = f"{source}:{first_line + offset}"
        try:
            document = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise InputError(f"{where}: not a valid Extended JSON document: {json_problem(exc)}") from None
        if type(document) is not dict:
            raise InputError(f"{where}: expected a JSON object, found {type(document).__name__}")
        series = document.get(spec.series_key)
        try:
            seconds = epoch_of(document.get(spec.time_field))
        except ValueError as exc:
            raise InputError(f"{where}: not a valid Extended JSON document: {exc}") from None
        if series is None or seconds is None:
            passthrough.append(line.rstrip(b"\n"))
            continue
        del document[spec.series_key]
        start = seconds - seconds % spec.width
        key = (series_key_of(series), start)
        if key not in grouped:
            grouped[key] = (series, start, [])
        grouped[key][2].append(document)
    groups = [_group(series, start, readings, spec) for series, start, readings in grouped.values()]
    return Chunk(first_line, len(lines), records, groups, passthrough)


# -- across chunks -----------------------------------------------------------------------------------


class _Bucket:
    __slots__ = ("series", "start", "sequence", "count", "readings", "low", "high")

    def __init__(self, series: Any, start: float, sequence: int, measurements: int) -> None:
        self.series, self.start, self.sequence = series, start, sequence
        self.count = 0
        self.readings: list[bytes] = []
        self.low: list[Any] = [None] * measurements
        self.high: list[Any] = [None] * measurements

    def take(self, count: int, readings: bytes, low: list[Any], high: list[Any]) -> None:
        self.count += count
        self.readings.append(readings)
        for i, value in enumerate(low):
            if value is not None and (self.low[i] is None or value < self.low[i]):
                self.low[i] = value
        for i, value in enumerate(high):
            if value is not None and (self.high[i] is None or value > self.high[i]):
                self.high[i] = value


class BucketMerger:
    """Turns chunk groups, taken in file order, into bucket documents written through ``write``.

    Which bucket a group's readings go to is the bucket step's :class:`BucketFill`, as on every backend:
    a group that does not fit in its window's open bucket is split across the next sequences. Every
    :data:`CLOSE_EVERY_LINES` lines, windows more than two windows behind the newest are written out, so
    memory holds the open windows only (plus the last sequence number of every window closed, for
    readings that arrive late).
    """

    def __init__(self, spec: BucketSpec, write: Callable[[bytes], None]) -> None:
        self.spec = spec
        self._write = write
        self.fill = BucketFill(spec.capacity)
        self.open: dict[tuple[Any, float], _Bucket] = {}
        self.read = self.passthrough = self.written = 0

    def add(self, chunk: Chunk) -> None:
        for line in chunk.passthrough:
            self._write(line + b"\n")
            self.passthrough += 1
            self.written += 1
        for group in chunk.groups:
            self._add(group)
        self.read += chunk.records
        if (chunk.first_line - 1 + chunk.lines) % CLOSE_EVERY_LINES == 0:
            self._write_closed(self.fill.close_behind(self.spec.width))

    def _add(self, group: Group) -> None:
        key = (series_key_of(group.series), group.start)
        spread = self.fill.place(key, group.count)
        if len(spread) == 1:
            self._bucket(key, group, spread[0][0]).take(group.count, group.readings, group.low, group.high)
        else:
            # Split across buckets: reading by reading, each measured on its own.
            readings = iter(orjson.loads(b"[" + group.readings + b"]"))
            for sequence, taken in spread:
                bucket = self._bucket(key, group, sequence)
                for reading in islice(readings, taken):
                    single = _group(group.series, group.start, [reading], self.spec)
                    bucket.take(1, single.readings, single.low, single.high)

    def _bucket(self, key: tuple[Any, float], group: Group, sequence: int) -> _Bucket:
        """The open bucket ``sequence`` of the window; the one it follows is written out."""
        bucket = self.open.get(key)
        if bucket is None or bucket.sequence != sequence:
            if bucket is not None:
                self._emit(bucket)
            bucket = self.open[key] = _Bucket(group.series, group.start, sequence, len(self.spec.measurements))
        return bucket

    def close(self, older_than: float | None = None) -> None:
        """Write out the buckets of windows that start before ``older_than`` (all of them with None)."""
        self._write_closed(self.fill.close(older_than))

    def _write_closed(self, keys: list[tuple[Any, float]]) -> None:
        for key in keys:
            self._emit(self.open.pop(key))

    def _emit(self, bucket: _Bucket) -> None:
        spec = self.spec
        began = _window_bounds[bucket.start]
        head = {
            "_id": {"s": bucket.series, "w": began, "n": bucket.sequence},
            spec.series_key: bucket.series,
            "start": began,
            "end": _window_bounds[bucket.start + spec.width],
            "count": bucket.count,
            "min": _nested(spec.measurements, bucket.low),
            "max": _nested(spec.measurements, bucket.high),
        }
        self._write(orjson.dumps(head)[:-1] + b',"readings":[' + b",".join(bucket.readings) + b"]}\n")
        self.written += 1


# -- the file, in parts ------------------------------------------------------------------------------


def _chunks(handle: IO[bytes], part: Part, spec: BucketSpec, source: str) -> Iterator[Chunk]:
    handle.seek(part.start)
    line, remaining = part.first_line, part.lines
    while remaining is None or remaining > 0:
        lines = list(islice(handle, CHUNK_LINES if remaining is None else min(CHUNK_LINES, remaining)))
        if not lines:
            return
        yield group_chunk(lines, line, spec, source)
        line += len(lines)
        if remaining is not None:
            remaining -= len(lines)


def _spill(handle: IO[bytes], chunk: Chunk) -> None:
    groups = [[g.series, g.start, g.count, len(g.readings), g.low, g.high] for g in chunk.groups]
    header = orjson.dumps([chunk.first_line, chunk.lines, chunk.records, groups, [len(p) for p in chunk.passthrough]])
    payload = b"".join([g.readings for g in chunk.groups] + chunk.passthrough)
    handle.write(_FRAME.pack(len(header), len(payload)) + header + payload)


def _follow(path: Path, process: Any) -> Iterator[Chunk]:
    """The chunks a worker spills, each as soon as it is whole, until the worker has exited and the
    file is read to its end: merging them overlaps the worker's own grouping."""
    buffer = bytearray()
    with path.open("rb") as handle:
        while True:
            finished = not process.is_alive()  # checked before reading: what it wrote is then all there
            data = handle.read(1 << 20)
            if data:
                buffer += data
                yield from _whole_frames(buffer)
            elif finished:
                break
            else:
                time.sleep(0.002)
    process.join()
    if buffer or process.exitcode != 0:
        raise OperationFailed(f"a process bucketing {path.name} stopped (exit code {process.exitcode})")


def _whole_frames(buffer: bytearray) -> Iterator[Chunk]:
    """Chunks from the whole frames at the front of ``buffer``, which loses them."""
    while len(buffer) >= _FRAME.size:
        header_size, payload_size = _FRAME.unpack_from(buffer)
        end = _FRAME.size + header_size + payload_size
        if len(buffer) < end:
            return
        header = orjson.loads(bytes(buffer[_FRAME.size : _FRAME.size + header_size]))
        payload = bytes(buffer[_FRAME.size + header_size : end])
        del buffer[:end]
        if type(header) is dict:
            raise (InputError if header["kind"] == "input" else OperationFailed)(header["error"])
        first_line, lines, records, group_rows, passthrough_sizes = header
        groups, cursor = [], 0
        for series, start, count, size, low, high in group_rows:
            groups.append(Group(series, start, count, payload[cursor : cursor + size], low, high))
            cursor += size
        passthrough = []
        for size in passthrough_sizes:
            passthrough.append(payload[cursor : cursor + size])
            cursor += size
        yield Chunk(first_line, lines, records, groups, passthrough)


def _group_part(path: str, part: Part, spec: BucketSpec, spill: str, parent: int) -> None:
    """A worker process: group one part of the file into ``spill``; stops early if its parent is gone."""
    try:
        out = open(spill, "r+b")  # noqa: SIM115 - closed below
    except OSError:
        return  # the parent stopped and cleared the spill folder before this process began
    with open(path, "rb") as handle, out:
        try:
            for chunk in _chunks(handle, part, spec, path):
                _spill(out, chunk)
                out.flush()  # whole frames reach the file as they are made: the parent follows it
                if os.getppid() != parent:
                    return
        except Exception as exc:  # reported by the parent, in file order, as one line
            kind = "input" if isinstance(exc, InputError) else "failure"
            message = orjson.dumps({"error": str(exc) or type(exc).__name__, "kind": kind})
            out.write(_FRAME.pack(len(message), 0) + message)


def bucket_file(
    path: Path,
    spec: BucketSpec,
    write: Callable[[bytes], None],
    workers: int = 1,
    after_chunk: Callable[[int], None] | None = None,
    spill_in: Path | None = None,
) -> BucketMerger:
    """Bucket every reading of ``path`` and write the buckets (and documents without series or time, as
    they were) through ``write``; ``after_chunk`` gets the documents read so far. The workers' chunks
    wait in a folder made in ``spill_in`` (default: the system's temporary folder) whose name starts with
    :data:`SPILL_PREFIX`. Returns the merger, whose counters say what was read and written."""
    parts = plan_parts(path, workers, MIN_PARALLEL_BYTES, CHUNK_LINES, PARENT_SHARE)
    merger = BucketMerger(spec, write)
    spill_folder = Path(tempfile.mkdtemp(prefix=SPILL_PREFIX, dir=spill_in)) if len(parts) > 1 else None
    processes: list[tuple[Any, Path]] = []
    # Nothing here makes reference cycles, and the collector's passes over the chunk's thousands of fresh
    # documents cost about a sixth of the run: it is paused meanwhile (in the workers too, by inheritance).
    collecting = gc.isenabled()
    gc.disable()
    try:
        if spill_folder is not None:
            context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
            for number, part in enumerate(parts[1:], 1):
                spill = spill_folder / f"part{number}"
                spill.touch()  # there to follow before the worker opens it
                process = context.Process(
                    target=_group_part, args=(str(path), part, spec, str(spill), os.getpid()), daemon=True
                )
                processes.append((process, spill))  # before it starts: an interruption now still stops it
                start_without_ctrl_c(process)
        with _open(path) as handle:
            # The first part as this process groups it, then each worker's part as it is spilled.
            followed = chain.from_iterable(_follow(spill, process) for process, spill in processes)
            for chunk in chain(_chunks(handle, parts[0], spec, str(path)), followed):
                merger.add(chunk)
                if after_chunk is not None:
                    after_chunk(merger.read)
        merger.close()
    finally:
        if collecting:
            gc.enable()
        for process, _spill_path in processes:
            if process.is_alive():
                process.terminate()
                process.join()
        if spill_folder is not None:
            shutil.rmtree(spill_folder, ignore_errors=True)
    return merger


# -- verification ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tally:
    """What a bucket collection file holds: documents, readings in bucket documents (by their ``count``),
    lines that are not a JSON object, and buckets whose ``count`` is not the length of their readings."""

    documents: int = 0
    readings: int = 0
    malformed: int = 0
    miscounted: int = 0


def tally_buckets(path: Path, workers: int = 1) -> Tally:
    """Count the documents of a mongoexport file and add up ``count`` over its bucket documents (those
    with a ``readings`` array), reading ranges of the file on ``workers`` processes."""
    tallies = over_parts(path, workers, lambda part: _tally(_json_records(path, part)))
    return Tally(*(sum(t[i] for t in map(astuple, tallies)) for i in range(4)))


def _tally(records: Iterator[tuple[int, Any]]) -> Tally:
    documents = readings = malformed = miscounted = 0
    loads = orjson.loads
    for _line, record in records:
        documents += 1
        try:
            document = record if type(record) is not bytes else loads(record)
        except orjson.JSONDecodeError:
            document = None
        if type(document) is not dict:
            malformed += 1
        elif type(found := document.get("readings")) is list:
            count = _integer(document.get("count", 0))
            readings += count
            miscounted += count != len(found)
    return Tally(documents, readings, malformed, miscounted)


def _integer(value: Any) -> int:
    """An integer as relaxed (``5``) or canonical (``{"$numberInt": "5"}``) Extended JSON writes it; 0 for
    anything else."""
    if type(value) is dict and value:
        try:
            value = decode_value(value)
        except ExtendedJSONError:
            return 0
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0
