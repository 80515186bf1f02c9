"""Every user-facing command as a plain function: the CLI is a thin layer over these, and scripts and
tests call them directly. Each returns data (a report, findings) and raises :class:`MongopatError` on
bad input; printing is the caller's business.
"""

from __future__ import annotations

import contextlib
import datetime
import difflib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mongopat.errors import InputError
from mongopat.sources import SourceSpec, open_source

if TYPE_CHECKING:
    from mongopat.analysis.collection import AnalyzeOptions
    from mongopat.check.findings import Finding
    from mongopat.draft.build import Draft
    from mongopat.draft.server import SourceStatus
    from mongopat.migrate.contracts import AppliedResult, StatusRow
    from mongopat.migrate.runner import RunnerBase, RunOptions
    from mongopat.sources import Source

# The heavier modules are imported by the commands that use them, so that each command loads only what it
# needs: a migration on a dump folder starts without the analysis, the rules or pymongo.

# Called once per collection with (name, expected documents or None); returns the per-batch callback.
ProgressFactory = Callable[[str, int | None], Callable[[int], None]]


def analyze(
    spec: SourceSpec,
    collections: list[str] | None = None,
    options: AnalyzeOptions | None = None,
    progress: ProgressFactory | None = None,
) -> dict[str, Any]:
    """Measure the collections of a database or dump folder; returns a report (``report_version`` 1)."""
    with open_source(spec) as source:
        return analyze_source(source, collections, options, progress)


def analyze_source(
    source: Source,
    collections: list[str] | None = None,
    options: AnalyzeOptions | None = None,
    progress: ProgressFactory | None = None,
) -> dict[str, Any]:
    from mongopat.analysis.collection import AnalyzeOptions, CollectionAnalysis, analyze_collection
    from mongopat.analysis.in_place import patterns_in_place
    from mongopat.analysis.references import find_references
    from mongopat.report import build_report

    options = options or AnalyzeOptions()
    if options.full_scan and hasattr(source, "full_scan"):
        source.full_scan = True
    if options.sample_size is not None and options.sample_size < 1:
        raise InputError("--sample must be at least 1")
    available = source.collections()
    if collections:
        missing = [name for name in collections if name not in available]
        if missing:
            raise InputError(
                f"collection not found in {source.database}: {', '.join(missing)}",
                hint=f"collections: {', '.join(available) or 'none'}",
            )
        names = list(dict.fromkeys(collections))
    else:
        names = available
    if not names:
        raise InputError(
            f"database {source.database!r} at {source.location} has no collections",
            hint="check --db (MongoDB answers an unknown database as an empty one)",
        )
    analyses: dict[str, CollectionAnalysis] = {}
    for name in names:
        callback = None
        if progress is not None:
            expected = options.sample_size
            callback = progress(name, expected)
        analyses[name] = analyze_collection(source, name, options, callback)
    find_references(analyses, source)
    notes = []
    if source.kind == "mongomock":
        notes.append("mongomock is an in-process test double: storage sizes and index usage are not reported")
    entries = [analyses[name].to_dict() for name in names]
    by_name = {entry["name"]: entry for entry in entries}
    for entry in entries:
        entry["patterns_in_place"] = patterns_in_place(entry, by_name)
    return build_report(source.kind, source.location, source.database, entries, notes)


def recommend(
    report: dict[str, Any],
    access_path: str | None = None,
    thresholds: dict[str, dict[str, float]] | None = None,
    rules: list[str] | None = None,
    source: SourceSpec | None = None,
    explain: bool = False,
) -> dict[str, Any]:
    """Join a report with an access-pattern file and run every detector; returns ``{"recommendations": ...}``
    (``recommendations_version`` 2). Each migration carries a prediction; with ``source`` (the data the
    report measured) a document step's is measured on a sample run through the step. With ``explain`` and
    a server source, each missing-index finding's reads carry the server's plan for them today."""
    from mongopat.access import load_access_file
    from mongopat.access.against_data import check_against_data
    from mongopat.rules import Context, registry, run_rules
    from mongopat.rules.base import SEVERITIES

    access = None
    notes: list[str] = []
    if access_path:
        known = [c["name"] for c in report["collections"]]
        access = load_access_file(access_path, known_collections=known)
        notes.extend(check_against_data(access, report))
        if access.database and access.database != report["source"]["database"]:
            notes.append(
                f"{access_path} describes database {access.database!r}; the data is {report['source']['database']!r}"
                " (used anyway: staging and production copies often differ in name)"
            )
    validate_thresholds(thresholds or {})
    if rules:
        known_rules = {r.code for r in registry()} | {r.name for r in registry()}
        unknown = [r for r in rules if r not in known_rules]
        if unknown:
            raise InputError(f"unknown rule {', '.join(unknown)}", hint="mongopat rules lists them")
    context = Context(report, access, thresholds)
    found = run_rules(context, set(rules) if rules else None)
    attach_index_steps(found, report, access)
    predict(found, report, access, source)
    if explain:
        explain_today(found, access, source)
    by_severity = {name: sum(1 for r in found if r.severity == name) for name in SEVERITIES}
    return {
        "recommendations_version": 2,
        "source": report["source"],
        "access_file": access_path,
        "summary": {
            "total": len(found),
            "by_severity": by_severity,
            "collections": sorted({r.collection for r in found if r.collection}),
        },
        "recommendations": [r.to_dict() for r in found],
        "notes": notes,
    }


