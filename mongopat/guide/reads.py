"""A read as an aggregation pipeline made of parts a step can rewrite, and today's read built from a query of
the access-pattern file.

The pipeline of a :class:`ReadPlan` is its ``$match`` followed by its stages, each tagged with what it
does (``lookup``, ``aggregate``, ``derive``, ``embed``, ``sort``, ``limit``, ``project``, or ``reshape``:
stages a step adds to give documents of the new shape back the fields today's read returns). A step's
``rewrite_read`` replaces the match with one on the new shape's fields (so that indexes serve it) and adds
reshape stages, or replaces a part the new shape makes unnecessary (a join read from copied fields, a sum
read from a stored total).

Every form here runs on MongoDB 5.0 and on mongomock, so that the test suite can prove each rewrite by
execution: sums over an array and sorted embedded arrays are computed with ``$unwind`` and ``$group``
(mongomock returns 0 for a ``$sum`` of ``$map`` and has no ``$sortArray``, which MongoDB 5.0 lacks too);
helper fields are removed with an exclusion ``$project`` (mongomock has no ``$unset`` stage).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mongopat.expressions import BinaryOp, Expression, Number, Path, strip_prefix
from mongopat.guide.placeholders import param, range_params

if TYPE_CHECKING:  # the access file's model is read only in type hints: a migration never loads its parser
    from mongopat.access.model import Aggregate, Embed, Lookup, Query


@dataclass
class Stage:
    kind: str  # match, reshape, lookup, aggregate, derive, embed, sort, limit, project
    stages: list[dict[str, Any]]
    spec: Any = None  # the part of the query it renders (Lookup, Aggregate, Embed, (name, Expression))
    reorders: bool = False  # documents come out of a $group: in no particular order


@dataclass
class ReadPlan:
    collection: str
    query: Query
    match: dict[str, Any]
    stages: list[Stage] = field(default_factory=list)
    # Parameter name -> the field of a document its value is taken from (the proof binds them so).
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Fields whose values a step changes on purpose (a field it sets or removes): the proof skips them.
    differs: set[str] = field(default_factory=set)
    # Joined fields that come back as the document itself rather than a one-element array.
    joined: set[str] = field(default_factory=set)
    # Cost in the new shape: documents examined per document of today's shape (a bucket holds many), plus
    # ``overlap`` (the buckets at a range's ends), plus ``extra`` per returned document (elements joined).
    scale: float = 1.0
    overlap: float = 0.0
    extra: float = 0.0
    # The collection whose figures (documents, distinct values) are the read's: another when a step moves
    # the documents as they are to a collection of another name.
    counted_as: str | None = None
    # Whether the indexes of the read's collection today serve it after the step (not in a collection the
    # step creates: a time-series collection has none of the old one's).
    keeps_indexes: bool = True

    def pipeline(self) -> list[dict[str, Any]]:
        stages: list[dict[str, Any]] = [{"$match": self.match}] if self.match else []
        for stage in self.stages:
            stages.extend(stage.stages)
        return copy.deepcopy(stages)

    def copy(self) -> ReadPlan:
        return copy.deepcopy(self)

    # -- what the read touches -----------------------------------------------------------------------

    def returns(self, path: str) -> bool:
        """Whether the documents the read returns include ``path`` (all fields when it projects none)."""
        fields = self.query.fields
        return not fields or any(_related(path, name) for name in fields)

    def depends_on(self, path: str) -> bool:
        """Whether the read filters, sorts, joins or computes on ``path``."""
        used = self.match_fields()
        for stage in self.stages:
            if stage.kind == "sort":
                used.extend(stage.spec)
            elif stage.kind == "derive":
                used.extend(stage.spec[1].paths())
            elif stage.kind in ("lookup", "aggregate"):
                used.append(stage.spec.local)
            elif stage.kind == "embed":
                used.append(stage.spec.field)
        return any(_related(path, name) for name in used)

    def uses(self, path: str) -> bool:
        return self.returns(path) or self.depends_on(path)

    def match_fields(self) -> list[str]:
        found: list[str] = []
        _match_fields(self.match, found)
        return found

    def find(self, kind: str) -> Stage | None:
        return next((stage for stage in self.stages if stage.kind == kind), None)

    # -- what steps change -----------------------------------------------------------------------------

    def tidy(self) -> None:
        """Drop a sort that repeats the one before it with nothing in between that reorders documents."""
        kept: list[Stage] = []
        reordered = True
        for stage in self.stages:
            if stage.kind == "sort":
                if not reordered:
                    continue
                reordered = False
            elif stage.reorders:
                reordered = True
            kept.append(stage)
        self.stages = kept

    def insert_early(self, stage: Stage) -> None:
        """A stage every later part needs: right after the match and the reshapes before it."""
        position = 0
        while position < len(self.stages) and self.stages[position].kind == "reshape":
            position += 1
        self.stages.insert(position, stage)

    def insert_late(self, stage: Stage) -> None:
        """A stage only the returned documents need: after the sort and limit, before the projection; the
        sort is applied again after a stage that reorders."""
        position = len(self.stages)
        if self.stages and self.stages[-1].kind == "project":
            position -= 1
        self.stages.insert(position, stage)
        sort = self.find("sort")
        if stage.reorders and sort is not None:
            self.stages.insert(position + 1, Stage("sort", copy.deepcopy(sort.stages), sort.spec))

    def reshape(self, stages: list[dict[str, Any]], restores: list[str], reorders: bool = False) -> None:
        """Give the new shape's documents back ``restores``: early when the read filters, sorts or computes
        on one of them, late (on the returned documents only) when it only returns them."""
        stage = Stage("reshape", stages, restores, reorders)
        if any(self.depends_on(name) for name in restores):
            self.insert_early(stage)
        else:
            self.insert_late(stage)


def rename_in_match(match: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """``match`` with conditions on ``old`` (and its sub-paths) on ``new`` instead."""
    renamed: dict[str, Any] = {}
    for key, value in match.items():
        if key in ("$and", "$or", "$nor") and isinstance(value, list):
            renamed[key] = [rename_in_match(item, old, new) for item in value]
        elif key == old or key.startswith(old + "."):
            renamed[new + key[len(old) :]] = value
        else:
            renamed[key] = value
    return renamed


def _related(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _match_fields(node: Any, found: list[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("$and", "$or", "$nor") and isinstance(value, list):
                for item in value:
                    _match_fields(item, found)
            elif not key.startswith("$"):
                found.append(key)
                if isinstance(value, dict) and "$elemMatch" in value and isinstance(value["$elemMatch"], dict):
                    inner: list[str] = []
                    _match_fields(value["$elemMatch"], inner)
                    found.extend(f"{key}.{name}" for name in inner)


# -- today's read -----------------------------------------------------------------------------------------


def condition(name: str, op: str) -> dict[str, Any] | Any:
    """The ``$match`` condition of one filter entry of the access file, its value a placeholder."""
    if op == "eq":
        return param(name)
    if op == "range":
        return range_params(name)
    if op == "exists":
        return {"$exists": True}
    if op == "geo":
        return {"$geoWithin": param(name)}
    return {f"${op}": param(name)}


def today_read(collection: str, query: Query) -> ReadPlan:
    """The read as the application runs it before any migration, as one pipeline."""
    match: dict[str, Any] = {}
    for name, op in query.filter.items():
        if op == "text":
            match["$text"] = {"$search": param(name)}
        else:
            match[name] = condition(name, op)
    plan = ReadPlan(collection, query, match, sources={name: name for name in query.filter})
    sorted_on = set(query.sort)
    late: list[Stage] = []
    for name, expression in query.derive.items():
        stage = derive_stage(name, expression)
        (plan.stages if name in sorted_on else late).append(stage)
    if query.sort:
        plan.stages.append(Stage("sort", [{"$sort": dict(query.sort)}], dict(query.sort)))
    if query.limit:
        plan.stages.append(Stage("limit", [{"$limit": query.limit}], query.limit))
    if query.lookup is not None:
        plan.stages.append(lookup_stage(query.lookup))
    if query.aggregate is not None:
        plan.stages.append(aggregate_stage(query.aggregate))
    plan.stages.extend(late)
    if query.embed is not None and (query.embed.sort or query.embed.limit):
        plan.stages.append(embed_stage(query.embed))
    sort = plan.find("sort")
    if sort is not None and any(stage.reorders for stage in plan.stages[plan.stages.index(sort) + 1 :]):
        plan.stages.append(Stage("sort", [{"$sort": dict(query.sort)}], dict(query.sort)))
    if query.fields:
        projection = {name: 1 for name in query.fields}
        for name in query.derive:
            projection[name] = 1
        if query.lookup is not None:
            projection[query.lookup.alias] = 1
        if query.aggregate is not None:
            projection.update({name: 1 for name in query.aggregate.compute})
        if query.embed is not None:
            projection[query.embed.field] = 1
        plan.stages.append(Stage("project", [{"$project": without_overlaps(projection)}], list(projection)))
    return plan


def without_overlaps(projection: dict[str, int]) -> dict[str, int]:
    """``projection`` without the paths inside another one it holds: ``{"a": 1, "a.b": 1}`` is a path
    collision for MongoDB, and ``a`` reads ``a.b`` with it."""
    return {
        name: value
        for name, value in projection.items()
        if not any(name != other and name.startswith(other + ".") for other in projection)
    }


def lookup_stage(lookup: Lookup) -> Stage:
    alias = lookup.alias
    stages: list[dict[str, Any]] = [
        {"$lookup": {"from": lookup.source, "localField": lookup.local, "foreignField": lookup.foreign, "as": alias}}
    ]
    if lookup.fields:
        fields = {name: f"$$joined.{name}" for name in lookup.fields}
        stages.append({"$set": {alias: {"$map": {"input": f"${alias}", "as": "joined", "in": fields}}}})
    return Stage("lookup", stages, lookup)


_RELATED = "_related"


def aggregate_stage(aggregate: Aggregate) -> Stage:
    outputs: dict[str, Any] = {}
    for name, spec in aggregate.compute.items():
        op, argument = next(iter(spec.items()))
        if op == "count":
            if isinstance(argument, dict) and argument:
                conditions = [{"$eq": [f"$$related.{key}", value]} for key, value in argument.items()]
                matching = {"$filter": {"input": f"${_RELATED}", "as": "related", "cond": {"$and": conditions}}}
                outputs[name] = {"$size": matching}
            else:
                outputs[name] = {"$size": f"${_RELATED}"}
        else:
            outputs[name] = {f"${op}": f"${_RELATED}.{argument}"}
    stages = [
        {
            "$lookup": {
                "from": aggregate.source,
                "localField": aggregate.local,
                "foreignField": aggregate.foreign,
                "as": _RELATED,
            }
        },
        {"$set": outputs},
        {"$project": {_RELATED: 0}},
    ]
    return Stage("aggregate", stages, aggregate)


def expression_stages(name: str, expression: Expression) -> tuple[list[dict[str, Any]], bool]:
    """Stages that set ``name`` to the value of ``expression``, and whether they reorder documents."""
    prefix = expression.array_prefix()
    if expression.function is None or prefix is None:
        return [{"$set": {name: _arithmetic(expression.body, "$", expression.function)}}], False
    if expression.function == "count":
        return [{"$set": {name: {"$size": {"$ifNull": [f"${prefix}", []]}}}}], False
    helper = "_derive"
    body = strip_prefix(expression.body, prefix)
    value = _arithmetic(body, f"${helper}.", expression.function)
    stages = [
        {"$set": {helper: f"${prefix}"}},
        {"$unwind": {"path": f"${helper}", "preserveNullAndEmptyArrays": True}},
        {"$group": {"_id": "$_id", "_doc": {"$first": "$$ROOT"}, "_value": {f"${expression.function}": value}}},
        {"$set": {f"_doc.{name}": "$_value"}},
        {"$replaceRoot": {"newRoot": "$_doc"}},
        {"$project": {helper: 0}},
    ]
    return stages, True


def derive_stage(name: str, expression: Expression) -> Stage:
    stages, reorders = expression_stages(name, expression)
    return Stage("derive", stages, (name, expression), reorders)


_OPERATORS = {"+": "$add", "-": "$subtract", "*": "$multiply", "/": "$divide"}


def _arithmetic(node: Any, prefix: str, function: str | None) -> Any:
    if isinstance(node, Number):
        return node.value
    if isinstance(node, Path):
        # A missing operand counts 0 in a sum, as it does when mongopat computes the value.
        reference = f"{prefix}{node.path}"
        return {"$ifNull": [reference, 0]} if function == "sum" else reference
    assert isinstance(node, BinaryOp)
    left, right = _arithmetic(node.left, prefix, function), _arithmetic(node.right, prefix, function)
    return {_OPERATORS[node.op]: [left, right]}


def embed_stage(embed: Embed) -> Stage:
    """The embedded array sorted and cut as the read shows it."""
    name = embed.field
    if not embed.sort:
        return Stage("embed", [{"$set": {name: {"$slice": [f"${name}", embed.limit]}}}], embed)
    helper = "_embed"
    stages: list[dict[str, Any]] = [
        {"$set": {helper: f"${name}"}},
        {"$unwind": {"path": f"${helper}", "preserveNullAndEmptyArrays": True}},
        {"$sort": {f"{helper}.{key}": direction for key, direction in embed.sort.items()}},
        {"$group": {"_id": "$_id", "_doc": {"$first": "$$ROOT"}, helper: {"$push": f"${helper}"}}},
        {"$set": {f"_doc.{name}": {"$slice": [f"${helper}", embed.limit]} if embed.limit else f"${helper}"}},
        {"$replaceRoot": {"newRoot": "$_doc"}},
        {"$project": {helper: 0}},
    ]
    return Stage("embed", stages, embed, reorders=True)
