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
