"""Analyse one collection: stream its documents once through every accumulator, then summarise."""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import pickle
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import itemgetter
from typing import Any

import bson
from bson import ObjectId, json_util
from bson.errors import BSONError

from mongopat.analysis.array_kinds import annotate_arrays
from mongopat.analysis.schema import (
    ARRAY_LENGTH_BOUNDS,
    MAP_KEY,
    DocumentShape,
    Limits,
    Slot,
    iter_slots,
    walk_documents,
)
from mongopat.analysis.series import SeriesCadence
from mongopat.analysis.shapes import ShapeTracker
from mongopat.analysis.shards import chunks_seen
from mongopat.analysis.sketches import Distribution
from mongopat.analysis.system_output import note as system_note
from mongopat.analysis.system_output import system_output
from mongopat.analysis.timeline import DateProfiles, TimeProfile, objectid_epoch, objectid_epochs
from mongopat.analysis.values import date_spread, length_quantiles, number_spread
from mongopat.errors import InputError
from mongopat.sources import shared_parts
from mongopat.sources.base import CollectionStats, DocumentStream, IndexInfo, Sampling, Source
from mongopat.sources.extjson import ExtendedJSONError, decode_value

MB = 1024 * 1024
# What bson.encode raises for a document it cannot store (a batch's and then each document's encoding).
BSON_REFUSALS = (BSONError, OverflowError, TypeError, ValueError)
SIZE_BOUNDS = (256, 1024, 4096, 16384, 65536, 262144, MB, 4 * MB, 8 * MB, 16 * MB)


@dataclass
class AnalyzeOptions:
    """Knobs of ``mongopat analyze``; the defaults are documented in the README."""

    sample_size: int | None = None  # None: the source's default ($sample 1000 on a server, whole file on a dump)
    distinct_limit: int = 10_000
    low_cardinality: int = 20
    top_values: int = 10
    # Documents walked together (column by column, see schema.walk_documents), then folded into the
    # summaries. A walk costs per column as well as per value, and documents whose optional fields come and
    # go pay it per key they hold: against 64, 256 took 4% less time on the benchmark's orders with optional
    # fields and the same within 1% on its uniform orders and the weather sample (one worker, alternating
    # runs on a 2-CPU host).
    flush_every: int = 256
    # ... or, for documents of many paths, this many documents per path the collection has shown: a walk's
    # cost is per column as well as per value (on the weather sample, 124 paths, 256 documents a batch took
    # 18% less time than 64 with one worker).
    flush_per_path: int = 2
    # ... or sooner, once the documents queued hold this many bytes (their records' in an export file): a
    # mebibyte of JSON is several of Python objects, so large documents are walked one or two at a time.
    flush_bytes: int = 2**20
    # Values walked are folded into the summaries (distinct counts, types, distributions) once this many
    # documents have been walked, or flush_bytes of them: a fold has a cost per path as well as per value,
    # which batches of a walk's size paid too often. The summaries do not depend on where the folds fall.
    # Against a fold after every walk, with one worker, medians of 3 alternating runs: 9% less time on the
    # optional orders, 7% on the orders, 2% on the weather sample (whose 1.7 KiB documents reach
    # flush_bytes first).
    summarize_every: int = 1024
    # Keep the first document read, as relaxed Extended JSON, in the report (``--show-values``): it holds
    # real values, so it is off by default.
    keep_example: bool = False
    # Read every document of a server's collections instead of sampling (analyze --full-scan).
    full_scan: bool = False
    # Processes reading one large dump file in parallel (byte ranges, merged afterwards); 1 disables.
    workers: int = field(default_factory=lambda: min(4, os.cpu_count() or 1))


ProgressCallback = Callable[[int], None]
# Documents between two progress reports.
PROGRESS_EVERY = 1024


