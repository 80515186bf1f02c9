"""Analyse one collection: stream its documents once through every accumulator, then summarise."""

from __future__ import annotations

import datetime
import gc
import json
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import bson
from bson import ObjectId, json_util
from bson.errors import BSONError

from mongopat.analysis.schema import (
    ARRAY_LENGTH_BOUNDS,
    MAP_KEY,
    DocumentShape,
    Limits,
    Slot,
    iter_slots,
    walk_document,
)
from mongopat.analysis.shapes import ShapeTracker
from mongopat.analysis.shards import chunks_seen
from mongopat.analysis.sketches import Distribution
from mongopat.analysis.timeline import TimeProfile, date_to_epoch, objectid_epoch
from mongopat.errors import InputError
from mongopat.sources.base import CollectionStats, DocumentStream, IndexInfo, Sampling, Source

MB = 1024 * 1024
SIZE_BOUNDS = (256, 1024, 4096, 16384, 65536, 262144, MB, 4 * MB, 8 * MB, 16 * MB)
# Date fields beyond this many per collection get no insert-rate profile (memory bound).
MAX_DATE_PROFILES = 10


@dataclass
class AnalyzeOptions:
    """Knobs of ``mongopat analyze``; the defaults are documented in the README."""

    sample_size: int | None = None  # None: the source's default ($sample 1000 on a server, whole file on a dump)
    distinct_limit: int = 10_000
    low_cardinality: int = 20
    top_values: int = 10
    flush_every: int = 1000
    # ... or sooner, once the documents walked since the last flush hold this many bytes: the values wait in
    # per-field buffers until then, so large documents must not wait a thousand at a time.
    flush_bytes: int = 8 * 2**20
    # Keep the first document read, as relaxed Extended JSON, in the report (``--show-values``): it holds
    # real values, so it is off by default.
    keep_example: bool = False
    # Read every document of a server's collections instead of sampling (analyze --full-scan).
    full_scan: bool = False
    # Processes reading one large dump file in parallel (byte ranges, merged afterwards); 1 disables.
    workers: int = field(default_factory=lambda: min(4, os.cpu_count() or 1))


ProgressCallback = Callable[[int], None]


