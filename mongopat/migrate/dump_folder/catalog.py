"""The catalog of a dump folder: a collection is a file, its indexes and options are its
``<name>.metadata.json`` (as mongodump writes it), and every change is written to a temporary file
first and renamed over the old one."""

from __future__ import annotations

import datetime
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import bson
from bson import json_util

from mongopat.errors import OperationFailed
from mongopat.json_schema import satisfies
from mongopat.migrate.catalog import Catalog, index_name
from mongopat.migrate.contracts import StepState
from mongopat.migrate.transform_api import hashable_key as _key
from mongopat.timeseries.buckets import BUCKETS_PREFIX, pack
from mongopat.timeseries.options import TimeSeriesOptions
from mongopat.timeseries.sync import Change, Digest, reading_hash
from mongopat.timeseries.unwind import Readings

if TYPE_CHECKING:
    from mongopat.migrate.dump_folder.files import DumpFolder, FileChangelog

DEFAULT_VALIDATION = {"validationLevel": "strict", "validationAction": "error"}
DEFAULT_INDEXES = [{"v": 2, "key": {"_id": 1}, "name": "_id_"}]


def write_durably(path: Path, temporary: Path, data: bytes) -> None:
    """``data`` as the content of ``path``, flushed to disk under ``temporary`` and renamed over it."""
    with temporary.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    temporary.replace(path)