def explain_today(found: list[Any], access: Any, source: SourceSpec | None) -> None:
    """The server's plans today for the reads of the index findings (``recommend --explain``)."""
    from mongopat.indexes.explain import plans_today

    if source is None or not source.uri:
        raise InputError("--explain asks a server's planner: give --uri")
    if access is None:
        return
    with _server(source) as server:
        plans_today(server.db, found, access)


def attach_index_steps(found: list[Any], report: dict[str, Any], access: Any) -> None:
    from mongopat.indexes.for_patterns import attach

    attach(found, report, access)


def predict(found: list[Any], report: dict[str, Any], access: Any, spec: SourceSpec | None) -> None:
    """Give each recommendation that carries a migration its prediction (see :mod:`mongopat.forecast`)."""
    from mongopat.forecast import forecast, reads

    pending = [rec for rec in found if rec.migration]
    if not pending:
        return
    with open_source(spec) if spec is not None and (spec.uri or spec.dump) else contextlib.nullcontext() as source:
        for rec in pending:
            if rec.prediction is None:
                rec.prediction = forecast(rec.to_dict(), report, access, source)
            elif access is not None and not rec.prediction.get("reads"):
                rec.prediction["reads"] = reads(rec.to_dict(), report, access)


def list_rules() -> list[dict[str, Any]]:
    """Every detector: code, name, kind, title, default thresholds and what it looks for."""
    from mongopat.rules import registry

    return [
        {
            "code": r.code,
            "name": r.name,
            "kind": r.kind,
            "title": r.title,
            "thresholds": dict(r.defaults),
            "description": " ".join((r.__doc__ or "").split()),
        }
        for r in registry()
    ]


def find_rules(name: str) -> list[dict[str, Any]]:
    """The rule with this code or name (case aside), as :func:`list_rules` gives it."""
    rules = list_rules()
    found = [r for r in rules if name.lower() in (r["code"].lower(), r["name"].lower())]
    if not found:
        close = difflib.get_close_matches(name, [r["code"] for r in rules] + [r["name"] for r in rules], n=1)
        raise InputError(f"unknown rule {name!r}" + (f" (did you mean {close[0]}?)" if close else ""),
                         hint="mongopat rules lists them")  # fmt: skip
    return found


def validate_thresholds(thresholds: dict[str, dict[str, float]]) -> None:
    from mongopat.rules import registry

    rules = {rule.code: rule for rule in registry()}
    for code, values in thresholds.items():
        rule = rules.get(code)
        if rule is None:
            close = difflib.get_close_matches(code, sorted(rules), n=1)
            raise InputError(f"unknown rule {code!r}" + (f" (did you mean {close[0]}?)" if close else ""))
        for key in values:
            if key not in rule.defaults:
                raise InputError(
                    f"rule {code} has no threshold {key!r}",
                    hint=f"its thresholds: {', '.join(rule.defaults) or 'none'}",
                )


def parse_threshold_options(items: list[str]) -> dict[str, dict[str, float]]:
    """``["MP201.warn_length=500"]`` (rule code or name) -> ``{"MP201": {"warn_length": 500.0}}``."""
    from mongopat.rules import registry

    by_name = {rule.name: rule.code for rule in registry()}
    out: dict[str, dict[str, float]] = {}
    for item in items:
        target, _, value = item.partition("=")
        rule, _, key = target.partition(".")
        if not rule or not key or not value:
            raise InputError(f"--threshold {item!r}: expected RULE.KEY=NUMBER, e.g. MP201.warn_length=500")
        try:
            number = float(value)
        except ValueError:
            raise InputError(f"--threshold {item!r}: {value!r} is not a number") from None
        out.setdefault(by_name.get(rule, rule), {})[key] = number
    return out


