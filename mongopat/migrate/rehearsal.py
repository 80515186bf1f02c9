"""A dress rehearsal of migrations that never writes to the source.

A sample of every collection the migrations touch, with the documents their steps read (the related
documents of ``from`` collections, a tree's ancestors), is copied into scratch: two databases of a
scratch deployment, or a temporary folder for a dump folder. There ``up`` runs, then ``verify``, the
guide's check (given an access file), and ``down --to base``; the result is compared byte for byte with
the copy. The report gives, per migration, what the run read and wrote, its time and backup size, the
collections and indexes it created, and each figure extrapolated to the full collections (with the basis).
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bson
from bson import json_util

from mongopat.migrate.runner import RunOptions
from mongopat.migrate.script import Migration
from mongopat.migrate.steps import Step
from mongopat.migrate.transform_api import Document, get_path, hashable_key
from mongopat.predictions import TOLERANCE, describe

REHEARSAL_VERSION = 1
DEFAULT_SAMPLE = 10_000
MAX_DIFFERENCES = 20  # listed per rehearsal; the count says how many there were
# Documents per read the guide's check binds in a rehearsal: a smoke test of the rewrites on the copy (each
# read runs over the whole copy, on the embedded engine for a dump folder); migrate guide --check proves more.
GUIDE_SAMPLES = 2


@dataclass
class Copied:
    """One collection in scratch: how many of its documents were copied, of how many."""

    name: str
    copied: int
    total: int


@dataclass
class Plan:
    """What to copy: the collections the steps migrate (sampled) and those they read (related documents)."""

    migrated: list[str] = field(default_factory=list)
    # (collection read, its field, the migrated collection, the field whose values select them)
    related: list[tuple[str, str, str, str]] = field(default_factory=list)
    # (collection, parent field): ancestors of the sampled documents are copied too
    trees: list[tuple[str, str]] = field(default_factory=list)


def plan_copy(migrations: list[Migration]) -> Plan:
    plan = Plan()
    created: set[str] = set()  # collections an earlier step makes: the run makes them in the copy too
    for migration in migrations:
        for step in migration.steps:
            if step.collection not in plan.migrated and step.collection not in created:
                plan.migrated.append(step.collection)
            created.update(step.created_collections())
            related = _related(step)
            if related and related not in plan.related:
                plan.related.append(related)
            if step.params.get("parent_field"):
                plan.trees.append((step.collection, step.params["parent_field"]))
    return plan


def _related(step: Step) -> tuple[str, str, str, str] | None:
    """A step that reads another collection names it ``from``, joined on ``foreign`` = ``local``."""
    source = step.params.get("from")
    if not isinstance(source, str) or not step.params.get("foreign") or not step.params.get("local"):
        return None
    return source, step.params["foreign"], step.collection, step.params["local"]


def _values(documents: Iterable[Document], path: str) -> list[Any]:
    found: dict[Any, Any] = {}
    for doc in documents:
        value = get_path(doc, path)
        for one in value if isinstance(value, list) else [value]:
            if one is not None:
                found.setdefault(hashable_key(one), one)
    return list(found.values())


def _sample(documents: Iterator[Document], size: int, rng: random.Random) -> tuple[list[Document], int]:
    """A uniform sample of at most ``size`` documents (reservoir), and how many there were."""
    kept: list[Document] = []
    total = 0
    for total, doc in enumerate(documents, 1):
        if len(kept) < size:
            kept.append(doc)
        else:
            slot = rng.randrange(total)
            if slot < size:
                kept[slot] = doc
    return kept, total


def _estimate(figure: float, factor: float) -> float:
    return round(figure * factor, 3)


def _differences(reference: dict[str, dict[Any, bytes]], now: dict[str, dict[Any, bytes]]) -> list[dict]:
    found: list[dict[str, Any]] = []
    for name in sorted(set(reference) | set(now)):
        if name not in now:
            found.append({"collection": name, "kind": "collection missing after down"})
            continue
        if name not in reference:
            found.append({"collection": name, "kind": "collection left after down", "documents": len(now[name])})
            continue
        before, after = reference[name], now[name]
        for key in before.keys() - after.keys():
            found.append({"collection": name, "_id": bson.decode(before[key])["_id"], "kind": "document missing"})
        for key in after.keys() - before.keys():
            found.append({"collection": name, "_id": bson.decode(after[key])["_id"], "kind": "document added"})
        for key in before.keys() & after.keys():
            if before[key] != after[key]:
                found.append({"collection": name, "_id": bson.decode(before[key])["_id"], "kind": "bytes differ"})
    return found


def _by_id(raws: Iterable[bytes]) -> dict[Any, bytes]:
    return {hashable_key(bson.decode(raw)["_id"]): raw for raw in raws}


class Scratch:
    """Where a rehearsal runs: copies in, runs, states out. One implementation per backend."""

    def copy(self, plan: Plan, sample: int, seed: int) -> list[Copied]:
        raise NotImplementedError

    def state(self) -> dict[str, dict[Any, bytes]]:
        """Every collection's documents as BSON bytes by ``_id`` (mongopat's own bookkeeping left out)."""
        raise NotImplementedError

    def collections(self) -> set[str]:
        raise NotImplementedError

    def runner(self, migrations: list[Migration], options: RunOptions) -> Any:
        raise NotImplementedError

    def backup_bytes(self, migration_id: str) -> int:
        raise NotImplementedError

    def indexes(self) -> set[tuple[str, str]]:
        """(collection, index name) of every index in scratch."""
        raise NotImplementedError

    def check_guide(self, runner: Any, guide: Any, migration: Migration, samples: int, seed: int) -> Any:
        raise NotImplementedError

    def explain(self, plan: Any) -> Any:
        """The planner's figures for a guide's read (:class:`mongopat.indexes.explain.PlanSummary`); None
        where there is no planner (a dump folder)."""
        return None

    def drop(self) -> None:
        raise NotImplementedError


def rehearse(
    scratch: Scratch,
    migrations: list[Migration],
    sample: int = DEFAULT_SAMPLE,
    guides: dict[str, Any] | None = None,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the rehearsal in ``scratch`` (dropped at the end, whatever happens)."""
    say = progress or (lambda _message: None)
    result: dict[str, Any] = {"rehearsal_version": REHEARSAL_VERSION, "sample": sample, "migrations": []}
    try:
        say("copying the sample")
        copied = scratch.copy(plan_copy(migrations), sample, seed)
        result["copied"] = [{"collection": c.name, "copied": c.copied, "total": c.total} for c in copied]
        totals = {c.name: c for c in copied}
        reference = scratch.state()
        options = RunOptions(batch_size=1000, lock_timeout=5)
        failures: list[str] = []
        for migration in migrations:
            before_collections, before_indexes = scratch.collections(), scratch.indexes()
            started = time.monotonic()
            say(f"up {migration.id}")
            entry: dict[str, Any] = {"id": migration.id}
            guide = guides.get(migration.id) if guides else None
            planned_before = [scratch.explain(read.before) for read in guide.reads] if guide else []
            try:
                [applied] = scratch.runner([migration], options).up() or [{}]
                entry.update(read=applied.get("read") or 0, written=applied.get("written") or 0)
            except Exception as exc:  # a rehearsal reports what a real run would have met
                entry["error"] = f"up: {exc}"
                failures.append(f"{migration.id}: up failed: {exc}")
                result["migrations"].append(entry)
                break
            entry["seconds"] = round(time.monotonic() - started, 3)
            entry["backup_bytes"] = scratch.backup_bytes(migration.id)
            entry["new_collections"] = sorted(scratch.collections() - before_collections)
            entry["index_builds"] = [
                {"collection": c, "name": n} for c, n in sorted(scratch.indexes() - before_indexes)
            ]
            problems = scratch.runner([migration], options).verify(migration.id).get(migration.id, [])
            entry["verify"] = problems
            failures.extend(f"{migration.id}: verify: {p}" for p in problems)
            if migration.prediction:
                entry["prediction"] = _prediction_check(scratch.runner([migration], options), migration, totals)
                failures.extend(
                    f"{migration.id}: prediction: {describe(d)}"
                    for d in entry["prediction"]["differences"]
                    if d["beyond_tolerance"]
                )
            if guide is not None and any(summary is not None for summary in planned_before):
                say(f"explain {migration.id}")
                entry["explain"] = _explained(scratch, guide, migration, planned_before)
            if guides and migration.id in guides:
                say(f"guide check {migration.id}")
                proof = scratch.check_guide(
                    scratch.runner([migration], options), guides[migration.id], migration, GUIDE_SAMPLES, seed
                )
                entry["guide"] = {
                    "reads_compared": proof.reads_compared,
                    "differences": [{"kind": d.kind, "name": d.name, "message": d.message} for d in proof.differences],
                }
                failures.extend(f"{migration.id}: guide: {d.name}: {d.message}" for d in proof.differences)
            entry["estimate"] = _extrapolated(entry, migration, totals)
            result["migrations"].append(entry)
        say("down --to base")
        try:
            scratch.runner(migrations, options).down("base")
        except Exception as exc:
            failures.append(f"down failed: {exc}")
        differences = _differences(reference, scratch.state())
        result["differences"] = differences[:MAX_DIFFERENCES]
        result["difference_count"] = len(differences)
        if differences:
            failures.append(f"{len(differences)} difference(s) between the copy and the state after down")
        result["failures"] = failures
        result["ok"] = not failures
        return result
    finally:
        scratch.drop()


