"""MP109 schema_versioning: the set of fields changed over insertion time, with no version field."""

from __future__ import annotations

from typing import Any

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule

VERSION_FIELDS = ("schemaVersion", "schema_version", "_schemaVersion", "schema", "version", "_v", "__v")


@register
class SchemaVersioningRule(Rule):
    """When the shape of new documents changes (fields renamed, added, dropped) and old documents stay as
    they were, readers must guess each document's shape. A ``schemaVersion`` field stamped on every
    document makes the shape explicit and lets old documents be upgraded lazily or in a migration.

    Optional fields are not versions: a field that *appeared* counts only when at least ``min_documents``
    and ``min_share`` of the documents read were all created before its first sighting without it, and
    at least ``min_holders_share`` of the documents created since hold it (``min_documents`` of them at
    least); a field that *vanished*, the same the other way round. One old document without a field the
    others hold, or a field some documents of every period have, is not a shape change. Fires when such a
    change is seen and no version field covers every document."""

    code = "MP109"
    name = "schema_versioning"
    title = "Stamp a schema version on documents whose shape changed"
    defaults = {"min_share": 0.05, "min_documents": 20, "min_holders_share": 0.8}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        drift = collection.data.get("drift") or {}
        shapes = drift.get("shapes") or []
        read = max(collection.documents_read, 1)
        material = max(self.threshold("min_documents"), self.threshold("min_share") * read)
        appeared = [
            dict(a, **counts)
            for a in drift.get("appeared", [])
            if a["field"] not in VERSION_FIELDS
            and (counts := _split(shapes, a["field"], a["first_seen"], appeared=True))
            and self._changed(counts, material)
        ]
        vanished = [
            dict(v, **counts)
            for v in drift.get("vanished", [])
            if (counts := _split(shapes, v["field"], v["last_seen"], appeared=False))
            and self._changed(counts, material)
        ]
        if not appeared and not vanished:
            return []
        version = next((name for name in VERSION_FIELDS if collection.field(name)), None)
        if version and (collection.field(version)["presence"] or 0) >= 0.999:
            return []
        new_fields = sorted(a["field"] for a in appeared)
        old_fields = sorted(v["field"] for v in vanished)
        since = min((a["first_seen"] for a in appeared), default=None)
        field_name = version or "schemaVersion"
        rules = (
            [{"when_has": new_fields[0], "version": 2}]
            if new_fields
            else [{"when_missing": old_fields[0], "version": 2}]
        )
        return [
            self.finding(
                collection.name,
                [field_name, *new_fields, *old_fields],
                "warning" if vanished else "info",
                0.7 if vanished and appeared else 0.55,
                {
                    "appeared": appeared,
                    "vanished": vanished,
                    "version_field": version,
                    "version_presence": collection.field(version)["presence"] if version else None,
                    "clock": drift.get("clock"),
                },
                f"Documents of {collection.name} changed shape"
                + (f" around {since}" if since else "")
                + (f": {', '.join(new_fields)} appeared" if new_fields else "")
                + (f"{';' if new_fields else ':'} {', '.join(old_fields)} stopped appearing" if old_fields else "")
                + f". Stamping '{field_name}' on every document tells readers which shape they hold and lets old "
                "documents be upgraded in place.",
                tradeoffs=[
                    "Readers and writers must check the version and handle every live one until old ones are upgraded.",
                ],
                migration={
                    "step": "schema_versioning",
                    "collection": collection.name,
                    "field": field_name,
                    "default_version": 1,
                    "rules": rules,
                },
            )
        ]

    def _changed(self, counts: dict[str, int], material: float) -> bool:
        """Material on both sides of the change: documents of the old shape, and holders of the new one."""
        holders, period = counts["holders"], counts["documents_since"]
        return (
            counts["documents_before"] >= material
            and holders >= self.threshold("min_documents")
            and period > 0
            and holders / period >= self.threshold("min_holders_share")
        )


def _split(shapes: list[dict[str, Any]], field: str, when: Any, appeared: bool) -> dict[str, int]:
    """Documents on each side of a field's first (``appeared``) or last sighting ``when``: those of the old
    side wholly before it without the field, and on the new side how many documents there are and how
    many hold the field (``appeared``; for a vanished field, how many lack it). Shapes keep a first and a
    last time, so a shape that straddles ``when`` counts on neither side of the old one."""
    before = since = holders = 0
    for shape in shapes:
        has = field in shape["fields"]
        count = int(shape["documents"])
        if appeared:
            if not has and shape["last"] < when:
                before += count
            if shape["first"] >= when:
                since += count
                holders += count if has else 0
        else:
            if has and shape["last"] <= when:
                before += count  # the old side: documents that held it, all at or before its last sighting
            if shape["first"] > when:
                since += count
                holders += 0 if has else count
    return {"documents_before": before, "documents_since": since, "holders": holders}