class CollectionAnalysis:
    """Accumulates the evidence for one collection as documents stream by."""

    def __init__(self, name: str, options: AnalyzeOptions, natural_order: bool = False) -> None:
        self.name = name
        self.options = options
        self.limits = Limits(options.distinct_limit, options.top_values, options.low_cardinality)
        self.date_profiles = DateProfiles()
        self.root = DocumentShape("", 0, False, self.limits, self.date_profiles.add)
        self.sizes = Distribution()
        # Documents waiting to be walked as one batch (schema.walk_documents), with their sizes if known.
        self._pending: list[dict[str, Any]] = []
        self._pending_sizes: list[int | None] = []
        self._pending_bytes = 0
        self._batch = options.flush_every  # documents a walk takes (see AnalyzeOptions.flush_per_path)
        self._largest = 0  # the largest BSON size seen: the estimate for documents of unknown size
        self._id_epochs: list[int] = []
        self._unsummarized = 0
        self._unsummarized_bytes = 0
        self.id_profile = TimeProfile("_id", "objectId")
        self.shapes = ShapeTracker()
        self.cadence = SeriesCadence()
        self.natural_order = natural_order
        self.documents = 0
        self.stats = CollectionStats()
        self.indexes: list[IndexInfo] = []
        self.sampling: Sampling | None = None
        self.notes: list[str] = []
        self.references: list[dict[str, Any]] = []  # filled by analysis.references across collections
        self.ambiguous_references: list[dict[str, Any]] = []  # fields matching several collections alike
        self.example: Any = None

    def add(self, document: dict[str, Any], size: int | None) -> None:
        """Queue one document; it is walked with the others of its batch at the next :meth:`flush`.

        ``size`` is its BSON size, or None when it comes straight from Extended JSON (it is measured once
        decoded, and counts as the largest size seen so far until then).
        """
        self._pending.append(document)
        self._pending_sizes.append(size)
        self._pending_bytes += size or self._largest or self.options.flush_bytes
        self.documents += 1
        self._flush_when_full()

    @property
    def queued(self) -> int:
        """Documents waiting for the next walk."""
        return len(self._pending)

    def add_batch(self, documents: list[dict[str, Any]], record_bytes: int) -> None:
        """Queue documents straight from Extended JSON (measured once decoded); ``record_bytes``, what their
        records take in the file (0 when not known), bounds the batch's memory."""
        self._pending += documents
        self._pending_sizes += [None] * len(documents)
        self._pending_bytes += record_bytes or len(documents) * (self._largest or self.options.flush_bytes)
        self.documents += len(documents)
        self._flush_when_full()

    def _flush_when_full(self) -> None:
        if len(self._pending) >= self._batch or self._pending_bytes >= self.options.flush_bytes:
            self._unsummarized += len(self._pending)
            self._unsummarized_bytes += self._pending_bytes
            self._walk()
            options = self.options
            if self._unsummarized >= options.summarize_every or self._unsummarized_bytes >= options.flush_bytes:
                self._summarize()

    def flush(self) -> None:
        """Walk the queued documents and fold every value walked into the summaries."""
        self._walk()
        self._summarize()

    def _walk(self) -> None:
        if self._pending:
            first = self.documents == len(self._pending)
            self._walk_pending()
            if first:  # the batch size follows the paths seen, counted again at each fold (a walk over them)
                self._size_batches()

    def _size_batches(self) -> None:
        self._batch = max(self.options.flush_every, self.options.flush_per_path * self.root.paths())

    def _summarize(self) -> None:
        self._size_batches()
        self.root.flush()
        self.id_profile.add_many(self._id_epochs)  # type: ignore[arg-type]
        self._id_epochs = []
        self._unsummarized = self._unsummarized_bytes = 0

    def _walk_pending(self) -> None:
        docs, sizes = self._pending, self._pending_sizes
        self._pending, self._pending_sizes, self._pending_bytes = [], [], 0
        first = self.documents - len(docs)  # position of docs[0] in the stream
        unmeasured = None in sizes  # from Extended JSON: measured by the walk, else encoded (exact either way)
        layouts = list(map(tuple, docs))  # each document's keys: the walk's columns and the shapes over time
        try:
            measured = walk_documents(self.root, docs, unmeasured, layouts)
        except ExtendedJSONError as exc:
            raise DocumentProblem(first + _undecodable(docs), f"not a valid Extended JSON document: {exc}") from None
        if unmeasured:
            if measured is not None:
                sizes = measured
            else:
                try:
                    sizes = list(map(len, map(bson.encode, docs)))
                except BSON_REFUSALS:
                    index, problem = _unencodable(docs)
                    raise DocumentProblem(first + index, f"cannot be stored as BSON: {problem}") from None
        self.sizes.add_many(sizes)
        self._largest = max(self._largest, max(sizes))
        if self.options.keep_example and self.example is None:
            self.example = plain_value(docs[0])
        if self.root.keys is not None:  # documents keyed by ids: their keys are data, not a shape
            layouts = [(MAP_KEY,)] * len(docs)
        self.cadence.add(docs)
        self._add_times(docs, first, layouts)

    def _add_times(self, docs: list[dict[str, Any]], first: int, layouts: list[tuple[str, ...]]) -> None:
        """Creation times (from ``_id``, else the position of a natural-order scan) and shapes over time
        (``layouts``: each document's keys, in order)."""
        identifiers = list(map(dict.get, docs, repeat("_id")))
        whens: list[float | None]
        if set(map(type, identifiers)) == {ObjectId}:
            whens = objectid_epochs(identifiers)  # type: ignore[assignment,arg-type]
            self._id_epochs += whens
            self.shapes.clock = "_id"
        else:
            whens = []
            for position, identifier in enumerate(identifiers, first):
                if type(identifier) is ObjectId:
                    when: float | None = objectid_epoch(identifier)
                    self._id_epochs.append(when)  # type: ignore[arg-type]
                    self.shapes.clock = "_id"
                elif self.natural_order:
                    when = position
                    self.shapes.clock = self.shapes.clock or "position"
                else:
                    when = None
                whens.append(when)
        # A shape keeps a count, a first and a last time: what a batch adds does not depend on the order of
        # its documents, so they are grouped by layout over the whole batch (exports whose optional fields
        # come and go make runs of a few documents each). New shapes still arrive in first-seen order.
        if None in whens:  # a document with no creation time has no place in time
            timed = [when is not None for when in whens]
            layouts, whens = list(compress(layouts, timed)), list(compress(whens, timed))
            if not whens:
                return
        if len(dict.fromkeys(layouts)) == 1:
            self.shapes.add_many(frozenset(layouts[0]), whens)  # type: ignore[arg-type]
            return
        by_layout: dict[tuple[str, ...], list[float]] = {}
        for layout, when in zip(layouts, whens, strict=True):
            times = by_layout.get(layout)
            if times is None:
                by_layout[layout] = [when]  # type: ignore[list-item]
            else:
                times.append(when)  # type: ignore[arg-type]
        for layout, times in by_layout.items():
            self.shapes.add_many(frozenset(layout), times)

    def merge(self, other: CollectionAnalysis) -> None:
        """Fold in the analysis of the next part of the same collection (parallel reading)."""
        self.flush()
        other.flush()
        self.root.merge(other.root)
        self.sizes.merge(other.sizes)
        self.id_profile.merge(other.id_profile)
        self.date_profiles.merge(other.date_profiles)
        self.shapes.merge(other.shapes, offset=self.documents)
        self.cadence.merge(other.cadence)
        self.example = self.example if self.example is not None else other.example
        self.documents += other.documents

    # -- summary ---------------------------------------------------------------------------------

    def scale(self) -> float:
        """Documents in the collection per document read (1 when everything was read)."""
        if self.sampling is not None and self.sampling.complete:
            return 1.0
        if self.stats.count and self.documents:
            return max(1.0, self.stats.count / self.documents)
        return 1.0

    def field_entries(self) -> list[dict[str, Any]]:
        self.flush()  # documents still queued
        entries = []
        for slot, parent in iter_slots(self.root):
            entries.append(self._field_entry(slot, parent))
        return entries

    def _field_entry(self, slot: Slot, parent: DocumentShape | None) -> dict[str, Any]:
        types = slot.all_types()
        total = sum(types.values())
        present = slot.count
        if parent is not None and parent.keys is not None:
            # The one slot of a map: present in the maps holding at least one key.
            present = parent.count - parent.empty
        entry: dict[str, Any] = {
            "path": slot.path,
            "depth": slot.depth,
            "in_array": slot.in_array,
            "count": slot.count,
            "presence": round(present / parent.count, 4) if parent is not None and parent.count else None,
            "types": [
                {"type": name, "count": count, "share": round(count / total, 4)} for name, count in types.most_common()
            ],
        }
        distinct = slot.distinct
        scalar_values = sum(c for name, c in slot.types.items())
        if scalar_values:
            # A sample of the distinct values scaled up can pass the number of values it stands for.
            estimate = min(distinct.estimate(), scalar_values)
            top = None
            if estimate <= self.limits.low_cardinality:
                counted = distinct.top(self.limits.top_values)
                if counted is not None:
                    top = [{"value": plain_value(value), "count": count} for value, count in counted]
            entry["cardinality"] = {
                "values": scalar_values,
                "distinct": estimate,
                "exact": distinct.exact,
                "all_distinct": distinct.exact and estimate == scalar_values,
                "top": top,
            }
        else:
            entry["cardinality"] = None
        card = entry["cardinality"]
        entry["numbers"] = _numbers(slot, card["distinct"]) if slot.numbers is not None and card else None
        entry["dates"] = date_spread(slot.date_sample) if slot.date_sample is not None else None
        lengths = slot.string_lengths
        entry["strings"] = (
            {
                "count": lengths[0],
                "mean_length": round(lengths[1] / lengths[0], 2),
                "max_length": lengths[2],
                **(length_quantiles(slot.length_sample) if slot.length_sample is not None else {}),
            }  # fmt: skip
            if lengths
            else None
        )
        if slot.length_dist is not None and slot.length_dist.n:
            element = slot.element
            element_types = element.all_types() if element is not None else {}
            element_total = sum(element_types.values())
            entry["array"] = {
                **slot.length_dist.summary(),
                "histogram": slot.length_dist.histogram(ARRAY_LENGTH_BOUNDS),
                "element_types": [
                    {"type": name, "count": count, "share": round(count / element_total, 4)}
                    for name, count in element_types.most_common()
                ],
            }
        else:
            entry["array"] = None
        document = slot.document
        entry["map"] = (
            document.keys.summary(document.fields[MAP_KEY].path, document.count)
            if document is not None and document.keys is not None
            else None
        )
        return entry

    def _sharding(self) -> dict[str, Any]:
        return _sharding_of(self)

    def to_dict(self) -> dict[str, Any]:
        fields = self.field_entries()
        annotate_arrays(fields)
        written_by = system_output(self.name, fields)
        notes = self.stats.notes + self.notes + ([system_note(written_by)] if written_by else [])
        scale = self.scale()
        size_summary = self.sizes.summary()
        size_summary.update(
            {
                "over_1mb": self.sizes.count_above(MB),
                "over_8mb": self.sizes.count_above(8 * MB),
                "over_16mb": self.sizes.count_above(16 * MB),
                "histogram": self.sizes.histogram(SIZE_BOUNDS),
            }
        )
        time_profiles = []
        if self.id_profile.n:
            time_profiles.append(self.id_profile.to_dict(scale))
        for path in sorted(self.date_profiles):
            time_profiles.append(self.date_profiles[path].to_dict(scale))
        sampling = self.sampling or Sampling("none", None)
        return {
            "name": self.name,
            "count": self.stats.count,
            "count_exact": self.stats.count_exact,
            "storage": {
                "size_bytes": self.stats.size_bytes,
                "storage_bytes": self.stats.storage_bytes,
                "avg_document_bytes": self.stats.avg_document_bytes,
                "index_bytes": self.stats.index_bytes,
            },
            "sharding": self._sharding(),
            # A time-series collection's options and bucket figures: only time-series collections have it.
            **({"timeseries": self.stats.timeseries} if self.stats.timeseries is not None else {}),
            "sampling": {
                "method": sampling.method,
                "requested": sampling.requested,
                "documents": self.documents,
                "complete": sampling.complete,
                "note": sampling.note,
            },
            "document_size": size_summary,
            "max_depth": max((f["depth"] for f in fields), default=0),
            "fields": fields,
            "time": time_profiles,
            # Documents keyed by ids (one entry a key): the keys' summary, as a sub-document map's ``map``.
            "document_map": self.root.keys.summary(MAP_KEY, self.root.count) if self.root.keys is not None else None,
            "drift": self.shapes.to_dict(),
            "series_cadence": self.cadence.to_dict(),
            "references": self.references,
            "ambiguous_references": self.ambiguous_references,
            "indexes": [index.to_dict() for index in self.indexes],
            "notes": notes,
            "system_output": written_by,
            "example": self.example,
        }


