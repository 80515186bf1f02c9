"""Shared fixtures. Every test that touches a database takes its client from ``mongo``: mongomock in
process by default, a real server when MONGOPAT_TEST_URI is set (e.g. mongodb://localhost:27017)."""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bson
import pytest
from bson import json_util

REAL_SERVER_URI = os.environ.get("MONGOPAT_TEST_URI")


@dataclass
class MongoTarget:
    client: Any
    uri: str
    db_name: str
    real: bool

    @property
    def db(self) -> Any:
        return self.client[self.db_name]

    def cli_args(self) -> list[str]:
        return ["--uri", self.uri, "--db", self.db_name]


@pytest.fixture
def mongo() -> Any:
    name = f"mongopat_test_{uuid.uuid4().hex[:10]}"
    if REAL_SERVER_URI:
        import pymongo

        client = pymongo.MongoClient(REAL_SERVER_URI, serverSelectionTimeoutMS=5000)
        target = MongoTarget(client, REAL_SERVER_URI, name, real=True)
    else:
        from mongopat.sources.mongo import mongomock_client

        client = mongomock_client("tests")
        target = MongoTarget(client, "mongomock://tests", name, real=False)
    yield target
    client.drop_database(name)
    if REAL_SERVER_URI:
        client.close()


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


def load_json(text: str) -> Any:
    return json.loads(text)


def write_archive(
    path: Path,
    collections: dict[tuple[str, str], list[dict[str, Any]]],
    compress: bool = False,
    block: int = 3,
    indexes: dict[tuple[str, str], list[dict]] | None = None,
    views: list[tuple[str, str]] = (),
) -> Path:
    """A ``mongodump --archive`` file: magic, prelude, then blocks of ``block`` documents that alternate
    between the collections (as concurrent dumps interleave them), each collection closed by an EOF header."""
    import gzip as gzip_module
    import struct

    terminator = b"\xff\xff\xff\xff"
    out = [struct.pack("<I", 0x8199E26D)]
    out.append(
        bson.encode(
            {"concurrent_collections": 4, "version": "0.1", "server_version": "7.0.0", "tool_version": "100.9.0"}
        )
    )
    for (db, name), _docs in collections.items():
        meta = {"indexes": [{"v": 2, "key": {"_id": 1}, "name": "_id_"}, *((indexes or {}).get((db, name), []))]}
        out.append(
            bson.encode(
                {"db": db, "collection": name, "metadata": json_util.dumps(meta), "size": 0, "type": "collection"}
            )
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
            if chunk:
                out.append(bson.encode({"db": key[0], "collection": key[1], "EOF": False, "CRC": 0}))
                out.extend(bson.encode(doc) for doc in chunk)
                out.append(terminator)
                cursors[key] = start + block
            if cursors[key] >= len(docs):
                out.append(bson.encode({"db": key[0], "collection": key[1], "EOF": True, "CRC": 0}))
                out.append(terminator)
                del cursors[key]
    data = b"".join(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip_module.compress(data) if compress else data)
    return path
