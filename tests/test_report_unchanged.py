"""The analysis report stays the same figure for figure while its code is made faster.

The reports in ``tests/fixtures/reports/`` were written by ``analyze`` before the speed work of the
analysis path (issue "analyze: five times mongodb-schema's speed"); every figure of today's report must be
equal to them, timestamps aside. They cover the sample scenarios and a generated corpus with nested arrays,
mixed types, sparse fields, maps and values past the distinct limit; ``corpus_mixed`` is the same
corpus with every other line in canonical Extended JSON, read by two processes (its report was written by
the code before documents were walked in batches); ``optional_orders`` (keys that come and go) and
``weather`` (MongoDB's weather observations) were written before documents of different keys were walked
together.

Past the distinct limit a field's distinct count is an estimate from a sample of hashes. The hashes are
taken of stand-ins that do not depend on the process (a string's CRC-32, a number itself), so the estimates
are the same in every process and are compared exactly, as every other figure is.

A change that is meant to change the report rewrites them: ``MONGOPAT_UPDATE_REPORTS=1 python3 -m pytest
tests/test_report_unchanged.py``, and the diff of the fixtures shows what changed.
"""

from __future__ import annotations

import datetime
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest
from bson import Decimal128, ObjectId, json_util

import mongopat.sources.dump as dump
from mongopat.analysis.collection import AnalyzeOptions
from mongopat.command import analyze
from mongopat.sample_data import SCENARIOS, write_scenario
from mongopat.sources import SourceSpec
from tests.support.paths import REAL, REPORTS

UPDATE = os.environ.get("MONGOPAT_UPDATE_REPORTS") == "1"


def corpus(documents: int = 6000) -> list[dict[str, Any]]:
    """Documents of drifting shapes: nested arrays of sub-documents and of arrays, fields of several types,
    sparse fields, a map with id keys, dates and ObjectIds for the timelines."""
    rng = random.Random(5)
    start = datetime.datetime(2025, 1, 1)
    out = []
    for i in range(documents):
        when = start + datetime.timedelta(seconds=i * 37 + rng.randint(0, 30))
        doc: dict[str, Any] = {
            "_id": ObjectId.from_datetime(when),
            "seq": i,
            "n": rng.choice([rng.randint(0, 50), rng.random() * 10, str(rng.randint(0, 9)), None, True]),
            "events": [
                {
                    "at": when + datetime.timedelta(minutes=k),
                    "kind": rng.choice(["open", "click", "close"]),
                    "tags": [rng.choice("abcdef") for _ in range(rng.randint(0, 4))],
                    **({"meta": {"depth": [k, [k, k + 1]]}} if rng.random() < 0.3 else {}),
                }
                for k in range(rng.randint(0, 6))
            ],
            "matrix": [[rng.randint(0, 3) for _ in range(rng.randint(0, 3))] for _ in range(rng.randint(0, 3))],
            "price": Decimal128(f"{rng.randint(1, 999)}.{rng.randint(0, 99):02d}"),
            "wide": rng.randint(0, 40_000),
            "createdAt": when,
        }
        if i % 3 == 0:
            doc["sparse"] = {"a": rng.randint(0, 5), "b": [rng.random() for _ in range(2)]}
        if i % 7 == 0:
            doc["rare"] = rng.choice(["x", 1, 2.5, None, [1, 2]])
        if i > documents // 2:
            doc["added_later"] = rng.randint(0, 3)
        if rng.random() < 0.5:
            doc["byUser"] = {str(ObjectId(rng.randbytes(12))): rng.randint(0, 9) for _ in range(rng.randint(1, 3))}
        out.append(doc)
    return out


def normalized(report: dict[str, Any]) -> dict[str, Any]:
    report = json.loads(json.dumps(report, default=str))
    report.pop("generated_at", None)
    report["source"].pop("location", None)
    return report


def estimates(report: dict[str, Any]) -> dict[str, int]:
    """Estimated distinct counts (of values, and of a map's keys) by collection and path, taken out of the report (set to None there)."""
    found = {}
    for collection in report["collections"]:
        for entry in collection["fields"]:
            cardinality = entry.get("cardinality") or {}
            if cardinality.get("exact") is False:
                found[f"{collection['name']}.{entry['path']}"] = cardinality["distinct"]
                cardinality["distinct"] = None
            mapping = entry.get("map") or {}
            if mapping.get("keys_exact") is False:
                found[f"{collection['name']}.{entry['path']} keys"] = mapping["keys"]
                mapping["keys"] = None
    return found


