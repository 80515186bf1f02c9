"""MP109 schema_versioning: the set of fields changed over insertion time, with no version field."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule

VERSION_FIELDS = ("schemaVersion", "schema_version", "_schemaVersion", "schema", "version", "_v", "__v")


@register
class SchemaVersioningRule(Rule):
    """When the shape of new documents changes (fields renamed, added, dropped) and old documents stay as
    they were, readers must guess each document's shape. A ``schemaVersion`` field stamped on every
    document makes the shape explicit and lets old documents be upgraded lazily or in a migration.
    Fires when shape drift shows fields that appeared or vanished over insertion time (each carried by
    at least ``min_share`` of the documents) and no version field covers every document."""

    code = "MP109"
    name = "schema_versioning"
    title = "Stamp a schema version on documents whose shape changed"
    defaults = {"min_share": 0.02}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        drift = collection.data.get("drift") or {}
        read = max(collection.documents_read, 1)
        appeared = [a for a in drift.get("appeared", []) if a["documents"] / read >= self.threshold("min_share")]
        vanished = [v for v in drift.get("vanished", []) if v["documents"] / read >= self.threshold("min_share")]
        appeared = [a for a in appeared if a["field"] not in VERSION_FIELDS]
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