def draft_access(
    spec: SourceSpec,
    logs: list[str] | None = None,
    top_interval: float = 10.0,
    sample_size: int | None = None,
    log_progress: Callable[[int], None] | None = None,
    collections: list[str] | None = None,
) -> Draft:
    """Draft an access-pattern file from logs, ``top``, ``$queryStats``, the profiler and the data itself
    (``collections``: only those).

    Reads only; every source is optional and what could not be used is reported in the draft's statuses.
    """
    from mongopat.analysis.collection import AnalyzeOptions
    from mongopat.analysis.timeline import steady_rate
    from mongopat.draft.build import build_draft
    from mongopat.draft.logs import scan_logs
    from mongopat.draft.server import SourceStatus, probe_server
    from mongopat.sources.mongo import MongoSource

    statuses: list[SourceStatus] = []
    database = spec.db
    log_scan = None
    if logs:
        log_scan = scan_logs(logs, database, log_progress)
        databases = sorted({db for db, _shape in log_scan.observations})
        if database is None and not (spec.uri or spec.dump):
            if len(databases) > 1:
                raise InputError(
                    f"the logs hold several databases ({', '.join(databases)})", hint="choose one with --db"
                )
            database = databases[0] if databases else None
        files = ", ".join(logs) if len(logs) <= 3 else f"{len(logs)} files"
        detail = (
            f"{log_scan.slow_queries:,} slow queries in {files}, {log_scan.lines:,} lines"
            + (f", {log_scan.malformed:,} malformed lines skipped" if log_scan.malformed else "")
            + "".join(f"; {cut} (gzip data cut short)" for cut in log_scan.cut_short)
        )
        statuses.append(SourceStatus("log", log_scan.slow_queries > 0, detail, log_scan.slow_queries))
    server = None
    data_rates: dict[str, tuple[float, str]] = {}
    known: list[str] = []
    references: dict[tuple[str, str], str] = {}
    loaded: list[str] = []  # collections whose _ids were all written in a few loads
    if spec.uri or spec.dump:
        with open_source(spec) as source:
            database = source.database
            if isinstance(source, MongoSource):
                server = probe_server(source.client, database, top_interval)
                statuses.extend(server.statuses)
            report = analyze_source(source, collections, AnalyzeOptions(sample_size=sample_size))
        known = [c["name"] for c in report["collections"]]
        for collection in report["collections"]:
            for reference in collection["references"]:  # best match first
                references.setdefault((collection["name"], reference["field"]), reference["target"])
            profile = next((p for p in collection["time"] if p["field"] == "_id"), None)
            rate = steady_rate(profile) if profile else None
            if profile and rate:
                why = (
                    f"inserts measured from _id timestamps of {profile['documents']:,} documents "
                    f"between {profile['first']} and {profile['last']}"
                )
                if profile.get("bulk_load"):
                    why += f", outside {profile['bulk_load']['loads']} bulk load(s)"
                data_rates[collection["name"]] = (rate, why)
            elif profile and profile.get("bulk_load"):
                loaded.append(collection["name"])
        detail = f"insert rates of {len(data_rates)} collection(s)"
        if loaded:
            detail += f"; bulk-loaded, so no insert rate: {', '.join(loaded)}"
        statuses.append(SourceStatus("collections", bool(data_rates), detail, len(data_rates)))
    if database is None:
        raise InputError(
            "nothing to draft from", hint="pass --log FILE, --uri URI or --dump DIR (and --db when needed)"
        )
    if log_scan is not None:
        log_scan.observations = {key: value for key, value in log_scan.observations.items() if key[0] == database}
    draft = build_draft(database, server, log_scan, data_rates, statuses, known, references)
    if collections:
        draft.collections = {name: entry for name, entry in draft.collections.items() if name in collections}
    return draft


def _migrations_folder(folder: str) -> None:
    """The migrations folder a command reads must exist: a typo in ``--dir`` is an input error, not an
    empty list."""
    if not Path(folder).is_dir():
        raise InputError(
            f"no migrations folder {folder}",
            hint="give --dir, or write migrations with 'mongopat migrate plan' or 'mongopat migrate new'",
        )


def _dump_target(spec: SourceSpec) -> Any:
    """The dump folder migrations run on, checked first (an archive is refused with how to unpack it)."""
    from mongopat import api
    from mongopat.sources.dump import resolve_dump_folder

    resolve_dump_folder(Path(spec.dump or ""), spec.db)
    return api.dump_folder(spec.dump or "", spec.db)


def _dump_runner(spec: SourceSpec, folder: str, options: RunOptions | None = None) -> RunnerBase:
    from mongopat import api

    if spec.uri:
        raise InputError("give either --uri or --dump, not both")
    target = _dump_target(spec)
    _migrations_folder(folder)
    return api.runner(target, folder, **_option_values(options))


def _server(spec: SourceSpec) -> Any:
    from mongopat.sources.mongo import MongoSource

    source = open_source(spec)
    assert isinstance(source, MongoSource)
    return source


def _option_values(options: RunOptions | None) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)} if options is not None else {}


def check_run_options(options: RunOptions) -> None:
    """Refuse options no run accepts (a write concern that is neither "majority" nor a number)."""
    from mongopat import api

    api.run_options(**_option_values(options))


