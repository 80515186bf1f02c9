"""MP107 attribute: many sparse fields with similar roles, or field names that are data (a map keyed by ids)."""

from __future__ import annotations

from typing import Any

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule
from mongopat.rules.kinds import Kinds, find_kinds

CONTAINERS = ("object", "array")


@register
class AttributeRule(Rule):
    """Two shapes of the same problem: field names that cannot be indexed or queried generically.

    *Sparse fields.* A catalog whose products carry different specifications (screen size for phones, RAM
    for laptops) ends up with many fields that each appear in few documents, and an index per field to
    search them. Moving them into one array of ``{k, v}`` pairs lets one compound index on ``k`` and ``v``
    serve every attribute. Fires when at least ``min_sparse_fields`` top-level scalar fields each appear in
    at most ``max_presence`` of the documents. Fields that belong to one kind of a polymorphic collection
    (MP108's evidence) are left to MP108, unless a declared query filters on fields of several kinds.

    *Maps.* A sub-document whose keys are values (ids, hashes, dates: the report shows it as one path
    ``field.<key>``) has as many field names as values; no index can cover them. As an array of documents
    holding the key, one multikey index on the key serves every lookup. Fires on every map of at least
    ``min_map_keys`` distinct keys; the migration round-trips exactly (``map_to_array``)."""

    code = "MP107"
    name = "attribute"
    title = "Pivot sparse fields into an array of key/value pairs"
    defaults = {
        "min_sparse_fields": 8,
        "max_presence": 0.5,
        "min_documents": 20,
        "min_map_keys": 32,
        "min_shape_share": 0.05,
        "min_core_fields": 2,
    }

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        found = [self._map_finding(collection, field) for field in collection.fields.values() if field.get("map")]
        found = [finding for finding in found if finding is not None]
        sparse = self._sparse_finding(collection)
        return found + ([sparse] if sparse else [])

    # -- maps --------------------------------------------------------------------------------------

    def _map_finding(self, collection: CollectionEvidence, field: dict[str, Any]) -> Recommendation | None:
        keys = field["map"]
        if keys["keys"] < self.threshold("min_map_keys"):
            return None
        path = field["path"]
        value_path = keys["value_path"]
        value = collection.field(value_path) or {}
        documents_only = bool(value.get("types")) and all(t["type"] == "object" for t in value["types"])
        hidden = sum(1 for other in collection.fields if other.startswith(value_path + "."))
        queried = sorted(
            {
                name
                for query in (collection.access.queries if collection.access else [])
                for name in query.filter
                if name == path or name.startswith(path + ".")
            }
        )
        key_field = keys.get("key_in_value") or "k"
        forms = ", ".join(f"{f['form']} {f['share']:.0%}" for f in keys["key_forms"][:3])
        evidence = {
            "map": path,
            "distinct_keys": keys["keys"],
            "keys_exact": keys["keys_exact"],
            "key_forms": forms,
            "keys_per_document_mean": keys["keys_per_document"]["mean"],
            "keys_per_document_max": keys["keys_per_document"]["max"],
            "value_fields": hidden,
            "key_in_value": keys.get("key_in_value"),
            "fields_filtered_by_queries": queried,
        }
        inside_array = field["in_array"] or "[]" in path
        rationale = (
            f"{collection.name}.{path} uses its keys as data: {keys['keys']:,} distinct keys ({forms}), "
            f"about {keys['keys_per_document']['mean']} per document, each a field name of its own. Field names "
            "cannot be indexed or queried generically (every lookup names one key, and a schema tool sees "
            f"thousands of fields). As an array of documents that hold the key in '{key_field}', one index on "
            f"{path}.{key_field} serves every key."
        )
        if keys.get("key_in_value"):
            rationale += f" The values already carry their key in '{key_field}': it becomes the array's key field."
        if inside_array:
            rationale += " The map sits inside an array: migrate it by hand (no automatic step for nested maps)."
        migration = None
        if not inside_array:
            migration = {
                "step": "map_to_array",
                "collection": collection.name,
                "field": path,
                "layout": "merge" if documents_only else "pair",
                "key_field": key_field,
                "value_field": "v",
                "key_in_value": bool(keys.get("key_in_value")) and documents_only,
                "index": {f"{path}.{key_field}": 1},
            }
        return self.finding(
            collection.name,
            [path],
            "warning" if queried or keys["keys"] >= 1000 else "info",
            0.8 + (0.1 if queried else 0),
            evidence,
            rationale,
            tradeoffs=[
                f"Reads of one key become an $elemMatch (or a positional filter) on {path}.{key_field}.",
                "Updates of one entry use arrayFilters or the positional operator instead of a dotted key.",
                "A key can appear twice in an array; the application keeps keys unique if it relies on that.",
            ],
            migration=migration,
            title="Turn a map keyed by values into an array of documents",
        )

    # -- sparse fields -------------------------------------------------------------------------------

    def _sparse_finding(self, collection: CollectionEvidence) -> Recommendation | None:
        if collection.documents_read < self.threshold("min_documents"):
            return None
        sparse = [
            f["path"] for f in collection.top_level()
            if f["path"] != "_id" and (f["presence"] or 0) <= self.threshold("max_presence")
            and f["types"] and not any(t["type"] in CONTAINERS for t in f["types"])
        ]  # fmt: skip
        if len(sparse) < self.threshold("min_sparse_fields"):
            return None
        queries = collection.access.queries if collection.access else []
        kinds = find_kinds(collection, self.threshold("min_shape_share"), self.threshold("min_core_fields"))
        across: list[str] = []
        if kinds is not None:
            # The kinds' own fields are MP108's business unless a query filters on fields of several kinds.
            across = [query.name for query in queries if len(_kinds_filtered(kinds, query.filter)) >= 2]
            if not across:
                sparse = [name for name in sparse if kinds.kind_of(name) is None]
                if len(sparse) < self.threshold("min_sparse_fields"):
                    return None
        queried = sorted({name for q in queries for name in q.filter if name in sparse})
        presence = [collection.field(p)["presence"] for p in sparse]
        rationale = (
            f"{collection.name} has {len(sparse)} fields that each appear in at most "
            f"{max(presence) * 100:.0f}% of documents. As an 'attributes' array of {{k, v}} pairs they can be "
            "searched with one index on attributes.k and attributes.v instead of one index per field"
            + (f"; queries already filter on {', '.join(queried)}." if queried else ".")
        )
        if kinds is not None and across:
            told = f"told apart by '{kinds.discriminator}'" if kinds.discriminator else "told apart by their fields"
            rationale += (
                f" The collection also holds {len(kinds.kinds)} kinds of documents ({told}; MP108). Choose the "
                f"attribute pattern for the kinds' own fields because {', '.join(across)} filter on fields of "
                "several kinds, which per-kind fields would need an index each to serve; keep the kind field "
                "for validation and per-kind reads."
            )
        return self.finding(
            collection.name,
            sparse,
            "warning" if queried else "info",
            0.45 + min(0.3, len(sparse) / 50) + (0.2 if queried else 0),
            {
                "sparse_fields": len(sparse),
                "median_presence": sorted(presence)[len(presence) // 2],
                "max_presence": max(presence),
                "fields_filtered_by_queries": queried,
                "indexes": len(collection.data.get("indexes", [])),
                "kinds": len(kinds.kinds) if kinds else None,
                "queries_across_kinds": across,
            },
            rationale,
            tradeoffs=[
                "Queries use $elemMatch on {k, v} instead of plain field names.",
                "Values of one key may mix types; validation per key moves to the application.",
            ],
            migration={
                "step": "attribute",
                "collection": collection.name,
                "fields": sparse,
                "into": "attributes",
                "index": {"attributes.k": 1, "attributes.v": 1},
            },
        )


def _kinds_filtered(kinds: Kinds, filtered: dict[str, Any]) -> set[int]:
    """The kinds whose own fields a query filter names."""
    return {index for name in filtered if (index := kinds.kind_of(name)) is not None}