def _sharding_of(analysis: CollectionAnalysis) -> dict[str, Any]:
    stats = analysis.stats
    out: dict[str, Any] = {"sharded": stats.sharded, "shard_key": stats.shard_key}
    if not stats.sharded:
        return out
    shards = {name: {"documents": count} for name, count in stats.shards.items()}
    key = stats.shard_key or {}
    if len(key) == 1 and next(iter(key.values())) != "hashed" and stats.chunks:
        field_name = next(iter(key))
        slot = analysis.root.fields.get(field_name)
        values = list(slot.distinct.values) if slot is not None else []
        for shard, counts in chunks_seen(values, stats.chunks, field_name).items():
            shards.setdefault(shard, {}).update(counts)
        out["note"] = (
            "$sample through mongos draws from every shard; chunks_seen counts the chunks the sampled keys fall in"
        )
    elif stats.chunks:
        out["note"] = "compound or hashed shard key: chunks seen by the sample are not mapped"
    out["shards"] = shards
    return out


def _numbers(slot: Slot, distinct: int) -> dict[str, Any] | None:
    """A field's numbers: range and sentinels, and the spread of the values other than the sentinels."""
    assert slot.numbers is not None
    summary = slot.numbers.summary(distinct)
    if summary is None or slot.number_sample is None:
        return summary
    sentinels = {entry["value"]: entry["count"] for entry in summary["sentinels"]}
    others = [v for v in (slot.numbers.low, slot.numbers.high, *slot.numbers.candidates) if v is not None]
    others = [v for v in others if v not in sentinels]
    found = number_spread(slot.number_sample, sentinels, min(others), max(others)) if others else None
    return {**summary, **(found or {})}


