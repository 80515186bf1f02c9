"""MP111 tree: documents referencing documents of the same collection (parent, children, ancestors)."""

from __future__ import annotations

from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule

MATERIALISED = ("ancestors", "path", "ancestorIds", "ancestor_ids", "lineage")
# Arrays of same-collection ids are a tree only under these names (followers or friends form a graph).
TREE_ARRAYS = ("children", "childIds", "child_ids", "ancestors", "parents")


@register
class TreeRule(Rule):
    """A hierarchy stored only as parent references (categories, org charts, threads) needs one query per
    level to find a node's ancestors or a whole subtree. Keeping each node's ``ancestors`` array (and a
    ``path`` string) answers both with one indexed query. Fires when a field references ``_id``s of its
    own collection with a match rate of at least ``min_match_rate`` and no ancestors/path field exists."""

    code = "MP111"
    name = "tree"
    title = "Materialise ancestors for a hierarchy stored as parent references"
    defaults = {"min_match_rate": 0.5}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        own = [
            r for r in collection.data.get("references", [])
            if r["target"] == collection.name and r["match_rate"] >= self.threshold("min_match_rate")
            and (not r["field"].endswith("[]") or r["field"][:-2].split(".")[-1] in TREE_ARRAYS)
        ]  # fmt: skip
        if not own or any(collection.field(name) for name in MATERIALISED):
            return []
        parent = next((r for r in own if not r["field"].endswith("[]")), own[0])
        subtree_queries = []
        if collection.access:
            subtree_queries = [q.name for q in collection.access.queries if any(f in MATERIALISED for f in q.filter)]
        return [
            self.finding(
                collection.name,
                [parent["field"], "ancestors", "path"],
                "warning" if subtree_queries else "info",
                0.6 + parent["match_rate"] * 0.3,
                {
                    "parent_field": parent["field"],
                    "match_rate": parent["match_rate"],
                    "checked": parent["checked"],
                    "documents": collection.count,
                    "queries_needing_ancestors": subtree_queries,
                },
                f"{collection.name}.{parent['field']} points at other {collection.name} documents "
                f"({parent['matched']}/{parent['checked']} sampled values matched): a tree stored as parent "
                "references. An 'ancestors' array and a 'path' string, filled from the parents, find a node's "
                "ancestors or its whole subtree in one indexed query instead of one query per level.",
                tradeoffs=[
                    "Moving a subtree rewrites the ancestors of every node below it.",
                    "Each node stores its ancestors: depth times the id size per document.",
                ],
                migration={
                    "step": "tree",
                    "collection": collection.name,
                    "parent_field": parent["field"].rstrip("[]"),
                    "ancestors_field": "ancestors",
                    "path_field": "path",
                },
            )
        ]
