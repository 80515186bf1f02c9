"""Files as MongoDB's tools write them, for tests to read: mongoexport files, mongodump folders and
archives, and the shop dataset (``tests.support.migrations``) as a dump folder."""

from __future__ import annotations

import datetime
import gzip
from pathlib import Path
from typing import Any

import bson
from bson import ObjectId, json_util

from tests.support.migrations import dataset


def write_export(folder: Path, collection: str, documents: list[dict[str, Any]], canonical: bool = False) -> Path:
    """A mongoexport file: one Extended JSON document a line."""
    folder.mkdir(parents=True, exist_ok=True)
    options = json_util.CANONICAL_JSON_OPTIONS if canonical else json_util.RELAXED_JSON_OPTIONS
    path = folder / f"{collection}.json"
    with path.open("w", encoding="utf-8") as handle:
        for document in documents:
            handle.write(json_util.dumps(document, json_options=options) + "\n")
    return path


def write_bson_dump(
    folder: Path, collection: str, documents: list[dict[str, Any]], indexes: list[dict] | None = None
) -> Path:
    """A mongodump file, with its metadata.json when indexes are given."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{collection}.bson"
    with path.open("wb") as handle:
        for document in documents:
            handle.write(bson.encode(document))
    if indexes is not None:
        meta = {"indexes": [{"v": 2, **index} for index in indexes], "uuid": "", "collectionName": collection}
        (folder / f"{collection}.metadata.json").write_text(json_util.dumps(meta), encoding="utf-8")
    return path


def write_archive(
    path: Path,
    collections: dict[tuple[str, str], list[dict[str, Any]]],
    compress: bool = False,
    block: int = 3,
    indexes: dict[tuple[str, str], list[dict]] | None = None,
    views: list[tuple[str, str]] = (),
    timeseries: dict[tuple[str, str], dict[str, Any]] | None = None,
) -> Path:
    """A ``mongodump --archive`` file: magic, prelude, then blocks of ``block`` documents that alternate
    between the collections (as concurrent dumps interleave them), each collection closed by an EOF header.
    A collection of ``timeseries`` (its options) is one of type timeseries: its documents are its buckets,
    in blocks of ``system.buckets.<name>``."""
    timeseries = timeseries or {}
    import struct

    terminator = b"\xff\xff\xff\xff"
    out = [struct.pack("<I", 0x8199E26D)]
    out.append(
        bson.encode(
            {"concurrent_collections": 4, "version": "0.1", "server_version": "7.0.0", "tool_version": "100.9.0"}
        )
    )
    for (db, name), _docs in collections.items():
        meta: dict[str, Any] = {
            "indexes": [{"v": 2, "key": {"_id": 1}, "name": "_id_"}, *((indexes or {}).get((db, name), []))]
        }
        kind = "collection"
        if (db, name) in timeseries:
            meta, kind = {"indexes": [], "options": {"timeseries": timeseries[(db, name)]}}, "timeseries"
        out.append(
            bson.encode({"db": db, "collection": name, "metadata": json_util.dumps(meta), "size": 0, "type": kind})
        )
    for db, name in views:
        out.append(bson.encode({"db": db, "collection": name, "metadata": "{}", "size": 0, "type": "view"}))
    out.append(terminator)
    cursors = {key: 0 for key in collections}
    while cursors:
        for key in list(cursors):
            docs = collections[key]
            start = cursors[key]
            chunk = docs[start : start + block]
            namespace = f"system.buckets.{key[1]}" if key in timeseries else key[1]
            if chunk:
                out.append(bson.encode({"db": key[0], "collection": namespace, "EOF": False, "CRC": 0}))
                out.extend(bson.encode(doc) for doc in chunk)
                out.append(terminator)
                cursors[key] = start + block
            if cursors[key] >= len(docs):
                out.append(bson.encode({"db": key[0], "collection": namespace, "EOF": True, "CRC": 0}))
                out.append(terminator)
                del cursors[key]
    data = b"".join(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def make_dump(folder: Path, fmt: str = "json") -> Path:
    """The shop dataset as a dump folder ``folder/shop`` in one format (json, json.gz or bson)."""
    data = folder / "shop"
    data.mkdir(parents=True)
    for name, docs in dataset().items():
        if fmt == "bson":
            (data / f"{name}.bson").write_bytes(b"".join(bson.encode(d) for d in docs))
        elif fmt == "json.gz":
            with gzip.open(data / f"{name}.json.gz", "wt") as handle:
                handle.writelines(json_util.dumps(d) + "\n" for d in docs)
        else:
            (data / f"{name}.json").write_text("".join(json_util.dumps(d) + "\n" for d in docs))
    (data / "orders.metadata.json").write_text(
        json_util.dumps({"indexes": [{"v": 2, "key": {"_id": 1}, "name": "_id_"}]})
    )
    return data


def files(folder: Path) -> dict[str, bytes]:
    """Every collection file and metadata (not mongopat's own files)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if not p.name.startswith(("mongopat_", "."))}


def big_dump(folder: Path) -> Path:
    """15,000 readings of 20 sensors, one a second, in one mongoexport file; every 997th with 400 tags."""
    data = folder / "iot"
    data.mkdir(parents=True)
    start = datetime.datetime(2026, 1, 1)
    lines = [
        json_util.dumps(
            {
                "_id": ObjectId(f"{i:024x}"),
                "sensor": f"s{i % 20}",
                "ts": start + datetime.timedelta(seconds=i),
                "v": i % 17 * 0.5,
                "tags": list(range(i % 7)) if i % 997 else list(range(400)),
            }
        )
        + "\n"
        for i in range(15_000)
    ]
    (data / "readings.json").write_text("".join(lines))
    return data