def plain_value(value: Any) -> Any:
    """A JSON-safe rendering of a BSON value (relaxed Extended JSON for non-JSON types)."""
    if value is None or type(value) in (str, int, bool):
        return value
    if type(value) is float:
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    return json.loads(json_util.dumps(value, json_options=json_util.RELAXED_JSON_OPTIONS))


class DocumentProblem(Exception):
    """A document of the stream cannot be analysed; ``index`` is its position in the stream (from 0)."""

    def __init__(self, index: int, problem: str) -> None:
        super().__init__(problem)
        self.index = index
        self.problem = problem


def _undecodable(docs: list[dict[str, Any]]) -> int:
    """Which document of a batch holds the wrapper that failed: decoded again one by one (what the walk
    already decoded stays decoded, so only the bad one fails)."""
    for index, doc in enumerate(docs):
        try:
            decode_value(doc)
        except ExtendedJSONError:
            return index
    return 0


def _unencodable(docs: list[dict[str, Any]]) -> tuple[int, str]:
    for index, doc in enumerate(docs):
        try:
            bson.encode(doc)
        except BSON_REFUSALS as exc:
            return index, str(exc)
    return 0, "unknown"


def analyze_stream(
    name: str, stream: DocumentStream, options: AnalyzeOptions, progress: ProgressCallback | None = None
) -> CollectionAnalysis:
    analysis = CollectionAnalysis(name, options, natural_order=stream.sampling.natural_order)
    every = PROGRESS_EVERY
    add = analysis.add
    # Documents are trees and the analysis makes no reference cycles: reference counting frees
    # everything, and the cyclic collector would only traverse the queued documents and the sketches again
    # and again. It is back on when the stream ends.
    collecting = gc.isenabled()
    gc.disable()
    try:
        if stream.undecoded:
            reported = 0
            for documents, record_bytes in stream:
                analysis.add_batch(documents, record_bytes)
                if progress is not None and analysis.documents - reported >= every:
                    reported = analysis.documents
                    progress(reported)
        else:
            for document, size in stream:
                add(document, size)
                if progress is not None and analysis.documents % every == 0:
                    progress(analysis.documents)
        analysis.flush()
    except DocumentProblem as exc:
        where = stream.locate(exc.index) if stream.locate is not None else f"{name}: document #{exc.index + 1}"
        raise InputError(f"{where}: {exc.problem}") from None
    finally:
        if collecting:
            gc.enable()
    if progress is not None:
        progress(analysis.documents)
    return analysis