def _explained(scratch: Scratch, guide: Any, migration: Migration, before: list[Any]) -> list[dict[str, Any]]:
    """Each read of the guide explained before ``up`` and after, with the index the migration created for
    it (where one of its ``create_index`` steps is the index mongopat advises for the read) and where the
    server's plan departs from that."""
    from mongopat.indexes.catalog import Index
    from mongopat.indexes.explain import compare
    from mongopat.indexes.planner import cost
    from mongopat.indexes.selectivity import Selectivity
    from mongopat.indexes.shape import from_match

    created = [
        (step.collection, Index(str(step.params.get("name") or ""), list(dict(step.params["keys"]).items())))
        for step in migration.steps
        if step.name == "create_index"
    ]
    found = []
    for read, summary_before in zip(guide.reads, before, strict=True):
        after = scratch.explain(read.after)
        sort = next((stage.spec for stage in read.after.stages if stage.kind == "sort"), None)
        shape = from_match(read.name, read.after.collection, read.after.match, sort)
        expected = next(
            (index for collection, index in created
             if collection == read.after.collection and _serves(cost(shape, index, Selectivity(None)), shape)),
            None,
        )  # fmt: skip
        departure = compare(after, expected.name, expected.keys_spec()) if expected and after is not None else None
        found.append(
            {
                "read": read.name,
                "collection": read.after.collection,
                "before": summary_before.to_dict() if summary_before is not None else None,
                "after": after.to_dict() if after is not None else None,
                "expected_index": None if expected is None else {"name": expected.name, "key": expected.keys_spec()},
                "departure": departure,
            }
        )
    return found