def _migrations(spec: SourceSpec, folder: str, action: str, *args: Any, options: RunOptions | None = None) -> Any:
    """``action`` (up, down, verify, status, stamp, repair) on the target, a server or a dump folder,
    through :mod:`mongopat.api`: the functions applications call, for both kinds of target."""
    from mongopat import api

    values = _option_values(options)
    api.run_options(**values)  # wrong options and files are reported before any connection attempt
    if spec.dump:
        if spec.uri:
            raise InputError("give either --uri or --dump, not both")
        target = _dump_target(spec)
        _migrations_folder(folder)
        return getattr(api, action)(target, api.load(folder), *args, **values)
    _migrations_folder(folder)
    migrations = api.load(folder)
    with _server(spec) as source:
        return getattr(api, action)(source.writable_db(), migrations, *args, **values)


def migrate_status(spec: SourceSpec, folder: str) -> list[StatusRow]:
    """Every migration with its state: applied, pending, running, failed, edited, missing-file."""
    return _migrations(spec, folder, "status")


def migrate_up(
    spec: SourceSpec, folder: str, to: str | None = None, options: RunOptions | None = None
) -> list[AppliedResult]:
    """Apply pending migrations in order (resuming a failed or interrupted one); ``options.dry_run`` writes nothing."""
    return _migrations(spec, folder, "up", to, options=options)


def migrate_down_plan(spec: SourceSpec, folder: str, to: str | None = None) -> list[dict[str, Any]]:
    """What ``migrate down`` would revert (``--dry-run``): nothing is changed."""
    return _migrations(spec, folder, "down_plan", to)


def migrate_down(spec: SourceSpec, folder: str, to: str | None = None, options: RunOptions | None = None) -> list[str]:
    """Revert the last applied migration, or every one after ``to`` (``"base"``: all)."""
    return _migrations(spec, folder, "down", to, options=options)


def migrate_stamp(spec: SourceSpec, folder: str, to: str, force: bool = False) -> dict[str, Any]:
    """Record migrations up to ``to`` as applied without running them (refused, with the documents each
    step finds in the old shape, unless ``force``); ``to="base"`` forgets every recorded migration."""
    return _migrations(spec, folder, "stamp", to, force)


def migrate_repair(
    spec: SourceSpec,
    folder: str,
    migration_id: str,
    force: bool = False,
    confirm: Callable[[dict[str, Any]], bool] | None = None,
) -> dict[str, Any]:
    """What an edit of an applied migration's file changed, and its new checksum recorded after ``confirm``
    (refused when the steps changed, unless ``force``)."""
    return _migrations(spec, folder, "repair", migration_id, force, confirm)


PLAN_SAMPLE = 1000  # documents per collection transformed by 'migrate plan --uri'


def migrate_plan(
    recommendations_path: str,
    folder: str,
    only: list[str] | None = None,
    dry_run: bool = False,
    spec: SourceSpec | None = None,
    add_validators: bool = False,
    confirm: Callable[[int], bool] | None = None,
) -> dict[str, Any] | None:
    """One migration file per recommendation that carries a migration (``only``: rule codes, patterns or
    collections), written unless ``dry_run`` and once ``confirm`` (asked with the number of files) agrees;
    None when it does not. With a server in ``spec``, each step is checked against it (shard keys,
    validators) and a sample of its collection transformed as the step would: a step that would leave
    documents failing the collection's validator is warned about. ``plan_version`` 1."""
    from mongopat.migrate.plan import plan, read_recommendations_file

    if add_validators and not (spec and spec.uri):
        raise InputError("--add-validators samples the collections: give --uri (and --db)")
    saved = read_recommendations_file(recommendations_path)
    recommendations = saved["recommendations"]
    with contextlib.ExitStack() as stack:
        target = stack.enter_context(_server(spec)) if spec is not None and spec.uri else None
        probe = target.collection_info if target is not None else None
        after = _transformed_sample(target) if target is not None else None
        refused: list[str] = []
        warnings: list[str] = []

        def planned(write: bool) -> tuple[list[Any], list[str]]:
            refused.clear()
            warnings.clear()
            return plan(recommendations, Path(folder), only, not write, probe, refused, after, add_validators, warnings)

        files, notes = planned(False)
        if files and not dry_run:
            if confirm is not None and not confirm(len(files)):
                return None
            files, notes = planned(True)
    return {
        "plan_version": 1,
        "written": not dry_run,
        "folder": folder,
        "files": [
            {"path": str(f.path), "code": f.code, "collection": f.collection, "description": f.description}
            for f in files
        ],
        "notes": notes,
        "refused": refused,
        "warnings": warnings,
        "guide": guide_command(saved, folder),
        "up": up_command(saved, folder),
    }


