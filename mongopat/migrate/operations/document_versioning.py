"""document_versioning: a revision number (the history collection is dropped by down)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mongopat.guide.placeholders import param
from mongopat.guide.writes import WritePlan, changed, command, scalar
from mongopat.migrate.operations.base import STR, AddsFields, Param, Step, StepType
from mongopat.migrate.operations.server_paths import plain, set_stages, value_at
from mongopat.migrate.transform_api import Context, Document, Result, copy_document, get_path, has_path, set_path

if TYPE_CHECKING:
    pass


class Operation(AddsFields):
    plan_order = 2
    type = StepType(
        "document_versioning",
        "document",
        {"history_collection": Param(STR), "version_field": Param(STR, False, "revision")},
        "stamp a revision and write the first revision to a history collection (document versioning)",
        creates=("history_collection",),
    )

    def update_write(self, step: Step, per_sec: float) -> WritePlan | None:
        """An update stamps the next revision, only on the revision it read, and copies it to the history."""
        history, version = step.params["history_collection"], step.params["version_field"]
        before = [
            command(step.collection, "updateOne", filter={"_id": param("_id")}, update={"$set": param("changes")})
        ]
        after = [
            command(
                step.collection,
                "updateOne",
                filter={"_id": param("_id"), version: param(version)},
                update={"$set": param("changes"), "$inc": {version: 1}},
            ),
            command(history, "insertOne", document=param("revisionDocument", shape="new")),
        ]

        def binder(sample: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
            current = sample.after[step.collection].find_one({"_id": sample.document["_id"]})
            name = next((k for k, v in sample.document.items() if k not in ("_id", version) and scalar(v)), None)
            if current is None or name is None:
                return None
            changes = {name: changed(sample.document[name])}
            revision = current.get(version, 1)
            updated = {**current, **changes, version: revision + 1}
            copy_ = {"_id": {"doc": current["_id"], "revision": revision + 1}}
            copy_.update((k, v) for k, v in updated.items() if k != "_id")
            values = {"_id": sample.document["_id"], "changes": changes}
            return values, {**values, version: revision, "revisionDocument": copy_}

        return WritePlan(
            step.collection,
            "revision",
            f"update a document of {step.collection}",
            before,
            after,
            {
                "_id": "the document's _id",
                "changes": "the fields the update sets",
                version: f"the `{version}` the application read (another writer's revision makes the update miss)",
                "revisionDocument": f"the document as updated, `_id` {{doc, revision}}, for {history}",
            },
            per_sec,
            {"before": 1, "after": 2},
            binder,
        )

    def new_shape(self, step: Step) -> str:
        p = step.params
        return f"`{p['version_field']}` = 1, and its first revision in {p['history_collection']}"

    def deploy(self, step: Step) -> dict[str, list[str]]:
        p = step.params
        return {
            "before": [
                f"`{step.collection}`: updates increment `{p['version_field']}` and insert the revision into "
                f"{p['history_collection']}"
            ],
            "during": [f"`{step.collection}`: a document without `{p['version_field']}` is at revision 1"],
            "after": [],
        }

    side_documents_copy_the_document = True

    changes_only_what_it_writes = True

    only_copies_the_id = True

    def read_fields(self, step: Step) -> frozenset[str] | None:
        # The history copies every field, but reads only these: the others go into it as the line holds them.
        return frozenset(("_id", step.params["version_field"].split(".", 1)[0]))

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        version_field = step.params["version_field"]
        if not has_path(doc, version_field):
            set_path(doc, version_field, 1)
        revision = {key: copy_document(value) for key, value in doc.items() if key != "_id"}
        history = {"_id": {"doc": doc.get("_id"), "revision": get_path(doc, version_field)}, **revision}
        return Result(doc, {step.params["history_collection"]: [history]})

    def server_stages(self, step: Step) -> list[dict[str, Any]] | None:
        # Only pending documents are given: those without the field, stamped at revision 1.
        version_field = step.params["version_field"]
        return set_stages(version_field, {"$literal": 1}) if plain(version_field) else None

    def server_side_documents(self, step: Step) -> dict[str, list[dict[str, Any]]] | None:
        """The first revision: the stamped document with ``_id`` {doc, revision} in the place of its own
        (``$mergeObjects`` keeps the first field first, where the transform puts it)."""
        version_field = step.params["version_field"]
        revision_id = {"_id": {"doc": "$_id", "revision": value_at(version_field)}}
        return {step.params["history_collection"]: [{"$replaceWith": {"$mergeObjects": ["$$ROOT", revision_id]}}]}

    def side_document_fields(self, step: Step) -> dict[str, frozenset[str]]:
        # A $merge's on names top-level fields here: a nested version field is not among them.
        version_field = step.params["version_field"]
        held = ("_id", version_field) if "." not in version_field else ("_id",)
        return {step.params["history_collection"]: frozenset(held)}

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["version_field"]}

    def added(self, step: Step) -> list[str]:
        return [step.params["version_field"]]