def _serves(planned: Any, shape: Any) -> bool:
    """The index bounds every equality of the read and gives its sort (the index model's plan)."""
    return planned is not None and set(shape.equalities) <= set(planned.bounded) and not planned.sort_in_memory


def _prediction_check(runner: Any, migration: Migration, totals: dict[str, Copied]) -> dict[str, Any]:
    """What ``up`` measured in scratch against the migration's prediction. The predicted change is applied
    to what was measured before (the copy); a migration that regroups documents of a collection only
    partly copied is not compared: a sample holds fewer readings per group than the collection."""
    from mongopat.migrate.operations import STEP_OPERATIONS

    sampled = sorted(
        step.collection
        for step in migration.steps
        if STEP_OPERATIONS[step.name].type.kind == "regroup"
        and step.collection in totals
        and totals[step.collection].copied < totals[step.collection].total
    )
    if sampled:
        return {
            "compared": False,
            "differences": [],
            "note": f"not compared: {', '.join(sampled)} copied in part, and a sample regroups differently "
            "(rehearse with a sample as large as the collection, or compare after 'migrate up' with verify)",
        }
    return {"compared": True, "differences": runner.prediction_differences(migration), "tolerance": TOLERANCE}


def _extrapolated(entry: dict[str, Any], migration: Migration, totals: dict[str, Copied]) -> dict[str, Any]:
    """The figures of the sample scaled to the full collections: by the largest ratio of documents in all
    to documents copied among the collections the migration changes."""
    ratios = [
        (totals[name].total / totals[name].copied, name)
        for name in dict.fromkeys(step.collection for step in migration.steps)
        if name in totals and totals[name].copied
    ]
    factor, name = max(ratios, default=(1.0, None))
    basis = (
        f"{totals[name].copied:,} of {totals[name].total:,} documents of {name} copied: figures x{factor:,.1f}"
        if name
        else "nothing copied"
    )
    return {
        "read": round(entry.get("read", 0) * factor),
        "written": round(entry.get("written", 0) * factor),
        "seconds": _estimate(entry.get("seconds", 0.0), factor),
        "backup_bytes": round(entry.get("backup_bytes", 0) * factor),
        "basis": basis,
    }