def _analyze_part(job: tuple[Source, str, AnalyzeOptions, Any]) -> CollectionAnalysis:
    source, name, options, part = job
    return analyze_stream(name, source.documents(name, None, decoded=False, part=part), options)


# An analysis of consecutive documents of a file (pickled, or not), and the byte offset where the first of
# them starts.
Piece = tuple[int, "CollectionAnalysis | bytes"]


def _analyze_pieces(job: tuple[Source, str, AnalyzeOptions, Any]) -> list[Piece]:
    """Read a part; then, while another part being read has enough left, the second half of what it has
    left (see shared_parts), each in an analysis of its own. An analysis is pickled when the next one
    starts (a few hundred KiB instead of several MiB), so a process holds one at a time: a thief would
    otherwise hold two, the run's peak memory."""
    source, name, options, part = job
    start, analysis = part.start, _analyze_part(job)
    pieces: list[Piece] = []
    shared = None if part.shared is None else shared_parts.lookup(part.shared)
    while shared is not None and (stolen := shared.steal(part.index)) is not None:
        pieces.append((start, pickle.dumps(analysis, protocol=pickle.HIGHEST_PROTOCOL)))
        del analysis  # freed before the next one fills
        start, analysis = stolen.start, _analyze_part((source, name, options, stolen))
    pieces.append((start, analysis))
    return pieces