class DumpFolderCatalog(Catalog):
    INDEXES_KEPT_IN = " from its metadata"  # where mongorestore finds them

    def __init__(
        self,
        files: DumpFolder,
        changelog: FileChangelog,
        migration_id: str,
        index: int,
        collection: str,
        state: StepState,
    ) -> None:
        super().__init__(state.get("stats"))
        self.folder, self.files, self.changelog = files.folder, files, changelog
        self.migration_id, self.index, self.collection = migration_id, index, collection

    def _save(self) -> None:
        self.changelog.step(self.migration_id, self.index, stats=self.stats)

    # -- metadata ---------------------------------------------------------------------------------

    def _metadata_path(self, collection: str) -> Path:
        return self.folder / f"{collection}.metadata.json"

    def _metadata(self, collection: str) -> dict[str, Any]:
        path = self._metadata_path(collection)
        if not path.exists():
            return {"indexes": [dict(spec) for spec in DEFAULT_INDEXES]}
        try:
            data = json_util.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise OperationFailed(f"{path}: not a mongodump metadata file: {exc}") from None
        if not isinstance(data, dict):
            raise OperationFailed(f"{path}: not a mongodump metadata file (not a JSON object)")
        return data

    def _write_metadata(self, collection: str, data: dict[str, Any]) -> None:
        path = self._metadata_path(collection)
        # The file as it was, once, before the step's first change: down gives these bytes back. The step's
        # own collection's under metadata_before, the others' (collections a document step creates) by name.
        before = path.read_text(encoding="utf-8") if path.exists() else None
        if collection == self.collection:
            if "metadata_before" not in self.stats:
                self.record(metadata_before=before)
        elif collection not in (others := dict(self.stats.get("metadata_before_of") or {})):
            self.record(metadata_before_of={**others, collection: before})
        write_durably(path, self.files.temp_path(path.name), json_util.dumps(data).encode())

    def reverted(self) -> None:
        # Once the step is undone, the metadata says again what it said: the file's own bytes come back
        # (mongodump's formatting and key order), or it goes when the step had made it.
        for collection, before in (self.stats.get("metadata_before_of") or {}).items():
            # A collection the step created and down removed: its metadata goes with it, or comes back.
            path = self._metadata_path(collection)
            if before is None:
                path.unlink(missing_ok=True)
            else:
                write_durably(path, self.files.temp_path(path.name), before.encode("utf-8"))
        if "metadata_before" not in self.stats:
            return
        path, before = self._metadata_path(self.collection), self.stats["metadata_before"]
        if not path.exists():
            return
        now = _comparable(self._metadata(self.collection))
        if before is None:
            if now == _comparable({"indexes": DEFAULT_INDEXES}):
                path.unlink()
        elif now == _comparable(json_util.loads(before)):
            write_durably(path, self.files.temp_path(path.name), before.encode("utf-8"))

    # -- the protocol -----------------------------------------------------------------------------

    def names(self) -> set[str]:
        found = set()
        for name in _collection_names(self.folder):
            if name.startswith(BUCKETS_PREFIX):
                name = name[len(BUCKETS_PREFIX) :]  # a time-series collection: its buckets' file
            found.add(name)
        return found

    def count(self, collection: str) -> int:
        return self.files.count(collection)

    def indexes(self, collection: str) -> list[dict[str, Any]]:
        return list(self._metadata(collection).get("indexes") or [])

    def create_index(self, collection: str, spec: dict[str, Any]) -> str:
        data = self._metadata(collection)
        indexes = data.setdefault("indexes", [])
        name = spec.get("name") or index_name(dict(spec["key"]))
        if not any(i.get("name") == name for i in indexes):
            indexes.append({"v": 2, **spec, "name": name})
            self._write_metadata(collection, data)
        return name

    def drop_index(self, collection: str, name: str) -> None:
        data = self._metadata(collection)
        kept = [i for i in data.get("indexes") or [] if i.get("name") != name]
        if len(kept) != len(data.get("indexes") or []):
            data["indexes"] = kept
            self._write_metadata(collection, data)

    def rename(self, collection: str, to: str) -> None:
        suffix = self.files.suffix_like(collection)
        (self.folder / f"{collection}{suffix}").rename(self.folder / f"{to}{suffix}")
        meta = self._metadata_path(collection)
        if meta.exists():
            meta.rename(self._metadata_path(to))

    def drop(self, collection: str) -> None:
        path = self.files.file_of(collection)
        if path is not None:
            path.unlink()
        self._metadata_path(collection).unlink(missing_ok=True)

    def copy(self, collection: str, to: str) -> None:
        # The bytes as they are, through a temporary file: a crash leaves no half copy under the name.
        source = self.files.file_of(collection)
        if source is None:
            raise OperationFailed(f"collection {collection!r} not found in {self.folder}")
        suffix = self.files.suffix_like(collection)
        temporary = self.files.temp_path(f"{to}{suffix}")
        with source.open("rb") as reader, temporary.open("wb") as writer:
            shutil.copyfileobj(reader, writer, 1 << 20)
            writer.flush()
            os.fsync(writer.fileno())
        temporary.replace(self.folder / f"{to}{suffix}")
        copied = self.files.count(to)
        self.read, self.written = copied, copied

    def options(self, collection: str) -> dict[str, Any]:
        return dict(self._metadata(collection).get("options") or {})

    def set_validation(self, collection: str, validator: dict[str, Any], level: str, action: str) -> None:
        data = self._metadata(collection)
        options = {
            k: v for k, v in dict(data.get("options") or {}).items()
            if k not in ("validator", "validationLevel", "validationAction")
        }  # fmt: skip
        if validator:
            options.update({"validator": validator, "validationLevel": level, "validationAction": action})
        else:  # no validator: only a level or action other than MongoDB's defaults says anything
            options.update(
                {
                    k: v
                    for k, v in (("validationLevel", level), ("validationAction", action))
                    if v != DEFAULT_VALIDATION[k]
                }
            )
        data["options"] = options
        self._write_metadata(collection, data)

    # -- time-series collections: as mongodump writes them, ``system.buckets.<name>.bson`` (the buckets)
    # beside ``<name>.metadata.json`` (type ``timeseries`` and the options), which mongorestore restores by
    # creating the collection with those options and inserting the buckets as they are.

    def create_timeseries(self, name: str, options: TimeSeriesOptions) -> None:
        extra = {} if options.expire_after_seconds is None else {"expireAfterSeconds": options.expire_after_seconds}
        metadata = {
            "indexes": [],
            "collectionName": name,
            "type": "timeseries",
            "options": {"timeseries": options.create_options(), **extra},
        }
        self._write_metadata(name, metadata)

    def copy_measurements(
        self, collection: str, to: str, options: TimeSeriesOptions, source: Readings
    ) -> Digest | None:
        # One pass, written under a temporary name and renamed: a crash leaves no half file, and a run
        # again writes the same buckets (their _ids come from what they hold). Nothing writes a dump folder
        # meanwhile, so the buckets hold exactly the dated documents: their digest is returned.
        from mongopat.migrate.dump_folder.files import count_records

        if self.files.file_of(collection) is None:
            raise OperationFailed(f"collection {collection!r} not found in {self.folder}")
        refused, digest = 0, Digest()

        def dated() -> Iterator[dict[str, Any]]:
            nonlocal refused
            for document in self.files.read(collection):
                self.read += 1
                refused += source.refused(document)
                for reading in source.of(document):
                    digest.add(reading_hash(reading))
                    self.written += 1
                    yield reading

        final = self.folder / f"{BUCKETS_PREFIX}{to}.bson"
        temporary = self.files.temp_path(final.name)
        with temporary.open("wb") as handle:
            for bucket in pack(dated(), options):
                handle.write(bson.encode(bucket))
            handle.flush()
            os.fsync(handle.fileno())
        temporary.replace(final)
        self.record(buckets=count_records(final))
        return digest

    def readings(self, collection: str, time_field: str | None) -> Iterator[dict[str, Any]]:
        for document in self.files.read(collection):
            if time_field is None or isinstance(document.get(time_field), datetime.datetime):
                yield document

    def undated(self, collection: str, time_field: str) -> int:
        return sum(1 for d in self.files.read(collection) if not isinstance(d.get(time_field), datetime.datetime))

    def write_readings(self, to: str, changes: Iterable[Change]) -> None:
        raise OperationFailed(f"{to}: a dump folder's time-series collection is written whole, by copy_measurements")

    def documents(self, collection: str, ids: list[Any]) -> list[dict[str, Any]]:
        wanted = {_key(i) for i in ids}
        return [d for d in self.files.read(collection) if _key(d.get("_id")) in wanted]

    def write_source(self, collection: str, changes: Iterable[Change], expected: Callable[[Any], int | None]) -> int:
        """The collection's file written again: documents changed in the time-series copy in its version,
        those it no longer holds left out, the readings only it holds added at the end."""
        from mongopat.migrate.dump_folder.files import DocumentWriter

        wanted: dict[Any, Change] = {}
        added: list[Any] = []
        for each in changes:
            if each.kind == "missing":
                added.append(each.document)
            else:
                wanted[_key(each.id)] = each
        path = self.files.file_of(collection)
        suffix = self.files.suffix_like(collection) if path is not None else ".bson"
        temporary = self.files.temp_path(f"{collection}{suffix}")
        writer = DocumentWriter(temporary, suffix, self.files.canonical(collection))
        try:
            for document in self.files.read(collection):
                change = wanted.get(_key(document.get("_id")))
                if change is None:
                    writer.write(document)
                elif change.kind == "differs" and change.document is not None:
                    writer.write(change.document)
                    self.written += 1
                # an extra: the time-series copy no longer holds it, so neither does the collection
            for document in added:
                writer.write(document)
                self.written += 1
        finally:
            writer.close()
        temporary.replace(self.folder / f"{collection}{suffix}")
        return 0

    def drop_timeseries(self, name: str) -> None:
        (self.folder / f"{BUCKETS_PREFIX}{name}.bson").unlink(missing_ok=True)
        self._metadata_path(name).unlink(missing_ok=True)

    def violations(self, collection: str, validator: dict[str, Any]) -> int | None:
        if not validator:
            return 0
        try:
            return sum(1 for document in self.files.read(collection) if not satisfies(document, validator))
        except NotImplementedError:
            return None  # a query operator the embedded engine does not evaluate


def _comparable(metadata: dict[str, Any]) -> dict[str, Any]:
    """Metadata without what carries no meaning: empty options, and the order of the indexes (an index
    dropped and created again by ``down`` comes back last; mongorestore builds the same indexes)."""
    found = {k: v for k, v in metadata.items() if not (k == "options" and not v)}
    if isinstance(found.get("indexes"), list):
        found["indexes"] = sorted(found["indexes"], key=lambda spec: json_util.dumps(spec, sort_keys=True))
    return found


def _collection_names(folder: Path) -> set[str]:
    from mongopat.sources.dump import BSON_SUFFIXES, JSON_SUFFIXES

    names = set()
    for path in folder.iterdir():
        for suffix in BSON_SUFFIXES + JSON_SUFFIXES:
            if path.name.endswith(suffix) and not path.name.startswith((".", "mongopat_")):
                names.add(path.name[: -len(suffix)])
    return names