# -- a server ----------------------------------------------------------------------------------------


class ServerScratch(Scratch):
    """Two databases of a scratch deployment: the working copy, and the state before for the guide."""

    def __init__(self, source_db: Any, client: Any, name: str) -> None:
        self.source, self.client, self.name = source_db, client, name
        self.db = client[name]
        self.before = client[f"{name}_before"]

    def copy(self, plan: Plan, sample: int, seed: int) -> list[Copied]:
        copied: dict[str, list[Document]] = {}
        out = []
        for name in plan.migrated:
            collection = self.source[name]
            total = collection.count_documents({})
            if total > sample:
                documents = list(collection.aggregate([{"$sample": {"size": sample}}]))
            else:
                documents = list(collection.find())
            copied[name] = documents
            out.append(Copied(name, len(documents), total))
        for source, foreign, migrated, local in plan.related:
            values = _values(copied.get(migrated, []), local)
            have = {hashable_key(d["_id"]) for d in copied.get(source, [])}
            extra = [
                d for d in self.source[source].find({foreign: {"$in": values}}) if hashable_key(d["_id"]) not in have
            ]
            copied.setdefault(source, []).extend(extra)
            if source not in {c.name for c in out}:
                out.append(Copied(source, len(copied[source]), self.source[source].count_documents({})))
        for name, parent in plan.trees:
            have = {hashable_key(d["_id"]) for d in copied.get(name, [])}
            wanted = [v for v in _values(copied.get(name, []), parent) if hashable_key(v) not in have]
            for _depth in range(100):
                if not wanted:
                    break
                found = list(self.source[name].find({"_id": {"$in": wanted}}))
                copied[name].extend(found)
                have.update(hashable_key(d["_id"]) for d in found)
                wanted = [v for v in _values(found, parent) if hashable_key(v) not in have]
        for name, documents in copied.items():
            for target in (self.db, self.before):
                if documents:
                    target[name].insert_many([dict(d) for d in documents])
                for index in self.source[name].list_indexes():
                    spec = dict(index)
                    if spec.get("name") == "_id_":
                        continue
                    # No TTL in scratch: its monitor would delete copied documents during the rehearsal.
                    options = {k: v for k, v in spec.items() if k not in ("key", "v", "ns", "expireAfterSeconds")}
                    target[name].create_index(list(spec["key"].items()), **options)
        for c in out:
            c.copied = len(copied.get(c.name, []))
        return out

    def collections(self) -> set[str]:
        return {n for n in self.db.list_collection_names() if not n.startswith(("mongopat_", "system."))}

    def state(self) -> dict[str, dict[Any, bytes]]:
        return {name: _by_id(bson.encode(d) for d in self.db[name].find()) for name in sorted(self.collections())}

    def runner(self, migrations: list[Migration], options: RunOptions) -> Any:
        from mongopat.migrate.server.runner import Runner

        return Runner(self.db, migrations, options)

    def backup_bytes(self, migration_id: str) -> int:
        from mongopat.migrate.bookkeeping import BACKUP

        return sum(len(bson.encode(d)) for d in self.db[BACKUP].find({"_id.m": migration_id}))

    def indexes(self) -> set[tuple[str, str]]:
        return {
            (name, index["name"])
            for name in self.collections()
            for index in self.db[name].list_indexes()
            if index["name"] != "_id_"
        }

    def explain(self, plan: Any) -> Any:
        from mongopat.indexes.explain import explain_plan

        return explain_plan(self.db, plan)

    def check_guide(self, runner: Any, guide: Any, migration: Migration, samples: int, seed: int) -> Any:
        from mongopat.guide.proof import prove

        # The proof applies writes: it runs on a copy of the migrated state, the working copy stays as up left it.
        after = self.client[f"{self.name}_after"]
        try:
            for name in self.db.list_collection_names():
                if not name.startswith("system."):
                    documents = list(self.db[name].find())
                    if documents:
                        after[name].insert_many(documents)
            before = self.client[f"{self.name}_guide_before"]
            try:
                for name in self.before.list_collection_names():
                    documents = list(self.before[name].find())
                    if documents:
                        before[name].insert_many(documents)
                return prove(guide, before, after, samples=samples, seed=seed)
            finally:
                self.client.drop_database(before.name)
        finally:
            self.client.drop_database(after.name)

    @staticmethod
    def database_names(name: str) -> tuple[str, ...]:
        """Every database a rehearsal named ``name`` creates."""
        return (name, f"{name}_before", f"{name}_after", f"{name}_guide_before")

    def drop(self) -> None:
        for name in self.database_names(self.name):
            self.client.drop_database(name)