class CollectionAnalysis:
    """Accumulates the evidence for one collection as documents stream by."""

    def __init__(self, name: str, options: AnalyzeOptions, natural_order: bool = False) -> None:
        self.name = name
        self.options = options
        self.limits = Limits(options.distinct_limit, options.top_values, options.low_cardinality)
        self.root = DocumentShape("", 0, False, self.limits, self._on_dates)
        self.sizes = Distribution()
        self._size_buffer: list[int] = []
        self._buffered_bytes = 0
        self._id_epochs: list[int] = []
        self.id_profile = TimeProfile("_id", "objectId")
        self.date_profiles: dict[str, TimeProfile] = {}
        self.shapes = ShapeTracker()
        self.natural_order = natural_order
        self.documents = 0
        self.stats = CollectionStats()
        self.indexes: list[IndexInfo] = []
        self.sampling: Sampling | None = None
        self.notes: list[str] = []
        self.references: list[dict[str, Any]] = []  # filled by analysis.references across collections
        self.example: Any = None

    def _on_dates(self, path: str, dates: list[datetime.datetime]) -> None:
        profile = self.date_profiles.get(path)
        if profile is None:
            if len(self.date_profiles) >= MAX_DATE_PROFILES:
                return
            profile = self.date_profiles[path] = TimeProfile(path, "date")
        profile.add_many([date_to_epoch(d) for d in dates])

    def add(self, document: dict[str, Any], size: int | None) -> None:
        walk_document(self.root, document)
        if size is None:  # straight from Extended JSON: the walk has just decoded it
            try:
                size = len(bson.encode(document))
            except (BSONError, OverflowError, TypeError, ValueError) as exc:
                raise InputError(
                    f"{self.name}: document #{self.documents + 1} cannot be stored as BSON: {exc}"
                ) from None
        self._size_buffer.append(size)
        self._buffered_bytes += size
        if self.options.keep_example and self.example is None:
            self.example = plain_value(document)
        identifier = document.get("_id")
        if type(identifier) is ObjectId:
            when: float | None = objectid_epoch(identifier)
            self._id_epochs.append(when)  # type: ignore[arg-type]
            self.shapes.clock = "_id"
        elif self.natural_order:
            when = self.documents
            self.shapes.clock = self.shapes.clock or "position"
        else:
            when = None
        if when is not None:
            self.shapes.add(frozenset(document), when)
        self.documents += 1
        if self.documents % self.options.flush_every == 0 or self._buffered_bytes >= self.options.flush_bytes:
            self.flush()

    def flush(self) -> None:
        self._buffered_bytes = 0
        self.root.flush()
        self.sizes.add_many(self._size_buffer)
        self._size_buffer = []
        self.id_profile.add_many(self._id_epochs)  # type: ignore[arg-type]
        self._id_epochs = []

    def merge(self, other: CollectionAnalysis) -> None:
        """Fold in the analysis of the next part of the same collection (parallel reading)."""
        self.flush()
        other.flush()
        self.root.merge(other.root)
        self.sizes.merge(other.sizes)
        self.id_profile.merge(other.id_profile)
        for path, profile in other.date_profiles.items():
            if path in self.date_profiles:
                self.date_profiles[path].merge(profile)
            elif len(self.date_profiles) < MAX_DATE_PROFILES:
                self.date_profiles[path] = profile
        self.shapes.merge(other.shapes, offset=self.documents)
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
            estimate = distinct.estimate()
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
            "drift": self.shapes.to_dict(),
            "references": self.references,
            "indexes": [index.to_dict() for index in self.indexes],
            "notes": self.stats.notes + self.notes,
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


def plain_value(value: Any) -> Any:
    """A JSON-safe rendering of a BSON value (relaxed Extended JSON for non-JSON types)."""
    if value is None or type(value) in (str, int, bool):
        return value
    if type(value) is float:
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    return json.loads(json_util.dumps(value, json_options=json_util.RELAXED_JSON_OPTIONS))


def analyze_stream(
    name: str, stream: DocumentStream, options: AnalyzeOptions, progress: ProgressCallback | None = None
) -> CollectionAnalysis:
    analysis = CollectionAnalysis(name, options, natural_order=stream.sampling.natural_order)
    every = options.flush_every
    for document, size in stream:
        analysis.add(document, size)
        if progress is not None and analysis.documents % every == 0:
            progress(analysis.documents)
    analysis.flush()
    if progress is not None:
        progress(analysis.documents)
    return analysis


def _analyze_part(job: tuple[Source, str, AnalyzeOptions, Any]) -> CollectionAnalysis:
    source, name, options, part = job
    return analyze_stream(name, source.documents(name, None, decoded=False, part=part), options)


def _analyze_parts(source: Source, name: str, options: AnalyzeOptions, parts: list[Any]) -> CollectionAnalysis:
    """Read the parts of one file in worker processes and merge their analyses, in file order. This
    process reads the first part itself while the workers read the others: one process fewer to start and
    to hold in memory, and none of them waits idle."""
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
    # Forked workers share the parent's memory until they write to it; freezing the collector keeps its
    # passes from writing to (and so copying) every inherited object.
    gc.freeze()
    with ProcessPoolExecutor(max_workers=min(options.workers, len(parts)) - 1 or 1, mp_context=context) as pool:
        later = [pool.submit(_analyze_part, (source, name, options, part)) for part in parts[1:]]
        gc.unfreeze()
        analysis = _analyze_part((source, name, options, parts[0]))
        results = [future.result() for future in later]
    for result in results:
        analysis.merge(result)
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