def optional_orders(documents: int = 4000) -> list[dict[str, Any]]:
    """Orders as applications write them: a coupon in a tenth, notes in a twentieth, 0-4 tags, an address
    whose fields are each sometimes missing, so that consecutive orders rarely share their keys."""
    rng = random.Random(8)
    start = datetime.datetime(2025, 3, 1)
    out = []
    for i in range(documents):
        when = start + datetime.timedelta(seconds=i * 11)
        order: dict[str, Any] = {
            "_id": ObjectId.from_datetime(when),
            "status": rng.choice(["new", "paid", "shipped"]),
            "items": [{"sku": f"S{rng.randint(0, 300)}", "qty": rng.randint(1, 4)} for _ in range(rng.randint(1, 5))],
            "address": {
                k: v for k, v in (("city", rng.choice(["Lyon", "Graz"])), ("zip", f"{rng.randint(0, 999):03d}"),
                                  ("country", "FR"), ("street", f"{i} Main St")) if rng.random() < 0.85
            },
        }  # fmt: skip
        if rng.random() < 0.1:
            order["coupon"] = {"code": f"C{rng.randint(0, 9)}", "percent": rng.choice([5, 10])}
        if rng.random() < 0.05:
            order["notes"] = "leave at door"
        order["tags"] = [rng.choice(["gift", "express", "b2b"]) for _ in range(rng.randint(0, 4))]
        order["total"] = round(rng.random() * 300, 2)
        out.append(order)
    return out


WEATHER = REAL / "sample_weatherdata.archive.gz"


def weather(copies: int = 3) -> list[dict[str, Any]]:
    """MongoDB's weather observations (wide, optional nested sections), the fixture's 400 three times over."""
    import bson

    from mongopat.sources.archive import archive_records

    observations = [bson.decode(raw) for _size, raw in archive_records(WEATHER, "sample_weatherdata", "data")]
    out = []
    for i in range(copies * len(observations)):
        document = dict(observations[i % len(observations)])
        document["_id"] = ObjectId((1_400_000_000 + i).to_bytes(4, "big") + i.to_bytes(8, "big"))
        out.append(document)
    return out


GENERATED = {"corpus": corpus, "optional_orders": optional_orders, "weather": weather}


def cases() -> list[str]:
    return [*sorted(SCENARIOS), "corpus", "corpus_mixed", "optional_orders", "weather"]


def write_case(name: str, folder: Path) -> Path:
    if name in ("optional_orders", "weather"):
        data = folder / name
        data.mkdir(parents=True)
        with (data / f"{name}.json").open("w", encoding="utf-8") as handle:
            handle.writelines(json_util.dumps(document) + "\n" for document in GENERATED[name]())
        return data
    if name.startswith("corpus"):
        data = folder / "corpus"
        data.mkdir(parents=True)
        # corpus_mixed: lines alternate between relaxed and canonical Extended JSON ($numberInt, $numberDouble,
        # $numberLong wrappers among plain values), the file read by two processes.
        modes = [json_util.RELAXED_JSON_OPTIONS]
        if name == "corpus_mixed":
            modes.append(json_util.CANONICAL_JSON_OPTIONS)
        with (data / "things.json").open("w", encoding="utf-8") as handle:
            for index, document in enumerate(corpus()):
                handle.write(json_util.dumps(document, json_options=modes[index % len(modes)]) + "\n")
        return data
    write_scenario(SCENARIOS[name](), folder)
    return folder / SCENARIOS[name]().database


@pytest.mark.parametrize("name", cases())
def test_the_report_is_the_one_written_before(tmp_path, monkeypatch, name):
    data = write_case(name, tmp_path)
    monkeypatch.setattr(dump, "MIN_PARALLEL_BYTES", 0)
    workers = 2 if name == "corpus_mixed" else 1
    options = AnalyzeOptions(workers=workers, distinct_limit=1000 if name.startswith("corpus") else 10_000)
    report = normalized(analyze(SourceSpec(dump=str(data)), options=options))
    path = REPORTS / f"{name}.json"
    if UPDATE:
        REPORTS.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    expected = json.loads(path.read_text(encoding="utf-8"))
    estimated, expected_estimates = estimates(report), estimates(expected)
    assert set(estimated) == set(expected_estimates)
    for key, value in estimated.items():
        assert value == expected_estimates[key], f"{name}: {key} estimate"
    for got, want in zip(report["collections"], expected["collections"], strict=True):
        for key in sorted(set(got) | set(want)):
            assert got.get(key) == want.get(key), f"{name}.{got['name']}: {key} differs"
    assert report == expected