# -- a dump folder -------------------------------------------------------------------------------------


class FolderScratch(Scratch):
    """A temporary folder of mongoexport files (canonical Extended JSON, one document a line)."""

    def __init__(self, source_folder: Path) -> None:
        from mongopat.migrate.dump_folder.files import DumpFolder

        self.source = DumpFolder(source_folder)
        self.source_folder = source_folder
        self.folder = Path(tempfile.mkdtemp(prefix="mongopat-rehearsal-"))

    def copy(self, plan: Plan, sample: int, seed: int) -> list[Copied]:
        rng = random.Random(seed)
        copied: dict[str, list[Document]] = {}
        out = []
        for name in plan.migrated:
            documents, total = _sample(iter(self.source.read(name)), sample, rng)
            copied[name] = documents
            out.append(Copied(name, len(documents), total))
        for source, foreign, migrated, local in plan.related:
            values = {hashable_key(v) for v in _values(copied.get(migrated, []), local)}
            have = {hashable_key(d["_id"]) for d in copied.get(source, [])}
            total = 0
            for doc in self.source.read(source):
                total += 1
                key = hashable_key(get_path(doc, foreign))
                if key in values and hashable_key(doc["_id"]) not in have:
                    copied.setdefault(source, []).append(doc)
                    have.add(hashable_key(doc["_id"]))
            if source not in {c.name for c in out}:
                out.append(Copied(source, 0, total))
        for name, parent in plan.trees:
            nodes = {hashable_key(d["_id"]): d for d in self.source.read(name)}
            have = {hashable_key(d["_id"]) for d in copied.get(name, [])}
            wanted = [hashable_key(v) for v in _values(copied.get(name, []), parent)]
            while wanted:
                key = wanted.pop()
                if key in have or key not in nodes:
                    continue
                have.add(key)
                copied[name].append(nodes[key])
                wanted.extend(hashable_key(v) for v in _values([nodes[key]], parent))
        for name, documents in copied.items():
            lines = (json_util.dumps(d, json_options=json_util.CANONICAL_JSON_OPTIONS) + "\n" for d in documents)
            (self.folder / f"{name}.json").write_text("".join(lines), encoding="utf-8")
            metadata = self.source.folder / f"{name}.metadata.json"
            if metadata.exists():
                shutil.copyfile(metadata, self.folder / metadata.name)
        for c in out:
            c.copied = len(copied.get(c.name, []))
        return out

    def state(self) -> dict[str, dict[Any, bytes]]:
        from mongopat.guide.dump_check import collection_files
        from mongopat.migrate.dump_folder.files import DumpFolder

        files = DumpFolder(self.folder)
        return {
            name: _by_id(bson.encode(d) for d in files.read(name)) for name in sorted(collection_files(self.folder))
        }

    def collections(self) -> set[str]:
        from mongopat.guide.dump_check import collection_files

        return set(collection_files(self.folder))

    def runner(self, migrations: list[Migration], options: RunOptions) -> Any:
        from mongopat.migrate.dump_folder.runner import DumpRunner

        return DumpRunner(self.folder, migrations, options)

    def backup_bytes(self, migration_id: str) -> int:
        return sum(path.stat().st_size for path in self.folder.glob(f"mongopat_backup__{migration_id}__*"))

    def indexes(self) -> set[tuple[str, str]]:
        import json

        found = set()
        for path in self.folder.glob("*.metadata.json"):
            name = path.name[: -len(".metadata.json")]
            for index in json.loads(path.read_text(encoding="utf-8")).get("indexes", []):
                if index.get("name") != "_id_":
                    found.add((name, index.get("name") or str(index.get("key"))))
        return found

    def check_guide(self, runner: Any, guide: Any, migration: Migration, samples: int, seed: int) -> Any:
        from mongopat.guide.dump_check import check_migration

        return check_migration(runner, guide, samples, seed)

    def drop(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