def _transformed_sample(target: Any) -> Callable[[Any], list[dict[str, Any]]]:
    """A sample of a collection as a step would leave it, from the target (read only). Taken once per step:
    the files written after confirmation hold what the first pass showed."""
    import json

    from mongopat.migrate.server.runner import Runner

    runner = Runner(target.db, [])
    taken: dict[str, list[dict[str, Any]]] = {}

    def sample(step: Any) -> list[dict[str, Any]]:
        key = json.dumps(step.to_dict(), sort_keys=True, default=str)
        if key not in taken:
            taken[key] = runner.transformed_sample(step, PLAN_SAMPLE)
        return taken[key]

    return sample


def _archive(location: str | None) -> bool:
    from mongopat.sources.archive import is_archive

    return bool(location) and Path(str(location)).is_file() and is_archive(Path(str(location)))


def up_command(saved: dict[str, Any], folder: str) -> str:
    """The command that applies the planned migrations to the data the recommendations were made from: an
    archive is unpacked into a dump folder first (migrations write; an archive is read-only)."""
    from mongopat.project import current

    source = saved.get("source") if isinstance(saved.get("source"), dict) else {}
    location, database = source.get("location"), source.get("database")
    project = current()
    if location and not _archive(location) and project.names_source(None, location) and project.names_folder(folder):
        return "mongopat migrate up"  # the project file names both the data and the folder
    if source.get("kind") != "dump" or not location:
        return f"mongopat migrate up --uri <uri> --dir {folder}"
    if _archive(location):
        return f"mongopat unpack {location} --to dump && mongopat migrate up --dump dump/{database} --dir {folder}"
    return f"mongopat migrate up --dump {location} --dir {folder}"


def unpack(archive: str, to: str, database: str | None = None) -> dict[str, Any]:
    """A mongodump archive written out as a dump folder (``unpack_version`` 1)."""
    from mongopat.sources.unpack import unpack_archive

    return {
        "unpack_version": 1,
        "archive": archive,
        "databases": [
            {"database": u.database, "folder": str(u.folder), "collections": u.collections, "notes": u.skipped}
            for u in unpack_archive(Path(archive), Path(to), database)
        ],
    }


def guide_command(saved: dict[str, Any], folder: str) -> str:
    """The command that shows what the application must change for the planned migrations (``saved``: the
    recommendations file, which names the access file and the source it was made from)."""
    access = saved.get("access_file")
    source = saved.get("source") if isinstance(saved.get("source"), dict) else {}
    where = f"--dump {source['location']}" if source.get("kind") == "dump" and source.get("location") else "--uri ..."
    if up_command(saved, folder) == "mongopat migrate up":  # the project file names the data and the folder
        from mongopat.project import current

        named = bool(access) and current().names_access(access)
        return "mongopat migrate guide" + ("" if named else f" --access {access or 'access.yaml'}")
    return f"mongopat migrate guide --dir {folder} --access {access or 'access.yaml'} {where}"


def migrate_new(folder: str, name: str, pattern: str, collection: str, params: list[str] | None = None) -> Path:
    """A new migration file with one step; ``params`` are ``KEY=VALUE`` (VALUE is YAML), the others are
    written as placeholders to fill in."""
    import yaml

    from mongopat.migrate.script import write_new

    values = {}
    for item in params or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"--param {item!r}: expected KEY=VALUE")
        try:
            values[key] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise InputError(f"--param {item!r}: value is not valid YAML: {exc}") from None
    return write_new(Path(folder), name, pattern, collection, values)


def pending_work(spec: SourceSpec, folder: str) -> tuple[list[str], int]:
    """What ``up`` has to do: the migrations not applied (pending, failed, interrupted) and the documents
    written in an applied migration's old shape since it ran."""
    from mongopat.migrate.runner import refuse_edited

    rows = migrate_status(spec, folder)
    refuse_edited(rows)
    pending = [r["id"] for r in rows if r["state"] in ("pending", "failed", "running")]
    return pending, sum(r.get("pending_documents") or 0 for r in rows)


