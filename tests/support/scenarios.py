"""Variants of the sample scenarios (``mongopat.sample_data``) that tests of one pattern need."""

from __future__ import annotations

from pathlib import Path

from mongopat.command import analyze, recommend
from mongopat.migrate.plan import plan
from mongopat.sample_data import SCENARIOS, write_scenario
from mongopat.sources import SourceSpec

# The iot scenario's readings are inserted and never changed: a time-series collection is the advice
# (MP113). Readings also updated in place are not, before MongoDB 7.0: buckets made by hand are (MP101).
INSERTED = "writes: {inserts_per_sec: 10}"
UPDATED = "writes: {inserts_per_sec: 10, updates_per_sec: 1}"


def update_readings(access: Path) -> Path:
    """The iot scenario's access file, with its readings updated in place once a second."""
    text = access.read_text(encoding="utf-8")
    assert INSERTED in text, "the iot scenario's access file changed: update tests/support/scenarios.py"
    access.write_text(text.replace(INSERTED, UPDATED, 1), encoding="utf-8")
    return access


def iot_folder(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The iot scenario as a dump folder (a fifth of its readings), its access file with the readings updated
    in place, and the migrations ``recommend`` and ``plan`` write for it: (dump, access file, migrations)."""
    scenario = SCENARIOS["iot"]()
    write_scenario(scenario, tmp_path / "data")
    dump = tmp_path / "data" / scenario.database
    # A fifth of the readings (the first minutes of every sensor): mongomock scans a collection per query.
    readings = dump / "readings.json"
    readings.write_text("".join(readings.read_text().splitlines(keepends=True)[:1200]))
    access = update_readings(tmp_path / "data" / "access.yaml")  # the bucket step's guide
    result = recommend(analyze(SourceSpec(dump=str(dump))), str(access))
    plan(result["recommendations"], tmp_path / "migrations")
    return dump, access, tmp_path / "migrations"
