"""pre_aggregation: aggregates of related documents stored in the document."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mongopat.guide.placeholders import OMIT, param
from mongopat.guide.reads import ReadPlan, Stage, without_overlaps
from mongopat.guide.writes import WritePlan, changed, command, insert_one
from mongopat.migrate.operations.aggregates import (
    aggregate_rows,
    aggregates_of,
    empty_aggregates,
    fields_read,
    server_aggregates,
    server_computes_alike,
)
from mongopat.migrate.operations.base import (
    DICT,
    STR,
    AddsFields,
    Param,
    RangeValues,
    Step,
    StepError,
    StepType,
    local_values,
)
from mongopat.migrate.operations.server_order import declined_key
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

# Inside the server a document's key is looked up in a table of the range's aggregates (``let`` variables,
# MongoDB 5.0) by ``$indexOfArray``, and the related documents are grouped by ``$group``: their equality is
# Python's dict lookup (numbers equal across int, long and double) for these BSON types only. A document
# whose key is of another type (a boolean, NaN, Decimal128, null, a document, an array) is declined to the
# client side; a related document whose key is of another type is never among a taken key's (Python keys
# it apart, or it is NaN).
KEY_TYPES = ["string", "objectId", "int", "long", "double", "date"]
KEYS, AGGREGATES = "mongopat_keys", "mongopat_aggregates"
_RELATED = "__mongopat_related"


class Operation(AddsFields):
    plan_order = 0
    type = StepType(
        "pre_aggregation",
        "document",
        {
            "from": Param(STR),
            "local": Param(STR, False, "_id"),
            "foreign": Param(STR),
            "compute": Param(DICT),
            "into": Param(STR),
        },
        "store aggregates of related documents (pre-aggregation pattern)",
    )

    def rewrite_read(self, read: ReadPlan, step: Step, evidence: Evidence) -> None:
        if read.collection != step.collection:
            return
        p = step.params
        stage = read.find("aggregate")
        aggregate = stage.spec if stage is not None else None
        if aggregate is None or (aggregate.source, aggregate.local, aggregate.foreign) != (
            p["from"],
            p["local"],
            p["foreign"],
        ):
            return
        if any(p["compute"].get(name) != spec for name, spec in aggregate.compute.items()):
            read.notes.append(f"the read computes aggregates of {p['from']} the step does not store: it stays computed")
            return
        outputs = {name: f"${p['into']}.{name}" for name in aggregate.compute}
        assert stage is not None  # found above: it holds the aggregate
        read.stages[read.stages.index(stage)] = Stage("reshape", [{"$set": outputs}], list(outputs))
        read.notes.append(f"the aggregates of {p['from']} are read from `{p['into']}`, not computed on every read")

    def writes(self, step: Step, evidence: Evidence) -> list[WritePlan]:
        plans = super().writes(step, evidence)
        per_sec = evidence.per_sec(step.params["from"], "inserts")
        if per_sec:
            plans.append(self._related_insert(step, per_sec))
        per_sec = evidence.per_sec(step.params["from"], "updates")
        if per_sec:
            plans.append(self._related_change(step, per_sec))
        per_sec = evidence.per_sec(step.params["from"], "deletes")
        if per_sec:
            plans.append(self._related_change(step, per_sec, delete=True))
        return plans

    def _related_change(self, step: Step, per_sec: float, delete: bool = False) -> WritePlan:
        """An update of a field the aggregates read, or a delete, adjusts them: sums and counts by the
        difference it makes, the others recomputed over the related documents left."""
        p = step.params
        source, into, foreign = p["from"], p["into"], p["foreign"]
        fields = [] if delete else list(dict.fromkeys(f for spec in p["compute"].values() for f in fields_read(spec)))
        if delete:
            before = [command(source, "deleteOne", filter={"_id": param("_id")})]
        else:
            changes = {name: param(name) for name in fields}
            before = [command(source, "updateOne", filter={"_id": param("_id")}, update={"$set": changes})]
        adjust: dict[str, Any] = {}
        for name, spec in p["compute"].items():
            if next(iter(spec)) in ("sum", "count"):
                adjust.setdefault("$inc", {})[f"{into}.{name}"] = param(f"{name}Change")
            else:
                adjust.setdefault("$set", {})[f"{into}.{name}"] = param(f"{name}Value")
        after = [*before, command(step.collection, "updateOne", filter={p["local"]: param(foreign)}, update=adjust)]

        def binder(sample: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
            old = sample.document
            key = get_path(old, foreign)
            new = None if delete else {**old, **{name: _other(old.get(name), p["compute"]) for name in fields}}
            values = {"_id": old["_id"], **{name: new[name] for name in fields}} if new else {"_id": old["_id"]}
            rows = [row for row in sample.after[source].find({foreign: key}) if row["_id"] != old["_id"]]
            fresh = aggregate_rows([*rows, *([new] if new else [])], foreign, p["compute"])
            empty = empty_aggregates(p["compute"])
            previous = aggregate_rows([old], foreign, p["compute"]).get(hashable_key(key), empty)
            current = aggregate_rows([new], foreign, p["compute"]).get(hashable_key(key), empty) if new else empty
            after_values: dict[str, Any] = {**values, foreign: key}
            for name, spec in p["compute"].items():
                if next(iter(spec)) in ("sum", "count"):
                    after_values[f"{name}Change"] = current[name] - previous[name]
                else:
                    after_values[f"{name}Value"] = fresh.get(hashable_key(key), empty)[name]
            return values, after_values

        descriptions = {"_id": f"the {source} document's _id", foreign: f"its {foreign}"}
        descriptions.update({name: f"its new {name}" for name in fields})
        verb = "delete" if delete else "update"
        for name, spec in p["compute"].items():
            if next(iter(spec)) in ("sum", "count"):
                descriptions[f"{name}Change"] = f"how much the {verb} changes {name} (new value minus old)"
            else:
                descriptions[f"{name}Value"] = f"{name} recomputed over the related documents"
        what = "a document" if delete else ", ".join(f"`{f}`" for f in fields) + " of a document"
        return WritePlan(
            source,
            "delete_related" if delete else "update_related",
            f"{verb} {what} of {source}",
            before,
            after,
            descriptions,
            per_sec,
            {"before": 1, "after": 2},
            binder,
        )

    def _related_insert(self, step: Step, per_sec: float) -> WritePlan:
        """An insert of a related document updates the stored aggregates of the document it belongs to."""
        p = step.params
        source, into = p["from"], p["into"]
        increments: dict[str, Any] = {}
        lows: dict[str, Any] = {}
        highs: dict[str, Any] = {}
        recomputed: dict[str, Any] = {}
        descriptions: dict[str, str] = {"document": f"the new {source} document", p["foreign"]: f"its {p['foreign']}"}
        for name, spec in p["compute"].items():
            op, argument = next(iter(spec.items()))
            if op in ("sum", "count"):
                increments[f"{into}.{name}"] = param(name)
                descriptions[name] = (
                    f"the document's {argument}" if op == "sum" else f"1 when the document matches {argument!r}, else 0"
                )
            elif op in ("min", "max"):
                (lows if op == "min" else highs)[f"{into}.{name}"] = param(name)
                descriptions[name] = f"the document's {argument}"
            else:
                recomputed[f"{into}.{name}"] = param(name, compute=f"avg of {argument} over {source}")
                descriptions[name] = f"the average of {argument} over the related documents, the new one included"
        update: dict[str, Any] = {}
        for operator, values in (("$inc", increments), ("$min", lows), ("$max", highs), ("$set", recomputed)):
            if values:
                update[operator] = values
        after = [
            command(source, "insertOne", document=param("document")),
            command(step.collection, "updateOne", filter={p["local"]: param(p["foreign"])}, update=update),
        ]

        def binder(sample: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
            document = sample.fresh()
            key = get_path(document, p["foreign"])
            values: dict[str, Any] = {"document": document, p["foreign"]: key}
            for name, spec in p["compute"].items():
                op, argument = next(iter(spec.items()))
                if op == "avg":
                    rows = [*sample.after[source].find({p["foreign"]: key}), document]
                    values[name] = aggregate_rows(rows, p["foreign"], p["compute"])[hashable_key(key)][name]
                else:  # the document's own count, number (0 for a sum without one), or none for $min/$max
                    own = aggregates_of([document], {name: spec})[name]
                    values[name] = OMIT if own is None else own
            return {"document": document}, values

        return WritePlan(
            source,
            "insert_related",
            f"insert a document into {source}",
            [insert_one(source)],
            after,
            descriptions,
            per_sec,
            {"before": 1, "after": 2},
            binder,
        )

    def new_shape(self, step: Step) -> str:
        p = step.params
        return f"`{p['into']}` = aggregates of its {p['from']} ({', '.join(p['compute'])})"

    def deploy(self, step: Step) -> dict[str, list[str]]:
        p = step.params
        return {
            "before": [
                f"`{step.collection}`: inserts set `{p['into']}` (zeros for a new document)",
                f"`{p['from']}`: every insert updates `{p['into']}` of its {step.collection} document; updates and "
                f"deletes of {p['from']} adjust it the same way",
            ],
            "during": [f"`{step.collection}`: compute the aggregates on read where `{p['into']}` is missing"],
            "after": [f"`{step.collection}`: read `{p['into']}`"],
        }

    def context(self, step: Step, documents: list[Document] | None, source: ContextSource) -> Context:
        """The aggregates of each document's rows, computed here from the rows (projected to the fields
        the aggregates read) on every backend: one arithmetic, the guide's too."""
        p = step.params
        fields = list(dict.fromkeys(f for spec in p["compute"].values() for f in fields_read(spec)))
        rows = source.documents(p["from"], p["foreign"], local_values(documents, p["local"]), fields)
        return Context(aggregates=aggregate_rows(rows, p["foreign"], p["compute"]))

    def read_fields(self, step: Step) -> frozenset[str] | None:
        return heads(step.params["local"], step.params["into"])

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        key = get_path(doc, step.params["local"])
        results = ctx.aggregates.get(hashable_key(key))
        stored = dict(results) if results is not None else empty_aggregates(step.params["compute"])
        set_path(doc, step.params["into"], stored)
        return Result(doc)

    # -- inside the server: a range's aggregates computed by the server, sent back as a table --------

    def server_stages(self, step: Step) -> list[dict[str, Any]] | None:
        p = step.params
        # An output's name is a key of the object the stages make ($arrayToObject; a literal in the settling).
        names_taken = all(plain(name) and "." not in name for name in p["compute"])
        if not plain(p["local"], p["into"]) or not names_taken or not server_computes_alike(p["compute"]):
            return None
        # A nested key is read as get_path reads it (never through an array), the aggregates set as
        # set_path sets them.
        found = {"$indexOfArray": [f"$${KEYS}", value_at(p["local"])]}
        empty = {"$literal": empty_aggregates(p["compute"])}
        # A key's aggregates travel as their values alone, in compute's order: the names are put back here.
        names = {"$literal": list(p["compute"])}
        values = {"$arrayElemAt": [f"$${AGGREGATES}", "$$at"]}
        made = {"$arrayToObject": {"$zip": {"inputs": [names, values]}}}
        stored = {"$cond": [{"$gte": ["$$at", 0]}, made, empty]}
        return set_stages(p["into"], {"$let": {"vars": {"at": found}, "in": stored}})

    def server_settle_stages(self, step: Step) -> list[dict[str, Any]] | None:
        """The aggregates computed inside the server from the related documents as they are by then
        (``$lookup``, in ``_id`` order)."""
        p = step.params
        if self.server_stages(step) is None:
            return None
        return [
            self._related(step, p["local"]),
            *set_stages(p["into"], server_aggregates(p["compute"], f"${_RELATED}")),
            {"$unset": _RELATED},
        ]

    def server_declines(self, step: Step) -> Any:
        return declined_key(value_at(step.params["local"]), KEY_TYPES)

    def server_range_key(self, step: Step) -> Any:
        return value_at(step.params["local"])

    def server_range_stages(self, step: Step) -> list[dict[str, Any]]:
        """Each key's aggregates computed by the server from its related documents, as the backup's
        aggregation computes them: only the keys that have some, and their aggregates' values (``a``, in
        compute's order), travel (the others get the empty aggregates in the rewrite)."""
        outputs = server_aggregates(step.params["compute"], f"${_RELATED}")
        return [
            self._related(step, "_id"),
            {"$match": {_RELATED: {"$ne": []}}},
            {"$project": {"_id": 1, "a": list(outputs.values())}},
        ]

    def server_range_values(self, step: Step, groups: list[Document], source: ContextSource) -> RangeValues:
        variables = {
            KEYS: {"$literal": [group["_id"] for group in groups]},
            AGGREGATES: {"$literal": [group["a"] for group in groups]},
        }
        return RangeValues(variables, True)

    def _related(self, step: Step, local: str) -> dict[str, Any]:
        """``$lookup`` of the related documents of ``local`` a taken key can have (see KEY_TYPES), in ``_id``
        order, with the fields the aggregates read. Run on the step's collection, it compares strings as
        the rewrite does, whatever the related collection's default collation."""
        p = step.params
        typed = {"$expr": {"$in": [{"$type": f"${p['foreign']}"}, KEY_TYPES]}}
        read = (name for spec in p["compute"].values() for name in fields_read(spec))
        projection = without_overlaps(dict.fromkeys([p["foreign"], *read], 1))
        pipeline = [{"$match": typed}, {"$sort": {"_id": 1}}, {"$project": projection}]
        lookup = {"from": p["from"], "localField": local, "foreignField": p["foreign"], "pipeline": pipeline}
        return {"$lookup": {**lookup, "as": _RELATED}}

    def check(self, params: dict[str, Any]) -> None:
        for output, spec in params["compute"].items():
            if (
                not isinstance(spec, dict)
                or len(spec) != 1
                or next(iter(spec)) not in ("sum", "count", "avg", "min", "max")
            ):
                raise StepError(f"pre_aggregation: compute.{output} must be one of sum, count, avg, min, max")

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {p["into"]}

    def added(self, step: Step) -> list[str]:
        return [step.params["into"]]


def _other(value: Any, compute: dict[str, dict[str, Any]]) -> Any:
    """Another value for a field the aggregates read: a number moves, a counted condition flips."""
    for spec in compute.values():
        op, argument = next(iter(spec.items()))
        if op == "count" and isinstance(argument, dict) and value in argument.values():
            return f"not {value}"
        if op == "count" and isinstance(argument, dict) and argument:
            wanted = next((v for v in argument.values()), None)
            if isinstance(value, type(wanted)):
                return wanted
    return changed(value)
