"""tree: ancestors and a path materialised from parent references."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mongopat.guide.placeholders import param
from mongopat.guide.reads import ReadPlan, Stage
from mongopat.guide.writes import WritePlan, command
from mongopat.migrate.operations.base import STR, AddsFields, Param, Step, StepType
from mongopat.migrate.transform_api import Context, ContextSource, Document, Result, hashable_key, heads

if TYPE_CHECKING:
    from mongopat.guide.cost import Evidence


class Operation(AddsFields):
    plan_order = 0
    type = StepType(
        "tree",
        "document",
        {
            "parent_field": Param(STR),
            "ancestors_field": Param(STR, False, "ancestors"),
            "path_field": Param(STR, False, "path"),
        },
        "materialise ancestors and a path from parent references (tree pattern)",
    )

    def today_read(self, read: ReadPlan, step: Step) -> None:
        """A read of a subtree by ancestors is, before the step, a walk down the parent references."""
        ancestors = step.params["ancestors_field"]
        if read.collection != step.collection or read.match.get(ancestors) != param(ancestors):
            return
        rest = {name: value for name, value in read.match.items() if name != ancestors}
        read.match = {"_id": param(ancestors)}
        walk: list[dict[str, Any]] = [
            {
                "$graphLookup": {
                    "from": step.collection,
                    "startWith": "$_id",
                    "connectFromField": "_id",
                    "connectToField": step.params["parent_field"],
                    "as": "_subtree",
                }
            },
            {"$unwind": "$_subtree"},
            {"$replaceRoot": {"newRoot": "$_subtree"}},
        ]
        if rest:
            walk.append({"$match": rest})
        read.insert_early(Stage("subtree", walk, rest))
        read.sources[ancestors] = step.params["parent_field"]  # a node that is someone's parent

    def rewrite_read(self, read: ReadPlan, step: Step, evidence: Evidence) -> None:
        stage = read.find("subtree")
        if read.collection != step.collection or stage is None:
            return
        ancestors = step.params["ancestors_field"]
        read.match = {ancestors: param(ancestors), **stage.spec}
        read.stages.remove(stage)
        read.notes.append(f"the subtree is one indexed match on `{ancestors}` instead of a walk of the tree")

    def update_write(self, step: Step, per_sec: float) -> WritePlan | None:
        """A node moved under another parent: its ancestors and path from the new parent's, and in one
        update pipeline its subtree's, whose ancestors above the node and path up to it are replaced."""
        p = step.params
        parent, ancestors, path = p["parent_field"], p["ancestors_field"], p["path_field"]
        before = [
            command(
                step.collection, "updateOne", filter={"_id": param("_id")}, update={"$set": {parent: param("parent")}}
            )
        ]
        below = {
            "$filter": {
                "input": f"${ancestors}",
                "as": "a",
                "cond": {"$eq": [{"$in": ["$$a", param("oldChain")]}, False]},
            }
        }
        subtree = [
            {
                "$set": {
                    ancestors: {"$concatArrays": [param("newChain"), below]},
                    # $substr counts bytes; it is what MongoDB 5.0 and mongomock both run.
                    path: {"$concat": [param("path"), {"$substr": [f"${path}", param("oldPathBytes"), 1 << 30]}]},
                }
            }
        ]
        after = [
            command(
                step.collection,
                "updateOne",
                filter={"_id": param("_id")},
                update={"$set": {parent: param("parent"), ancestors: param("ancestors"), path: param("path")}},
            ),
            command(step.collection, "updateMany", filter={ancestors: param("_id")}, update=subtree),
        ]

        def binder(sample: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
            # The sampled node's parent, which has a subtree to take along (the sampled node itself for a root).
            moved = sample.document.get(parent)
            node = sample.after[step.collection].find_one({"_id": sample.document["_id"] if moved is None else moved})
            if node is None or not isinstance(node.get(path), str):
                return None
            # A new parent outside the node's subtree, other than its parent.
            outside = {"_id": {"$ne": node["_id"]}, ancestors: {"$ne": node["_id"]}}
            candidates = [c for c in sample.after[step.collection].find(outside) if c["_id"] != node.get(parent)]
            if not candidates:
                return None
            new_parent = sample.rng.choice(candidates)
            chain = [*new_parent.get(ancestors, []), new_parent["_id"]]
            new_path = f"{new_parent[path]}{node['_id']}/"
            values = {"_id": node["_id"], "parent": new_parent["_id"]}
            return values, {
                **values,
                "ancestors": chain,
                "path": new_path,
                "newChain": [*chain, node["_id"]],
                "oldChain": [*node.get(ancestors, []), node["_id"]],
                "oldPathBytes": len(node[path].encode()),
            }

        return WritePlan(
            step.collection,
            "move_node",
            f"move a node of {step.collection} under another parent",
            before,
            after,
            {
                "_id": "the node's _id",
                "parent": "the new parent's _id",
                "ancestors": f"the new parent's `{ancestors}` followed by the new parent's _id",
                "path": f"the new parent's `{path}` followed by the node's _id and '/'",
                "newChain": "`ancestors` followed by the node's _id",
                "oldChain": f"the node's `{ancestors}` before the move, followed by its _id",
                "oldPathBytes": f"the length in UTF-8 bytes of the node's `{path}` before the move",
            },
            per_sec,
            {"before": 1, "after": None},
            binder,
        )

    def new_shape(self, step: Step) -> str:
        p = step.params
        return (
            f"`{p['ancestors_field']}` = the parent's `{p['ancestors_field']}` followed by the parent's _id, and "
            f"`{p['path_field']}` = those ids joined by '/'"
        )

    def deploy(self, step: Step) -> dict[str, list[str]]:
        p = step.params
        return {
            "before": [
                f"`{step.collection}`: inserts set `{p['ancestors_field']}` and `{p['path_field']}` from the parent",
                f"`{step.collection}`: moving a node (a new `{p['parent_field']}`) rewrites `{p['ancestors_field']}` "
                "and the path of its whole subtree",
            ],
            "during": [f"`{step.collection}`: walk the parent references where `{p['ancestors_field']}` is missing"],
            "after": [f"`{step.collection}`: read subtrees by `{p['ancestors_field']}`"],
        }

    def context(self, step: Step, documents: list[Document] | None, source: ContextSource) -> Context:
        """The whole tree's parent map (one entry a node), with the documents' own parents: a document not
        stored yet (the guide's) has its place too."""
        field = step.params["parent_field"]
        stored = source.documents(step.collection, None, None, [field])
        parents = {hashable_key(d.get("_id")): d.get(field) for d in stored}
        parents.update((hashable_key(d.get("_id")), d.get(field)) for d in documents or [])
        return Context(parents=parents)

    def read_fields(self, step: Step) -> frozenset[str] | None:
        return heads("_id", *self.added(step))

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        ancestors = ancestors_of(doc.get("_id"), ctx.parents)
        doc[step.params["ancestors_field"]] = ancestors
        doc[step.params["path_field"]] = "/" + "".join(f"{a}/" for a in [*ancestors, doc.get("_id")])
        return Result(doc)

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["ancestors_field"], p["path_field"]}

    def added(self, step: Step) -> list[str]:
        return [step.params["ancestors_field"], step.params["path_field"]]


class TreeCycleError(ValueError):
    pass


def ancestors_of(node: Any, parents: dict[Any, Any]) -> list[Any]:
    """Root first; raises on a cycle. Unknown parents end the chain (they are kept as the root)."""
    chain: list[Any] = []
    seen = {node}
    current = parents.get(node)
    while current is not None:
        if current in seen:
            raise TreeCycleError(f"cycle in the tree through {current!r}")
        seen.add(current)
        chain.append(current)
        current = parents.get(current)
    return chain[::-1]
