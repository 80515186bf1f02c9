"""Variants of the sample scenarios (``mongopat.sample_data``) that tests of one pattern need."""

from __future__ import annotations

from pathlib import Path

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
