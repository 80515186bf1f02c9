"""``mongopat unpack``: a ``mongodump --archive`` file written out as the dump folder ``mongodump`` would have
written (``<to>/<db>/<collection>.bson`` and ``.metadata.json``), so that the commands that write (``migrate
up``, ``down``, ``rehearse``) can run on data that came as an archive, and ``mongorestore`` restores the
result as it would the archive.

Documents are copied as the archive holds them, byte for byte, in one pass however mongodump interleaved
its collections; each metadata file holds the text the archive's prelude holds. Views are written as their
metadata only (mongodump does the same). Nothing is overwritten: the folder of a database must not exist
yet; the files are written under a temporary name beside it and renamed once complete, so a failure
leaves no half-written dump behind.
"""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mongopat.errors import InputError
from mongopat.sources.archive import all_records, is_archive, read_prelude


@dataclass
class Unpacked:
    database: str
    folder: Path
    collections: dict[str, int]  # name -> documents written
    skipped: list[str]  # collections not written, with why


def unpack_archive(archive: Path, to: Path, database: str | None = None) -> list[Unpacked]:
    """Write the archive's databases (or only ``database``) into ``to``; returns what was written."""
    if not archive.is_file():
        raise InputError(f"archive not found: {archive}")
    if not is_archive(archive):
        raise InputError(f"{archive}: not a mongodump --archive file (plain or gzipped)")
    prelude = read_prelude(archive)
    databases = sorted({c.database for c in prelude})
    if database is not None:
        if database not in databases:
            raise InputError(f"database {database!r} is not in {archive}", hint=f"it holds: {', '.join(databases)}")
        databases = [database]
    for name in databases:
        if (to / name).exists():
            raise InputError(
                f"{to / name} exists already: unpack writes a new folder, never over one",
                hint="give another --to, or remove that folder",
            )
    to.mkdir(parents=True, exist_ok=True)
    staging = to / f".mongopat-unpack-{uuid.uuid4().hex[:8]}"
    results = {name: Unpacked(name, to / name, {}, []) for name in databases}
    handles: dict[tuple[str, str], Any] = {}
    try:
        for collection in prelude:
            result = results.get(collection.database)
            if result is None:
                continue
            folder = staging / collection.database
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{collection.name}.metadata.json").write_text(collection.metadata_text or "{}", encoding="utf-8")
            if collection.kind == "view":
                result.skipped.append(f"{collection.name}: a view (its metadata only, as mongodump writes it)")
        for name, collection, raw in all_records(archive):
            result = results.get(name)
            if result is None:
                continue
            handle = handles.get((name, collection))
            if handle is None:  # every block's documents are kept, under the name the archive gives them
                (staging / name).mkdir(parents=True, exist_ok=True)
                handle = handles[(name, collection)] = (staging / name / f"{collection}.bson").open("wb")
                result.collections.setdefault(collection, 0)
            handle.write(raw)
            result.collections[collection] += 1
        for collection in prelude:  # an empty collection still has its file
            result = results.get(collection.database)
            if (
                result is not None
                and collection.kind != "view"
                and (collection.database, collection.name) not in handles
            ):
                (staging / collection.database / f"{collection.name}.bson").touch()
                result.collections.setdefault(collection.name, 0)
        for (name, collection), _handle in handles.items():
            if collection.startswith("system.buckets."):
                results[name].skipped.append(
                    f"{collection}: a time-series collection's buckets, written as they are (mongopat reads them "
                    "as buckets, not as measurements)"
                )
        for handle in handles.values():
            handle.close()
        handles.clear()
        for name in databases:
            (staging / name).mkdir(parents=True, exist_ok=True)
            (staging / name).rename(to / name)
    finally:
        for handle in handles.values():
            handle.close()
        shutil.rmtree(staging, ignore_errors=True)
    return [results[name] for name in databases]