def _analyze_pieces_pickled(job: tuple[Source, str, AnalyzeOptions, Any]) -> bytes:
    return pickle.dumps(_analyze_pieces(job), protocol=pickle.HIGHEST_PROTOCOL)


def _analyze_parts(source: Source, name: str, options: AnalyzeOptions, parts: list[Any]) -> CollectionAnalysis:
    """Read the parts of one file in worker processes and merge their analyses, in file order. This
    process reads the first part itself while the workers read the others: one process fewer to start and
    to hold in memory. A process done with its part takes half of what another has left, when the source
    can share its parts (mongoexport files), so none of them waits idle for a slower one."""
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
    # Shared parts reach the workers by inheritance (their state cannot be pickled): forked workers only.
    shared = source.share_parts(name, parts, context) if context.get_start_method() == "fork" else None
    with shared or nullcontext():
        if shared is not None:
            parts = shared.parts
        # Forked workers share the parent's memory until they write to it; freezing the collector keeps its
        # passes from writing to (and so copying) every inherited object.
        gc.freeze()
        workers = min(options.workers, len(parts)) - 1 or 1
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            later = [pool.submit(_analyze_pieces_pickled, (source, name, options, part)) for part in parts[1:]]
            gc.unfreeze()
            pieces = _analyze_pieces((source, name, options, parts[0]))
            payloads = [future.result() for future in later]
    # The workers have exited: their analyses are only unpickled now, so that this process never holds
    # them while the workers still do (the peak memory of the run).
    for payload in payloads:
        pieces += pickle.loads(payload)
    pieces.sort(key=itemgetter(0))
    analysis: CollectionAnalysis | None = None
    for _start, piece in pieces:
        piece = pickle.loads(piece) if type(piece) is bytes else piece
        if analysis is None:
            analysis = piece
        else:
            analysis.merge(piece)
    assert analysis is not None
    return analysis


def analyze_collection(
    source: Source, name: str, options: AnalyzeOptions, progress: ProgressCallback | None = None
) -> CollectionAnalysis:
    parts = source.partitions(name, options.workers) if options.sample_size is None and options.workers > 1 else None
    if parts and len(parts) > 1:
        analysis = _analyze_parts(source, name, options, parts)
        if progress is not None:
            progress(analysis.documents)
        sampling = Sampling(
            "file", None, f"every document, read by {len(parts)} processes", natural_order=True, complete=True
        )
        sampling.documents = analysis.documents
    else:
        stream = source.documents(name, options.sample_size, decoded=False)
        analysis = analyze_stream(name, stream, options, progress)
        sampling = stream.sampling
    analysis.sampling = sampling
    analysis.stats = source.stats(name)
    if sampling.complete:
        analysis.stats.count, analysis.stats.count_exact = analysis.documents, True
    analysis.indexes, index_notes = source.indexes(name)
    analysis.notes.extend(index_notes)
    if analysis.documents == 0:
        analysis.notes.append("the collection is empty: nothing to measure")
    return analysis
