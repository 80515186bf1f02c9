"""The ``timeseries`` step against a plain copy of the same collection, on one server, in one run.

For each shape of readings (``--shapes``: ``weather``, MongoDB's weather sample from ``--weather`` when
given, else generated observations of 1.7 KiB with one reading per station; ``iot``, 20 sensors reading
every two seconds, 100-byte documents), the collection is loaded into a scratch database, then
``copy_collection`` (the baseline: the same documents copied by the same runner into a plain collection)
and ``timeseries`` run up, best of ``--rounds``. Prints seconds, documents per second and the step's time
over the copy's. Then a round trip: up while an application inserts a reading after every batch, one more
reading into each collection after up, up again, down, and whether every reading is where it belongs.

    python3 bench/migrate_timeseries.py --uri mongodb://127.0.0.1:27017 [--documents 10000] [--rounds 2]

The server must create time-series collections (MongoDB 5.0+). The scratch database is dropped after.
"""

from __future__ import annotations

import argparse
import datetime
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import pymongo
from bson import ObjectId

from mongopat.migrate.script import load_folder, render
from mongopat.migrate.server.runner import Runner, RunOptions
from mongopat.sources.dump import DumpSource
from mongopat.timeseries.sync import canonical

START = datetime.datetime(2026, 1, 1)


def iot(documents: int) -> list[dict[str, Any]]:
    return [
        {"_id": ObjectId(), "ts": START + datetime.timedelta(seconds=i / 10), "sensorId": f"s{i % 20}",
         "temp": 20 + (i % 13) / 4, "humidity": 40 + i % 9}
        for i in range(documents)
    ]  # fmt: skip


def weather(documents: int, archive: str | None) -> list[dict[str, Any]]:
    if archive:
        source = DumpSource(archive)
        return [doc for doc, _size in source.documents("data", None)][:documents]
    rng = random.Random(3)
    return [
        {"_id": ObjectId(), "st": f"x+{rng.randrange(10**6)}", "ts": START + datetime.timedelta(seconds=i * 71),
         "airTemperature": {"value": rng.random() * 30, "quality": "1"}, "report": "x" * 1500}
        for i in range(documents)
    ]  # fmt: skip


def migrations(folder: Path, step: dict[str, Any]) -> list[Any]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "0001_m.yaml").write_text(render("0001_m", "bench", [step]))
    return load_folder(folder)


def timed(db: Any, folder: Path, step: dict[str, Any], **options: Any) -> float:
    start = time.perf_counter()
    Runner(db, migrations(folder, step), RunOptions(batch_size=1000, **options)).up()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uri", required=True)
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--shapes", nargs="+", default=["weather", "iot"])
    parser.add_argument("--weather", help="sample_weatherdata.archive.gz (MongoDB's sample)")
    args = parser.parse_args()
    client = pymongo.MongoClient(args.uri, serverSelectionTimeoutMS=5000)
    db = client["mongopat_bench_timeseries"]
    work = Path(tempfile.mkdtemp(prefix="mongopat-bench-"))
    print(f"{'shape':8} {'docs':>7} {'copy s':>8} {'timeseries s':>13} {'docs/s':>8} {'ratio':>6}")
    try:
        for shape in args.shapes:
            documents = weather(args.documents, args.weather) if shape == "weather" else iot(args.documents)
            time_field, meta = ("ts", None) if shape == "weather" else ("ts", "sensorId")
            best_copy = best_ts = float("inf")
            for round_ in range(args.rounds):
                client.drop_database(db.name)
                db.readings.insert_many(documents)
                copy = {"step": "copy_collection", "collection": "readings", "to": "readings_copy"}
                best_copy = min(best_copy, timed(db, work / f"{shape}{round_}c", copy))
                client.drop_database(db.name)
                db.readings.insert_many(documents)
                step = {"step": "timeseries", "collection": "readings", "to": "readings_ts", "time_field": time_field,
                        "meta_field": meta, "granularity": "minutes"}  # fmt: skip
                best_ts = min(best_ts, timed(db, work / f"{shape}{round_}t", step))
            print(
                f"{shape:8} {len(documents):>7,} {best_copy:>8.2f} {best_ts:>13.2f} "
                f"{len(documents) / best_ts:>8,.0f} {best_ts / best_copy:>6.2f}"
            )
            # The round trip, the application writing: inserts, updates and deletes of readings in the old
            # collection while up runs, then (switched) in the new one; after down the old collection must
            # hold exactly what the application's acknowledged writes left.
            client.drop_database(db.name)
            db.readings.insert_many(documents)
            model = {d["_id"]: dict(d) for d in documents}
            rng = random.Random(7)

            def write(collection: Any, time_field: str = time_field, model: dict = model, rng: Any = rng) -> None:
                roll = rng.random()
                if roll < 0.5:
                    reading = {"_id": ObjectId(), time_field: START, "temp": rng.random()}
                    collection.insert_one(reading)
                    model[reading["_id"]] = reading
                elif roll < 0.8:
                    chosen = rng.choice(list(model))
                    collection.update_many({"_id": chosen}, {"$set": {"temp": -1.0}})
                    model[chosen] = {**model[chosen], "temp": -1.0}
                else:
                    chosen = rng.choice(list(model))
                    collection.delete_many({"_id": chosen})
                    del model[chosen]

            writes = {"n": 0}

            def application(*_args: Any, writes: dict = writes, write: Any = write) -> None:
                if writes["n"] < 30:
                    write(db.readings)
                    writes["n"] += 1

            folder = work / f"{shape}-trip"
            run = Runner(db, migrations(folder, step), RunOptions(batch_size=1000, on_batch=application))
            run.up()
            write(db.readings)  # after up, before the switch
            Runner(db, load_folder(folder), RunOptions()).up()
            agreed = sorted(canonical(d) for d in db.readings_ts.find()) == sorted(canonical(d) for d in model.values())
            for _ in range(3):  # switched: the application writes the time-series collection
                write(db.readings_ts)
            copied = db.readings_ts.count_documents({})
            Runner(db, load_folder(folder), RunOptions()).down()
            kept = sorted(canonical(d) for d in db.readings.find()) == sorted(canonical(d) for d in model.values())
            gone = "readings_ts" not in db.list_collection_names()
            verdict = "holds exactly what the application wrote" if kept and gone else "DIFFERS: LOST"
            print(
                f"  round trip: {writes['n'] + 1} application writes in readings (inserts, updates, deletes) "
                f"during and after up, the copy {'agreeing' if agreed else 'NOT agreeing'} with them; 3 in "
                f"readings_ts after the switch ({copied:,} readings); after down readings {verdict}"
            )
    finally:
        client.drop_database(db.name)


if __name__ == "__main__":
    main()
