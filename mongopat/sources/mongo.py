"""A live deployment through pymongo (standalone, replica set, mongos, Atlas), or mongomock in process.

Reads are gentle by default: ``secondaryPreferred``, ``maxTimeMS`` on every command, small batches,
and ``$sample`` rather than a scan on collections larger than the sample.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

import bson
import pymongo
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument
from pymongo import ReadPreference
from pymongo.errors import (
    ConfigurationError,
    ExecutionTimeout,
    InvalidURI,
    OperationFailure,
    PyMongoError,
    ServerSelectionTimeoutError,
)

from mongopat.errors import InputError, MongopatError, SourceError
from mongopat.redact import redact_uri, scrub
from mongopat.sources.base import (
    DEFAULT_MAX_TIME_MS,
    DEFAULT_TIMEOUT_MS,
    CollectionStats,
    DocumentStream,
    IndexInfo,
    Sampling,
    Source,
)
from mongopat.sources.dump import index_from_spec
from mongopat.timeseries.options import TimeSeriesOptions

DEFAULT_SAMPLE_SIZE = 1000
READ_PREFERENCES = {
    "primary": ReadPreference.PRIMARY,
    "primaryPreferred": ReadPreference.PRIMARY_PREFERRED,
    "secondary": ReadPreference.SECONDARY,
    "secondaryPreferred": ReadPreference.SECONDARY_PREFERRED,
    "nearest": ReadPreference.NEAREST,
}
UNAUTHORIZED = 13
AUTH_FAILED = 18

# mongomock:// URIs name an in-process server: the same name gives the same data within a process.
_MOCK_SERVERS: dict[str, Any] = {}
_MOCK_LOCK = threading.Lock()


def mongomock_client(name: str = "localhost") -> Any:
    """The in-process mongomock client behind ``mongomock://<name>/...`` (created on first use)."""
    try:
        import mongomock
    except ImportError:  # pragma: no cover - a dependency of mongopat; missing only from a broken install
        raise InputError("the embedded engine needs the mongomock package: pip install mongomock") from None
    with _MOCK_LOCK:
        _accept_current_bulk_operations()
        if name not in _MOCK_SERVERS:
            _MOCK_SERVERS[name] = mongomock.MongoClient()
        return _MOCK_SERVERS[name]


def _accept_current_bulk_operations() -> None:
    """mongomock 4.3 predates the ``sort`` argument current pymongo passes for ReplaceOne/UpdateOne in
    ``bulk_write`` and fails with a TypeError. Accept it (unsorted, which is all mongopat sends) rather
    than pin pymongo back. Only the in-process test double is touched, never a real client."""
    from mongomock import collection as mock_collection

    builder = mock_collection.BulkOperationBuilder
    for name in ("add_replace", "add_update"):
        original = getattr(builder, name)
        if getattr(original, "_mongopat_accepts_sort", False):
            continue

        def accepting(self, *args, _original=original, sort=None, **kwargs):
            if sort is not None:
                raise NotImplementedError("mongomock cannot sort inside bulk updates")
            return _original(self, *args, **kwargs)

        accepting._mongopat_accepts_sort = True  # type: ignore[attr-defined]
        setattr(builder, name, accepting)


def describe_error(exc: PyMongoError, uri: str | None) -> MongopatError:
    """Turn a driver error into one line a user can act on, with no credentials in it."""
    text = scrub(str(exc).split(", full error:")[0], uri)
    where = redact_uri(uri) if uri else "the server"
    if isinstance(exc, ServerSelectionTimeoutError):
        return SourceError(
            f"cannot reach MongoDB at {where}: {text.split(', Timeout:')[0]}",
            hint="check the host, port, network and TLS settings; --timeout-ms sets how long to wait",
        )
    if isinstance(exc, (InvalidURI, ConfigurationError)):
        return InputError(f"invalid MongoDB URI {where}: {text}")
    if isinstance(exc, ExecutionTimeout):
        return SourceError(f"the server stopped a command after --max-time-ms: {text}")
    if isinstance(exc, OperationFailure):
        if exc.code == AUTH_FAILED:
            return SourceError(f"authentication failed at {where}", hint="check the user name, password and authSource")
        if exc.code == UNAUTHORIZED:
            return SourceError(
                f"not authorized: {text}",
                hint="mongopat analyze needs the 'read' role on the database (and clusterMonitor for index stats)",
            )
        return SourceError(f"MongoDB refused a command: {text}")
    return SourceError(f"MongoDB error: {text}")


