"""The proof of a guide by execution: today's read on the data before a migration and the rewritten read on
the data after it must return the same documents; today's write applied before and the rewritten write
applied after must leave the reads equal again.

Parameters are bound from sampled documents (a range from a document's value to one hour, or one unit,
past it). Results are compared document by document, paired by ``_id``: every field today's read returns
must have the same value after (more fields are allowed; fields a step changes on purpose are skipped; a
joined document may come back as the document itself rather than a one-element array); a sorted read must
return its documents in the same order of its sort keys. Doubles are compared to 12 significant digits
(a sum computed by the server and one stored by the migration may differ in the last bit).
"""

from __future__ import annotations

import copy
import datetime
import decimal
import math
import random
import re
from dataclasses import dataclass
from typing import Any

from bson.decimal128 import Decimal128
from pymongo.errors import PyMongoError

from mongopat.guide.build import MigrationGuide, ReadGuide
from mongopat.guide.placeholders import bind, names
from mongopat.guide.reads import ReadPlan
from mongopat.guide.sample import Sample
from mongopat.guide.writes import WritePlan, run
from mongopat.migrate.transform_api import get_path

_MISSING = "<missing>"
UNBOUND = object()  # a parameter the sampled document has no value for
COUNTER_WRITES = 2000


@dataclass
class Difference:
    migration: str
    kind: str  # read, write
    name: str
    message: str
    parameters: dict[str, Any]

    def __str__(self) -> str:
        return f"{self.migration}: {self.kind} {self.name}: {self.message}"


@dataclass
class ProofResult:
    reads_compared: int = 0
    documents_compared: int = 0
    writes_applied: int = 0
    differences: list[Difference] | None = None
    skipped: list[str] | None = None


def prove(
    guide: MigrationGuide, before_db: Any, after_db: Any, samples: int = 3, seed: int = 0, writes: bool = True
) -> ProofResult:
    """Compare every read of ``guide`` on ``before_db`` and ``after_db`` for ``samples`` sampled documents,
    then apply each write and compare the reads again. The databases are modified by the writes."""
    rng = random.Random(seed)
    result = ProofResult(differences=[], skipped=[])
    migration = guide.migration.id
    for read in guide.reads:
        where = binding_filter(read.before)
        documents = sample_documents(before_db, read.before.collection, samples, rng, where)
        # No document has a value for every parameter: bind those it has, and leave out the conditions of the
        # others (in both reads alike).
        documents = documents or sample_documents(before_db, read.before.collection, samples, rng)
        for document in documents:
            _compare_read(read, document, before_db, after_db, migration, result)
    if not writes:
        return result
    for write in guide.writes:
        if write.binder is None:
            result.skipped.append(f"{write.operation} on {write.collection}: no binder")
            continue
        documents = sample_documents(before_db, write.collection, 2, rng, write.sample_filter)
        if write.sample_filter:  # and one document of any kind (an attribute it lacks is added)
            documents += sample_documents(before_db, write.collection, 1, rng)
        for document in documents:
            bound = write.binder(Sample(before_db, after_db, document, rng))
            if bound is None:
                continue
            before_values, after_values = bound
            if write.approximate:
                _prove_counter(write, before_values, after_values, before_db, after_db, rng, migration, result)
                continue
            run(before_db, bind(write.before, before_values))
            try:
                run(after_db, bind(write.after, after_values))
            except PyMongoError as exc:  # refused by the new shape's database (a validator): a difference
                message = f"the write failed after the migration: {_first_line(exc)}"
                result.differences.append(Difference(migration, "write", write.operation, message, after_values))
                continue
            result.writes_applied += 1
            written = before_values.get("document") or document
            for read in guide.reads:
                again = []
                if read.before.collection == write.collection:
                    found = before_db[write.collection].find_one({"_id": written.get("_id")})
                    again = [found if found is not None else written]  # a deleted one's values still bind
                again += related_documents(guide, read, write, written, before_db)
                again += sample_documents(before_db, read.before.collection, 1, rng, binding_filter(read.before))
                for candidate in again:
                    _compare_read(read, candidate, before_db, after_db, migration, result, after=write.operation)
    return result


