"""tree: ancestors and a path materialised from parent references."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bson import ObjectId

from mongopat.guide.placeholders import param
from mongopat.guide.reads import ReadPlan, Stage
from mongopat.guide.writes import WritePlan, command
from mongopat.migrate.operations.base import STR, AddsFields, Param, RangeValues, Step, StepType
from mongopat.migrate.operations.server_paths import plain, set_stages, value_at
from mongopat.migrate.transform_api import (
    Context,
    ContextSource,
    Document,
    Result,
    get_path,
    hashable_key,
    heads,
    set_path,
)

if TYPE_CHECKING:
    from mongopat.guide.cost import Evidence

# Inside the server a node's chain is walked up a table of the range's ancestors (their _ids and parents,
# ``let`` variables, MongoDB 5.0) looked up by ``$indexOfArray``. Its equality is Python's dict lookup, and
# ``$toString`` writes the path as Python's ``str`` does, for these BSON types only (a double's ``1.0``, a
# date, a boolean... read otherwise): a document whose _id or chain holds another is declined.
WALKED_TYPES = ["string", "objectId", "int", "long"]
NODES, PARENTS, UNWALKABLE, DEPTH = "mongopat_nodes", "mongopat_parents", "mongopat_unwalkable", "mongopat_depth"
CHAIN = "__mongopat_chain"


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
        parents = {hashable_key(d.get("_id")): get_path(d, field) for d in stored}
        parents.update((hashable_key(d.get("_id")), get_path(d, field)) for d in documents or [])
        return Context(parents=parents)

    def read_fields(self, step: Step) -> frozenset[str] | None:
        return heads("_id", *self.added(step))

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        ancestors = ancestors_of(doc.get("_id"), ctx.parents)
        set_path(doc, step.params["ancestors_field"], ancestors)
        set_path(doc, step.params["path_field"], "/" + "".join(f"{a}/" for a in [*ancestors, doc.get("_id")]))
        return Result(doc)

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["ancestors_field"], p["path_field"]}

    # -- inside the server: the range's ancestors, sent as a table -----------------------------------

    def server_stages(self, step: Step) -> list[dict[str, Any]] | None:
        p = step.params
        if not plain(p["parent_field"], p["ancestors_field"], p["path_field"]):
            return None
        found = {"$indexOfArray": [f"$${NODES}", "$$value.at"]}
        parent = {"$cond": [{"$gte": ["$$i", 0]}, {"$arrayElemAt": [f"$${PARENTS}", "$$i"]}, None]}
        return _materialised(step, {"$range": [0, f"$${DEPTH}"]}, {"$let": {"vars": {"i": found}, "in": parent}})

    def server_settle_stages(self, step: Step) -> list[dict[str, Any]] | None:
        """The chain read inside the server: ``$graphLookup`` up the parent references (the node at depth
        ``i`` is the one whose _id the ``i``-th value of the chain names), walked as the table is."""
        p = step.params
        if self.server_stages(step) is None:
            return None
        at_depth = {"$filter": {"input": f"${CHAIN}", "as": "n", "cond": {"$eq": ["$$n.d", "$$this"]}}}
        parent = {"$arrayElemAt": [{"$map": {"input": at_depth, "as": "n", "in": "$$n.v"}}, 0]}
        lookup = {
            "from": step.collection,
            "startWith": value_at(p["parent_field"]),
            "connectFromField": p["parent_field"],
            "connectToField": "_id",
            "as": CHAIN,
            "depthField": "d",
        }
        # Each node found kept as its depth and parent (read as get_path reads it: a parent under an array,
        # which $graphLookup follows too, ends the chain there): the chain's documents are not carried whole.
        parent_of = {"$ifNull": [value_at(p["parent_field"], "$$n."), None]}
        kept = {"$map": {"input": f"${CHAIN}", "as": "n", "in": {"d": "$$n.d", "v": parent_of}}}
        steps = {"$range": [0, {"$add": [{"$size": f"${CHAIN}"}, 1]}]}
        return [
            {"$graphLookup": lookup},
            {"$set": {CHAIN: kept}},
            *_materialised(step, steps, parent),
            {"$unset": CHAIN},
        ]

    def server_declines(self, step: Step) -> Any:
        parent = value_at(step.params["parent_field"])
        return {
            "$or": [
                {"$not": [{"$in": [{"$type": "$_id"}, WALKED_TYPES]}]},
                {"$not": [{"$in": [{"$type": parent}, [*WALKED_TYPES, "null", "missing"]]}]},
            ]
        }

    def server_range_key(self, step: Step) -> Any:
        return value_at(step.params["parent_field"])

    def server_leaves_untaken(self, step: Step) -> bool:
        return True  # a cycle raises, a chain through a double or a date is printed: Python's to do

    def server_range_values(self, step: Step, groups: list[Document], source: ContextSource) -> RangeValues:
        """The ancestors of the range's parents, read level by level from ``source`` (each node's _id and
        parent, as :meth:`context` reads the tree), with the parents whose chain the server cannot walk as
        Python does (a cycle, a value of another type on the way) and the longest chain."""
        field, keys = step.params["parent_field"], [group["_id"] for group in groups]
        # The part of the tree's parent map the range needs, keyed as context() keys it, and the nodes' _ids.
        parents: dict[Any, Any] = {}
        nodes: dict[Any, Any] = {}
        wanted = [key for key in keys if _walked(key)]
        asked = {hashable_key(key) for key in wanted}
        while wanted:
            found = list(source.documents(step.collection, "_id", wanted, [field]))
            wanted = []
            for node in found:
                parent = get_path(node, field)
                nodes[hashable_key(node["_id"])] = node["_id"]
                parents[hashable_key(node["_id"])] = parent
                if _walked(parent) and hashable_key(parent) not in asked:
                    asked.add(hashable_key(parent))
                    wanted.append(parent)
        lengths = [_chain_length(key, parents) for key in keys]
        variables = {
            NODES: {"$literal": list(nodes.values())},
            PARENTS: {"$literal": list(parents.values())},
            UNWALKABLE: {"$literal": [key for key, length in zip(keys, lengths, strict=True) if length is None]},
            DEPTH: max((length for length in lengths if length is not None), default=0),
        }
        takes = {"$not": [{"$in": [{"$ifNull": [f"${field}", None]}, f"$${UNWALKABLE}"]}]}
        return RangeValues(variables, takes)

    def added(self, step: Step) -> list[str]:
        return [step.params["ancestors_field"], step.params["path_field"]]


class TreeCycleError(ValueError):
    pass


def ancestors_of(node: Any, parents: dict[Any, Any]) -> list[Any]:
    """Root first; raises on a cycle. Unknown parents end the chain (they are kept as the root). ``parents``
    is keyed by :func:`hashable_key`, so a parent ``true`` is not the node ``1``."""
    return _walk_up(parents.get(hashable_key(node)), parents, {hashable_key(node)})[::-1]


def _walk_up(current: Any, parents: dict[Any, Any], seen: set[Any]) -> list[Any]:
    """The values from the parent ``current`` up ``parents`` until one is None or no node's, nearest
    first; raises on a value met again (``seen``: the keys already on the chain)."""
    chain: list[Any] = []
    while current is not None:
        key = hashable_key(current)
        if key in seen:
            raise TreeCycleError(f"cycle in the tree through {current!r}")
        seen.add(key)
        chain.append(current)
        current = parents.get(key)
    return chain


def _materialised(step: Step, steps: Any, parent: Any) -> list[dict[str, Any]]:
    """The stages setting the ancestors and the path: the chain walked from the document's parent, one
    value a step of ``steps`` (an array), ``parent`` giving the parent of ``$$value.at`` (null when it has
    none or is unknown: the chain ends, as in :func:`ancestors_of`)."""
    p = step.params
    start = {"c": [], "at": {"$ifNull": [value_at(p["parent_field"]), None]}}
    further = {"c": {"$concatArrays": ["$$value.c", ["$$value.at"]]}, "at": {"$ifNull": [parent, None]}}
    walk = {
        "$reduce": {
            "input": steps,
            "initialValue": start,
            "in": {"$cond": [{"$eq": ["$$value.at", None]}, "$$value", further]},
        }
    }
    ancestors = {"$reverseArray": {"$let": {"vars": {"walked": walk}, "in": "$$walked.c"}}}
    slashed = {"$concat": ["$$value", {"$toString": "$$this"}, "/"]}
    path = {
        "$reduce": {
            "input": {"$concatArrays": [value_at(p["ancestors_field"]), ["$_id"]]},
            "initialValue": "/",
            "in": slashed,
        }
    }
    return [*set_stages(p["ancestors_field"], ancestors), *set_stages(p["path_field"], path)]


def _walked(value: Any) -> bool:
    """Whether the server walks and prints ``value`` as Python does (see WALKED_TYPES)."""
    return isinstance(value, (str, ObjectId, int)) and not isinstance(value, bool)


def _chain_length(start: Any, parents: dict[Any, Any]) -> int | None:
    """The values of the chain from the parent ``start`` up ``parents`` (walked as :func:`ancestors_of`
    walks it), or None where the server cannot walk it as Python does: a cycle, or a value of a type it
    reads otherwise."""
    try:
        chain = _walk_up(start, parents, set())
    except TreeCycleError:
        return None
    return len(chain) if all(_walked(value) for value in chain) else None