def migrate_rehearse(
    spec: SourceSpec,
    folder: str,
    ids: list[str] | None = None,
    access_path: str | None = None,
    sample: int = 10_000,
    scratch_uri: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """A dress rehearsal that never writes to the source: a sample copied into scratch, the migrations
    (``ids``, default the pending ones) run up, verified, guide-checked (with ``access_path``) and run down,
    and the result compared byte for byte with the copy."""
    from mongopat.migrate.rehearsal import FolderScratch, ServerScratch, rehearse
    from mongopat.migrate.script import load_folder

    migrations = load_folder(folder)
    if not migrations:
        raise InputError(f"no migrations in {folder}", hint="give --dir, or plan migrations with 'migrate plan'")
    guides = None
    if access_path:
        _, built = _guided(folder, access_path, None)
        guides = {guide.migration.id: guide for guide in built}
    states = {row["id"]: row["state"] for row in migrate_status(spec, folder)}
    chosen_ids = _chosen(migrations, ids, states, "pending")
    if not chosen_ids:
        raise InputError("nothing to rehearse: every migration is applied", hint="name migrations to rehearse them")
    chosen = [m for m in migrations if m.id in chosen_ids]
    if spec.dump:
        from mongopat.sources.dump import resolve_dump_folder

        source_folder, _ = resolve_dump_folder(Path(spec.dump), spec.db)
        result = rehearse(FolderScratch(source_folder), chosen, sample, guides, progress=progress)
        result["scratch"] = "a temporary folder (removed)"
        return result
    from pymongo.errors import PyMongoError

    from mongopat.redact import redact_uri
    from mongopat.sources.mongo import describe_error

    with _server(spec) as source:
        client = _scratch_server(scratch_uri, spec) if scratch_uri else source.client
        name = f"{source.database}_mongopat_rehearsal"
        existing = set(client.list_database_names())
        taken = [n for n in ServerScratch.database_names(name) if n in existing]
        if taken:
            raise InputError(
                f"scratch database {taken[0]} exists already (another rehearsal?)",
                hint="drop it, or give another deployment with --scratch-uri",
            )
        try:
            result = rehearse(ServerScratch(source.db, client, name), chosen, sample, guides, progress=progress)
        except PyMongoError as exc:
            raise describe_error(exc, scratch_uri or spec.uri) from None
        where = redact_uri(scratch_uri) if scratch_uri else "the source deployment"
        result["scratch"] = f"databases {name}* on {where} (dropped)"
        return result


def migrate_verify(spec: SourceSpec, folder: str, migration_id: str | None = None) -> dict[str, list[str]]:
    """Re-check the invariants of applied migrations: ``{id: [problems]}``."""
    return _migrations(spec, folder, "verify", migration_id)


def migrate_predictions(spec: SourceSpec, folder: str, migration_id: str | None = None) -> dict[str, list[Any]]:
    """Each applied migration's predicted figures against those ``up`` measured: ``{id: [difference]}``."""
    return _migrations(spec, folder, "predictions", migration_id)


@contextlib.contextmanager
def _migration_lock(spec: SourceSpec) -> Iterator[Any]:
    """The migration lock of a deployment or dump folder (the lease every ``migrate`` run takes)."""
    if spec.dump:
        from mongopat.migrate.dump_folder.runner import DumpRunner

        if spec.uri:
            raise InputError("give either --uri or --dump, not both")
        yield DumpRunner(spec.dump, [], None, spec.db).lock
        return
    from mongopat.migrate.bookkeeping import Lock

    with _server(spec) as source:
        yield Lock(source.writable_db())


def migrate_unlock(
    spec: SourceSpec, force: bool = False, confirm: Callable[[dict[str, Any]], bool] | None = None
) -> dict[str, Any]:
    """Show who holds the migration lock; release it when its lease has expired, or when ``force`` and
    ``confirm`` (asked with what the lock holds) agree for a live one. Only the lease that was shown is
    released: one renewed or taken over since is left alone (``released`` False, ``refused`` says why)."""
    with _migration_lock(spec) as lock:
        seen = lock.inspect()
        result: dict[str, Any] = {"unlock_version": 1, **seen, "released": False}
        if seen["state"] == "free":
            return result
        if seen["state"] == "live" and not force:
            result["refused"] = "the lease is live: its run may still be writing (--force releases it)"
            return result
        if seen["state"] == "live" and confirm is not None and not confirm(seen):
            result["refused"] = "not confirmed"
            return result
        result["released"] = lock.release_held_by(seen)
        if not result["released"]:
            result["refused"] = "the lock changed since it was read (renewed or taken over): run unlock again"
        return result


def _guided(folder: str, access_path: str, report: dict[str, Any] | None) -> tuple[list[Any], list[Any]]:
    """Every migration of ``folder`` and its guide, each one's "before" the reads as the earlier ones left them."""
    from mongopat.access.loader import load_access_file
    from mongopat.guide.build import build_guides
    from mongopat.migrate.script import load_folder

    if not Path(folder).is_dir():
        raise InputError(f"no migrations folder {folder}", hint="give --dir, or plan migrations with 'migrate plan'")
    migrations = load_folder(folder)
    known = [c["name"] for c in report["collections"]] if report else None
    access = load_access_file(access_path, known)
    return migrations, build_guides(migrations, access, report)


def _chosen(migrations: list[Any], ids: list[str] | None, states: dict[str, str] | None, wanted: str) -> list[str]:
    """The ids asked for (each must exist), else those whose state is (or is not, for "pending") ``wanted``."""
    known = [m.id for m in migrations]
    if ids:
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise InputError(f"unknown migration(s) {', '.join(unknown)}", hint=f"known: {', '.join(known) or 'none'}")
        return list(ids)
    if states is None:
        return known
    if wanted == "pending":
        return [i for i in known if states.get(i) != "applied"]
    return [i for i in known if states.get(i) == wanted]


def migrate_guide(
    folder: str,
    access_path: str,
    spec: SourceSpec | None = None,
    report_path: str | None = None,
    ids: list[str] | None = None,
    every: bool = False,
    progress: ProgressFactory | None = None,
) -> dict[str, Any]:
    """What the application must change for each migration (default: the pending ones): its reads and
    writes before and after, their cost, the order of deploys and the indexes; ``guide_version`` 1."""
    from mongopat.guide.output import guide_document
    from mongopat.report import load_report

    has_source = spec is not None and bool(spec.uri or spec.dump)
    if report_path and has_source:
        raise InputError("give either --report or a source (--uri/--dump), not both")
    notes: list[str] = []
    report = load_report(report_path) if report_path else None
    if has_source:
        assert spec is not None
        report = analyze(spec, progress=progress)
    if report is None:
        notes.append("no analysis (--report or --uri/--dump): documents examined are unknown")
    migrations, guides = _guided(folder, access_path, report)
    states = None
    if has_source and not every and not ids:
        assert spec is not None
        states = _states_of(spec, folder, notes)
    elif not every and not ids:
        notes.append("no target to tell applied migrations from pending ones: every migration is described")
    chosen = set(_chosen(migrations, ids, states, "pending"))
    return guide_document([g for g in guides if g.migration.id in chosen], notes)


def _states_of(spec: SourceSpec, folder: str, notes: list[str]) -> dict[str, str] | None:
    """The migrations' states on the target; None for an archive (read-only: no changelog), said in ``notes``."""
    if spec.dump and _archive(spec.dump):
        notes.append("an archive holds no changelog: every migration is described as pending")
        return None
    return {row["id"]: row["state"] for row in migrate_status(spec, folder)}


def migrate_guide_check(
    spec: SourceSpec,
    folder: str,
    access_path: str,
    ids: list[str] | None = None,
    samples: int = 5,
    seed: int = 0,
    scratch_uri: str | None = None,
) -> dict[str, Any]:
    """Prove each applied migration's guide on a dump folder's own data: today's reads on the backups
    ``migrate up --dump`` keeps, the rewritten ones on the migrated files, and the writes on both. Both
    states are loaded into two scratch databases on ``scratch_uri`` (created, then dropped), or else into
    the embedded engine."""
    from pymongo.errors import PyMongoError

    from mongopat.guide import GUIDE_VERSION
    from mongopat.guide.dump_check import check_migration
    from mongopat.sources.mongo import describe_error

    if not spec.dump or spec.uri:
        raise InputError("--check runs on a dump folder: give --dump (the folder 'migrate up --dump' migrated)")
    runner = _dump_runner(spec, folder)
    migrations, guides = _guided(folder, access_path, None)
    states = {row["id"]: row["state"] for row in runner.status()}
    chosen = _chosen(migrations, ids, states, "applied")
    if not chosen:
        raise InputError(f"no migration applied to {spec.dump} to check", hint="run 'migrate up --dump' first")
    not_applied = [i for i in chosen if states.get(i) != "applied"]
    if not_applied:
        raise InputError(f"not applied to {spec.dump}: {', '.join(not_applied)}", hint="run 'migrate up --dump' first")
    scratch = _scratch_server(scratch_uri, spec) if scratch_uri else None
    checked = []
    for guide in guides:
        if guide.migration.id not in chosen:
            continue
        try:
            result = check_migration(runner, guide, samples, seed, scratch)  # type: ignore[arg-type]
        except PyMongoError as exc:
            raise describe_error(exc, scratch_uri) from None
        checked.append(
            {
                "id": guide.migration.id,
                "reads_compared": result.reads_compared,
                "documents_compared": result.documents_compared,
                "writes_applied": result.writes_applied,
                "differences": [
                    {"kind": d.kind, "name": d.name, "message": d.message, "parameters": d.parameters}
                    for d in result.differences or []
                ],
                "skipped": result.skipped,
            }
        )
    return {"guide_version": GUIDE_VERSION, "ok": not any(c["differences"] for c in checked), "migrations": checked}


def _validator_violations(spec: SourceSpec, names: list[str]) -> dict[str, dict[str, Any]]:
    """Per collection with a validator, the documents it rejects (counted on the server)."""
    found = {}
    with _server(spec) as source:
        for name in names:
            seen = source.validator_violations(name)
            if seen is not None:
                found[name] = seen
    return found


def _scratch_server(uri: str, spec: SourceSpec) -> Any:
    """A client of the scratch deployment ``uri`` (its databases are mongopat's own for the check)."""
    from mongopat.sources.mongo import MongoSource

    return MongoSource(uri, "mongopat_scratch", timeout_ms=spec.timeout_ms, max_time_ms=spec.max_time_ms).client


def check(
    spec: SourceSpec | None = None,
    report_path: str | None = None,
    access_path: str | None = None,
    config_path: str | None = None,
    migrations_dir: str | None = None,
    snapshot_path: str | None = None,
    write_snapshot_path: str | None = None,
    fail_on: str = "error",
    thresholds: dict[str, dict[str, float]] | None = None,
    collections: list[str] | None = None,
    today: datetime.date | None = None,
    progress: ProgressFactory | None = None,
) -> dict[str, Any]:
    """The CI gate: every check over a live source, a dump folder or a saved report.

    Returns the findings (waivers applied), those that fail at ``fail_on``, and which checks ran.
    """
    from mongopat.check.config import CheckConfig, check_section_of_access_file
    from mongopat.check.config import load_config as load_check_config
    from mongopat.check.findings import (
        CHECKS,
        apply_waivers,
        drift_findings,
        failing,
        migration_findings,
        recommendation_findings,
        rule_findings,
        validator_findings,
    )
    from mongopat.check.snapshot import build_snapshot, load_snapshot
    from mongopat.check.snapshot import compare as compare_snapshots
    from mongopat.report import load_report, write_report
    from mongopat.rules.base import SEVERITIES, SEVERITY_RANK

    if fail_on not in SEVERITIES:
        raise InputError(f"--fail-on {fail_on!r}: one of {', '.join(SEVERITIES)}")
    has_source = spec is not None and bool(spec.uri or spec.dump)
    if report_path and has_source:
        raise InputError("give either --report or a source (--uri/--dump), not both")
    config = CheckConfig()
    default_config = Path("mongopat.yaml")
    if config_path or default_config.exists():
        config.merge(load_check_config(config_path or default_config))
    if access_path:
        section = check_section_of_access_file(access_path)
        if section is not None:
            config.merge(section)
    merged_thresholds = dict(config.thresholds)
    for code, values in (thresholds or {}).items():
        merged_thresholds.setdefault(code, {}).update(values)
    report = load_report(report_path) if report_path else analyze(spec or SourceSpec(), collections, progress=progress)
    notes: list[str] = []
    checks = {name: {"ran": False, "note": ""} for name in CHECKS}
    findings: list[Finding] = []

    result = recommend(report, access_path, merged_thresholds)
    findings.extend(recommendation_findings(result))
    notes.extend(result.get("notes", []))
    checks["recommendations"]["ran"] = True

    folder = migrations_dir or "migrations"
    if has_source and spec is not None and spec.dump and _archive(spec.dump):
        checks["migrations"]["note"] = (
            "an archive holds no changelog: migrations are checked on a server or dump folder"
        )
    elif has_source and Path(folder).is_dir():
        assert spec is not None
        findings.extend(migration_findings(migrate_status(spec, folder), folder))
        checks["migrations"]["ran"] = True
    else:
        checks["migrations"]["note"] = (
            f"no migrations folder {folder}"
            if not Path(folder).is_dir()
            else "needs the target (--uri or --dump), not a saved report"
        )
    if snapshot_path:
        changes = compare_snapshots(
            load_snapshot(snapshot_path), build_snapshot(report), config.presence_tolerance, config.length_factor
        )
        findings.extend(drift_findings(changes, snapshot_path))
        checks["drift"]["ran"] = True
    else:
        checks["drift"]["note"] = "no --snapshot given"
    if spec is not None and spec.uri:
        findings.extend(validator_findings(_validator_violations(spec, [c["name"] for c in report["collections"]])))
        checks["validators"]["ran"] = True
    else:
        checks["validators"]["note"] = "needs a server (--uri): validators live on the collections"
    if config.rules:
        findings.extend(rule_findings(report, config.rules, config.sources[0] if config.sources else None))
        checks["rules"]["ran"] = True
    else:
        checks["rules"]["note"] = "no rules declared"
    if write_snapshot_path:
        write_report(build_snapshot(report), write_snapshot_path)
    apply_waivers(findings, config, today)
    findings.sort(key=lambda f: (-SEVERITY_RANK[f.severity], f.check, f.collection or "", f.id))
    failed = failing(findings, fail_on)
    by_severity = {s: sum(1 for f in findings if f.severity == s and not f.waived) for s in SEVERITIES}
    return {
        "ok": not failed,
        "fail_on": fail_on,
        "findings": findings,
        "failing": failed,
        "checks": checks,
        "summary": {
            "findings": len(findings),
            "failing": len(failed),
            "waived": sum(1 for f in findings if f.waived),
            "by_severity": by_severity,
        },
        "notes": notes,
        "source": report["source"],
        "checked_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