class MongoSource(Source):
    def __init__(
        self,
        uri: str,
        database: str | None = None,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        max_time_ms: int = DEFAULT_MAX_TIME_MS,
        read_preference: str = "secondaryPreferred",
        client: Any = None,
    ) -> None:
        self.uri = uri
        self.location = redact_uri(uri)
        self.max_time_ms = max_time_ms
        # A collection scan on a large collection only when asked (analyze --full-scan).
        self.full_scan = False
        if read_preference not in READ_PREFERENCES:
            raise InputError(
                f"unknown read preference {read_preference!r}", hint=f"one of {', '.join(READ_PREFERENCES)}"
            )
        self._owns_client = client is None
        if uri.startswith("mongomock://"):
            self.kind = "mongomock"
            rest = uri[len("mongomock://") :]
            host, _, path = rest.partition("/")
            self.client = client or mongomock_client(host or "localhost")
            self._owns_client = False
            uri_database = path.split("?")[0] or None
        elif uri.startswith(("mongodb://", "mongodb+srv://")):
            self.kind = "mongodb"
            try:
                uri_database = pymongo.uri_parser.parse_uri(uri, connect_timeout=timeout_ms / 1000).get("database")
            except (InvalidURI, ConfigurationError, ValueError) as exc:
                raise InputError(f"invalid MongoDB URI {self.location}: {scrub(str(exc), uri)}") from None
            except (OSError, socket.gaierror) as exc:
                raise SourceError(f"cannot resolve {self.location}: {exc}") from None
            if client is None:
                try:
                    client = pymongo.MongoClient(
                        uri,
                        serverSelectionTimeoutMS=timeout_ms,
                        connectTimeoutMS=timeout_ms,
                        appname="mongopat",
                    )
                except PyMongoError as exc:
                    raise describe_error(exc, uri) from None
            self.client = client
        else:
            raise InputError(
                f"unsupported URI {self.location}",
                hint="use mongodb://, mongodb+srv:// (or mongomock:// for an in-process test database)",
            )
        name = database or uri_database
        if not name:
            raise InputError("no database given", hint="pass --db NAME or put the database in the URI path")
        self.database = name
        self._raw = True
        try:
            if self.kind == "mongodb":
                self.client.admin.command("ping")
            self.db = self.client.get_database(name, read_preference=READ_PREFERENCES[read_preference])
        except PyMongoError as exc:
            raise describe_error(exc, uri) from None

    def collection_info(self, name: str) -> dict[str, Any]:
        """What plan-time safety checks need: the collection's validator and shard key (when readable)."""
        info: dict[str, Any] = {"validator": None, "options": {}, "shard_key": self._shard_key(name)}
        try:
            for entry in self.db.list_collections(filter={"name": name}):
                info["options"] = entry.get("options") or {}
                info["validator"] = info["options"].get("validator")
        except (PyMongoError, NotImplementedError, TypeError):
            pass  # not permitted, or mongomock (no list_collections): no validator known
        return info

    def validator_violations(self, name: str) -> dict[str, Any] | None:
        """Documents of ``name`` its current validator rejects, with its level and action; None without one."""
        options = self.collection_info(name)["options"]
        validator = options.get("validator")
        if not validator:
            return None
        documents = self.db[name].count_documents({"$nor": [validator]}, maxTimeMS=self.max_time_ms)
        return {
            "documents": documents,
            "level": options.get("validationLevel", "strict"),
            "action": options.get("validationAction", "error"),
        }

    def writable_db(self) -> Any:
        """The database for migrations: reads from the primary, writes acknowledged by a majority (a run's
        own write concern is set by :func:`mongopat.api.runner`)."""
        if self.kind == "mongomock":
            return self.client.get_database(self.database)
        from pymongo import WriteConcern

        return self.client.get_database(
            self.database, read_preference=ReadPreference.PRIMARY, write_concern=WriteConcern("majority")
        )

    def close(self) -> None:
        if self._owns_client:
            self.client.close()

    def _guard(self, exc: PyMongoError) -> MongopatError:
        return describe_error(exc, self.uri)

    def collections(self) -> list[str]:
        try:
            try:
                # Time-series collections are of their own type (5.0+): their measurements are analysed.
                names = self.db.list_collection_names(filter={"type": {"$in": ["collection", "timeseries"]}})
            except (NotImplementedError, TypeError):  # mongomock: no filter support
                names = self.db.list_collection_names()
        except PyMongoError as exc:
            raise self._guard(exc) from None
        return sorted(n for n in names if not n.startswith(("system.", "mongopat_")))

    def stats(self, name: str) -> CollectionStats:
        stats = CollectionStats()
        collection = self.db[name]
        try:
            stats.count = collection.estimated_document_count(maxTimeMS=self.max_time_ms)
        except PyMongoError as exc:
            raise self._guard(exc) from None
        except TypeError:  # mongomock does not take maxTimeMS
            stats.count = collection.estimated_document_count()
        options = self._timeseries_options(name)
        if options is not None:
            stats.timeseries = {
                "options": options.create_options(),
                "expire_after_seconds": options.expire_after_seconds,
            }
            stats.notes.append(
                f"time-series collection ({', '.join(f'{k} {v}' for k, v in options.create_options().items())}): "
                "its measurements are analysed as the application reads them"
            )
        if self.kind == "mongomock":
            stats.count_exact = True
            stats.notes.append("mongomock reports no storage statistics")
            return stats
        try:
            raw = self.db.command("collStats", name, maxTimeMS=self.max_time_ms)
        except OperationFailure as exc:
            reason = (exc.details or {}).get("errmsg", str(exc))
            stats.notes.append(f"collStats not available: {scrub(reason, self.uri)}")
            return stats
        except PyMongoError as exc:
            raise self._guard(exc) from None
        if stats.timeseries is not None:
            stats.timeseries.update(_bucket_statistics(raw.get("timeseries")))
        stats.size_bytes = raw.get("size")
        stats.storage_bytes = raw.get("storageSize")
        stats.avg_document_bytes = raw.get("avgObjSize")
        stats.index_bytes = raw.get("totalIndexSize")
        stats.sharded = bool(raw.get("sharded"))
        if stats.sharded:
            stats.shard_key = self._shard_key(name)
            stats.shards = {shard: int(info.get("count", 0)) for shard, info in (raw.get("shards") or {}).items()}
            stats.chunks = self._chunks(name)
        return stats

    def _timeseries_options(self, name: str) -> TimeSeriesOptions | None:
        try:
            for entry in self.db.list_collections(filter={"name": name}):
                return TimeSeriesOptions.from_collection(dict(entry.get("options") or {}))
        except (PyMongoError, NotImplementedError, TypeError):
            return None
        return None

    def _config_entry(self, name: str) -> dict[str, Any] | None:
        try:
            return self.client["config"]["collections"].find_one(
                {"_id": f"{self.database}.{name}"}, {"key": 1, "uuid": 1}, max_time_ms=self.max_time_ms
            )
        except (PyMongoError, TypeError):
            return None

    def _shard_key(self, name: str) -> dict[str, Any] | None:
        entry = self._config_entry(name)
        return dict(entry["key"]) if entry and "key" in entry else None

    def _chunks(self, name: str, limit: int = 100_000) -> list[dict[str, Any]]:
        """Chunk ranges and their shards (by collection uuid on 5.0+, by namespace before)."""
        entry = self._config_entry(name) or {}
        query = {"uuid": entry["uuid"]} if entry.get("uuid") is not None else {"ns": f"{self.database}.{name}"}
        try:
            return list(self.client["config"]["chunks"].find(query, {"min": 1, "max": 1, "shard": 1}, limit=limit))
        except (PyMongoError, TypeError):
            return []

    def indexes(self, name: str) -> tuple[list[IndexInfo], list[str]]:
        notes: list[str] = []
        collection = self.db[name]
        try:
            indexes = [index_from_spec(dict(spec)) for spec in collection.list_indexes()]
        except PyMongoError as exc:
            raise self._guard(exc) from None
        try:
            usage = {
                entry["name"]: entry.get("accesses", {})
                for entry in collection.aggregate([{"$indexStats": {}}], maxTimeMS=self.max_time_ms)
            }
        except NotImplementedError:
            notes.append("index usage unavailable: the in-process mongomock has no $indexStats")
            usage = {}
        except OperationFailure as exc:
            reason = (
                "not authorized (needs the indexStats action, e.g. role clusterMonitor)"
                if exc.code == UNAUTHORIZED
                else scrub(str(exc), self.uri)
            )
            notes.append(f"index usage unavailable: {reason}")
            usage = {}
        except PyMongoError as exc:
            raise self._guard(exc) from None
        for index in indexes:
            accesses = usage.get(index.name)
            if accesses:
                index.usage_ops = int(accesses.get("ops", 0))
                since = accesses.get("since")
                index.usage_since = since.strftime("%Y-%m-%dT%H:%M:%SZ") if since is not None else None
        return indexes, notes

    def documents(self, name: str, sample_size: int | None, decoded: bool = True, part: Any = None) -> DocumentStream:
        size = sample_size or DEFAULT_SAMPLE_SIZE
        collection = self.db[name]
        try:
            estimated = collection.estimated_document_count()
        except PyMongoError as exc:
            raise self._guard(exc) from None
        if self.full_scan:
            sampling = Sampling("scan", None, "every document (--full-scan)", natural_order=True, complete=True)
            return DocumentStream(
                sampling,
                self._iterate(name, lambda c: c.find({}, batch_size=500, max_time_ms=self.max_time_ms)),
            )
        if estimated <= size:
            sampling = Sampling(
                "scan",
                size,
                "every document (collection not larger than the sample)",
                natural_order=True,
                complete=True,
            )
            return DocumentStream(
                sampling,
                self._iterate(name, lambda c: c.find({}, batch_size=500, max_time_ms=self.max_time_ms)),
            )
        sampling = Sampling("$sample", size, f"$sample of {size} documents")
        pipeline = [{"$sample": {"size": size}}]
        return DocumentStream(
            sampling,
            self._iterate(
                name,
                lambda c: c.aggregate(pipeline, batchSize=500, maxTimeMS=self.max_time_ms),
                fallback=lambda c: c.find({}, batch_size=500, max_time_ms=self.max_time_ms).limit(size),
                sampling=sampling,
            ),
        )

    def _iterate(self, name: str, open_cursor, fallback=None, sampling: Sampling | None = None):
        collection = self.db[name]
        if self._raw:
            try:
                collection = collection.with_options(codec_options=CodecOptions(document_class=RawBSONDocument))
            except NotImplementedError:  # mongomock decodes into dicts only
                self._raw = False
        try:
            try:
                cursor = open_cursor(collection)
            except OperationFailure as exc:
                if fallback is None or exc.code == UNAUTHORIZED:
                    raise
                cursor = fallback(collection)
                if sampling is not None:
                    sampling.method, sampling.note = (
                        "scan",
                        f"first {sampling.requested} documents ($sample refused: {exc.code})",
                    )
            except NotImplementedError:
                if fallback is None:
                    raise
                cursor = fallback(collection)
            for document in cursor:
                if isinstance(document, RawBSONDocument):
                    raw = document.raw
                    yield bson.decode(raw), len(raw)
                else:
                    yield document, len(bson.encode(document))
        except PyMongoError as exc:
            raise self._guard(exc) from None

    def count_existing_ids(self, name: str, values: list[Any]) -> int | None:
        try:
            return self.db[name].count_documents({"_id": {"$in": values}}, maxTimeMS=self.max_time_ms)
        except TypeError:
            return self.db[name].count_documents({"_id": {"$in": values}})
        except PyMongoError:
            return None


def _bucket_statistics(raw: Any) -> dict[str, Any]:
    """What collStats says of a time-series collection's buckets (its ``timeseries`` section, 5.0+); a
    server that keeps no buckets of its own says nothing."""
    if not isinstance(raw, dict):
        return {"buckets": None, "note": "the server reports no bucket statistics (no timeseries in collStats)"}
    keys = {
        "bucketCount": "buckets",
        "avgBucketSize": "average_bucket_bytes",
        "avgNumMeasurementsPerCommit": "measurements_per_commit",
        "numBucketsClosedDueToCount": "closed_full_count",
        "numBucketsClosedDueToSize": "closed_full_size",
        "numBucketsClosedDueToTimeForward": "closed_time_forward",
        "numBucketsClosedDueToTimeBackward": "closed_time_backward",
        "numCompressedBuckets": "compressed_buckets",
    }
    return {mine: raw.get(theirs) for theirs, mine in keys.items() if theirs in raw}