def sample_documents(
    db: Any, collection: str, count: int, rng: random.Random, where: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Up to ``count`` documents picked at random among those matching ``where``."""
    where = where or {}
    # The _ids once, then the picks by _id: a skip per pick costs a sort of the collection each (on the
    # embedded engine, a copy of every document too).
    ids = sorted((doc["_id"] for doc in db[collection].find(where, {"_id": 1})), key=_id_order)
    if not ids:
        return []
    picks = [ids[i] for i in sorted(rng.sample(range(len(ids)), min(count, len(ids))))]
    return [doc for _id in picks for doc in db[collection].find({"_id": _id}).limit(1)]


def _id_order(value: Any) -> tuple[int, Any]:
    """``_id`` values in one order whatever their types (a number, a string, an ObjectId...)."""
    return (0, value) if isinstance(value, (int, float)) and not isinstance(value, bool) else (1, str(value))


def binding_filter(plan: ReadPlan) -> dict[str, Any]:
    """Documents that have a value for every parameter of ``plan``."""
    return {
        plan.sources.get(name, name): {"$exists": True, "$ne": None}
        for name, op in plan.query.filter.items()
        if op != "exists"
    }


def related_documents(
    guide: MigrationGuide, read: ReadGuide, write: WritePlan, written: dict[str, Any], db: Any
) -> list[dict[str, Any]]:
    """Documents of the read's collection that copy from or aggregate the written one (a customer's
    orders, a deal's account): the reads a write to another collection changes."""
    found: list[dict[str, Any]] = []
    for step in guide.migration.steps:
        source = step.params.get("from")
        if source != write.collection or read.before.collection != step.collection:
            continue
        key = get_path(written, step.params.get("foreign", "_id"))
        if key is not None:
            found.extend(db[step.collection].find({step.params.get("local", "_id"): key}).limit(2))
    return found


def read_values(plan: ReadPlan, document: dict[str, Any]) -> dict[str, Any] | None:
    """Values for the read's parameters taken from ``document`` (None when it has no value for one)."""
    values: dict[str, Any] = {}
    for name, op in plan.query.filter.items():
        value = get_path(document, plan.sources.get(name, name))
        if isinstance(value, list) and op not in ("in", "nin"):
            value = value[0] if value else None
        if value is None and op != "exists":
            values[name] = UNBOUND
            continue
        if op == "range":
            values[name] = (value, _past(value))
        elif op in ("in", "nin"):
            values[name] = value if isinstance(value, list) else [value]
        elif op == "regex":
            values[name] = "^" + re.escape(str(value)[:3])
        elif op == "gt":
            values[name] = _before(value)
        elif op == "lt":
            values[name] = _past(value)
        elif op == "text":
            values[name] = str(value).split()[0] if str(value).split() else str(value)
        elif op in ("geo", "elemMatch"):
            return None
        else:
            values[name] = value
    return values


def relax(pipeline: list[dict[str, Any]], unbound: set[str]) -> list[dict[str, Any]]:
    """``pipeline`` without the match conditions that use a parameter in ``unbound``."""
    if not unbound:
        return pipeline

    def uses(node: Any) -> bool:
        return any(name in unbound for name in names(node))

    def without(match: dict[str, Any]) -> dict[str, Any]:
        kept: dict[str, Any] = {}
        for key, cond in match.items():
            if key == "$and":
                items = [without(item) for item in cond if not uses(item)]
                if items:
                    kept[key] = items
            elif key == "$or":  # each alternative without the condition
                kept[key] = [without(item) for item in cond]
            elif not uses(cond):
                kept[key] = cond
        return kept

    return [{"$match": without(stage["$match"])} if "$match" in stage else stage for stage in pipeline]


def _past(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        return value + datetime.timedelta(hours=1)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value + max(1, abs(value) / 2)
    if isinstance(value, str):
        return value + "\uffff"
    return value


def _before(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        return value - datetime.timedelta(seconds=1)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value - 1
    return value


def _compare_read(
    read: ReadGuide,
    document: dict[str, Any],
    before_db: Any,
    after_db: Any,
    migration: str,
    result: ProofResult,
    after: str | None = None,
) -> None:
    values = read_values(read.before, document)
    if values is None:
        return
    unbound = {name for name, value in values.items() if value is UNBOUND}
    values = {name: value for name, value in values.items() if value is not UNBOUND}
    try:
        before_pipeline = bind(relax(read.before.pipeline(), unbound), values)
        after_pipeline = bind(relax(read.after.pipeline(), unbound), values)
        before = list(before_db[read.before.collection].aggregate(before_pipeline))
    except Exception as exc:  # noqa: BLE001 - today's read, which the migration did not write
        # The database the proof runs on cannot run the read as the application runs it today (the embedded
        # engine lacks Decimal128 arithmetic, for one): nothing is proven either way.
        note = f"read {read.name}: not proven here, today's read fails on this database ({_first_line(exc)}); "
        note += "prove it on a server: --scratch-uri"
        if note not in (result.skipped or []):
            (result.skipped if result.skipped is not None else []).append(note)
        return
    try:
        rewritten = list(after_db[read.after.collection].aggregate(after_pipeline))
    except Exception as exc:  # a pipeline the server refuses is a difference, reported with its message
        result.differences.append(Difference(migration, "read", read.name, f"the pipeline failed: {exc}", values))
        return
    result.reads_compared += 1
    result.documents_compared += len(before)
    where = f" after the write {after}" if after else ""
    problem = compare(before, rewritten, read.after)
    if problem:
        result.differences.append(Difference(migration, "read", read.name, problem + where, values))
    if read.during is None:
        return
    # While up runs the collection holds both shapes: the read for that time must serve each of them.
    during_pipeline = bind(relax(read.during.pipeline(), unbound), values)
    for shape, db in (("old", before_db), ("new", after_db)):
        try:
            found = list(db[read.during.collection].aggregate(during_pipeline))
        except Exception as exc:
            message = f"the pipeline while up runs failed on the {shape} shape: {exc}"
            result.differences.append(Difference(migration, "read", read.name, message, values))
            continue
        problem = compare(before, found, read.during)
        if problem:
            message = f"while up runs, on the {shape} shape: {problem}{where}"
            result.differences.append(Difference(migration, "read", read.name, message, values))


def compare(before: list[dict[str, Any]], after: list[dict[str, Any]], plan: ReadPlan) -> str | None:
    """Why ``after`` does not return what ``before`` does, or None."""
    if len(before) != len(after):
        return f"{len(before)} document(s) today, {len(after)} after"
    sort = plan.query.sort
    if sort:
        keys_before = [tuple(normal(get_path(d, k)) for k in sort) for d in before]
        keys_after = [tuple(normal(get_path(d, k)) for k in sort) for d in after]
        if keys_before != keys_after:
            return "not in the same order of " + ", ".join(sort)
    if all("_id" in d for d in before):
        by_id = {_key(d["_id"]): d for d in after}
        limited = bool(plan.query.limit) and len(before) == plan.query.limit and bool(sort)
        last = keys_before[-1] if limited and before else None
        for document in before:
            other = by_id.get(_key(document["_id"]))
            if other is None:
                if last is not None and tuple(normal(get_path(document, k)) for k in sort) == last:
                    continue  # a tie at the limit: either document may be the last one returned
                return f"document {document['_id']!r} is not returned after"
            problem = _same_fields(document, other, plan)
            if problem:
                return f"document {document['_id']!r}: {problem}"
        return None
    keys = sorted({key for document in before for key in document} - plan.differs)
    left = sorted(repr(_projected(keys, d, plan)) for d in before)
    right = sorted(repr(_projected(keys, d, plan)) for d in after)
    return None if left == right else "different documents"


def _same_fields(before: dict[str, Any], after: dict[str, Any], plan: ReadPlan) -> str | None:
    for name, value in before.items():
        if name in plan.differs:
            continue
        other = after.get(name, _MISSING)
        if name in plan.joined:
            value, other = _joined(value), _joined(other)
        if normal(value) != normal(other):
            return f"{name} is {_short(value)} today, {_short(other)} after"
    return None


def _projected(keys: list[str], document: dict[str, Any], plan: ReadPlan) -> dict[str, Any]:
    values = {key: document.get(key, _MISSING) for key in keys}
    return {key: normal(_joined(value) if key in plan.joined else value) for key, value in values.items()}


def _joined(value: Any) -> Any:
    if isinstance(value, list):
        return value[0] if len(value) == 1 else (value or _MISSING)
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _key(value: Any) -> str:
    return repr(normal(value))


def normal(value: Any) -> Any:
    """A value in a form that compares equal when MongoDB would store the same value."""
    if isinstance(value, dict):
        return {key: normal(item) for key, item in value.items()}
    if isinstance(value, list):
        return [normal(item) for item in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        return float(f"{value:.12g}") if math.isfinite(value) else value
    if isinstance(value, Decimal128):
        return value.to_decimal()
    if isinstance(value, decimal.Decimal):
        return value
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return value.replace(microsecond=value.microsecond // 1000 * 1000)
    return value


def _prove_counter(
    write: WritePlan,
    before_values: dict[str, Any],
    after_values: dict[str, Any],
    before_db: Any,
    after_db: Any,
    rng: random.Random,
    migration: str,
    result: ProofResult,
) -> None:
    """An approximate counter: over many increments, its total stays within four standard deviations."""
    [command] = write.after
    probability = command.get("probability", 1.0)
    factor = round(1 / probability)
    [field] = command["update"]["$inc"]
    key = {"_id": before_values["_id"]}
    start_before = get_path(before_db[write.collection].find_one(key) or {}, field) or 0
    start_after = get_path(after_db[write.collection].find_one(key) or {}, field) or 0
    before_commands = bind(write.before, before_values)
    after_commands = bind([{k: v for k, v in command.items() if k != "probability"}], after_values)
    for _ in range(COUNTER_WRITES):
        run(before_db, copy.deepcopy(before_commands))
        if rng.random() < probability:
            run(after_db, copy.deepcopy(after_commands))
    result.writes_applied += COUNTER_WRITES
    exact = get_path(before_db[write.collection].find_one(key), field) - start_before
    estimate = get_path(after_db[write.collection].find_one(key), field) - start_after
    spread = 4 * factor * math.sqrt(COUNTER_WRITES * probability * (1 - probability))
    if abs(estimate - exact) > spread:
        message = f"{COUNTER_WRITES} increments counted {estimate}, more than {spread:.0f} from {exact}"
        result.differences.append(Difference(migration, "write", write.operation, message, before_values))


def _first_line(error: BaseException) -> str:
    """A driver error without the server's full reply."""
    return str(error).split(", full error:")[0].splitlines()[0]
