"""MP110 document_versioning: every edit must be kept (declared ``history`` needs)."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule


@register
class DocumentVersioningRule(Rule):
    """When every edit of a document must be kept (wiki pages, contracts, regulated records) the current
    version stays in the collection, with a ``revision`` number, and each superseded version goes to a
    history collection. Reads of the current state stay as fast as before; history is one query away.
    Fires for collections whose access entry declares ``history: {keep_versions: true}`` and that have no
    history collection yet."""

    code = "MP110"
    name = "document_versioning"
    title = "Keep superseded versions in a history collection"
    defaults: dict[str, float] = {}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        history = collection.access.history if collection.access else None
        if history is None or not history.keep_versions:
            return []
        target = f"{collection.name}_history"
        if self.context.collection(target) is not None:
            return []
        updates = collection.declared_updates()
        return [
            self.finding(
                collection.name,
                ["revision"],
                "warning",
                0.9,
                {
                    "keep_versions": True,
                    "restore": history.restore,
                    "updates_per_sec": updates,
                    "history_versions_per_day": round(updates * 86400) if updates else None,
                    "documents": collection.count,
                },
                f"{collection.name} must keep every version"
                + (" and restore old ones" if history.restore else "")
                + (
                    f"; at {updates:,.3f} updates/s that is about {updates * 86400:,.0f} versions a day"
                    if updates
                    else ""
                )
                + f". Each update copies the current document into {target} and bumps 'revision', so current reads"
                " are unchanged and history is a query by _id.",
                tradeoffs=[
                    "Every update becomes two writes (copy the old version, write the new); use a transaction.",
                    "The history collection grows without bound: plan retention or archiving.",
                ],
                migration={
                    "step": "document_versioning",
                    "collection": collection.name,
                    "history_collection": target,
                    "version_field": "revision",
                },
            )
        ]
