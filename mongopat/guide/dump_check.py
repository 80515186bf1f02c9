"""``migrate guide --check`` on a dump folder: each applied migration's reads and writes proven on the
folder's own data, the state before the migration taken from the backups ``migrate up --dump`` keeps.

Both states are loaded into two scratch databases: on a server given with ``--scratch-uri`` (created for
the check and dropped after it), or else in the embedded engine (mongomock, in memory, so a collection must
fit in memory; it computes a few operators differently from MongoDB: the README's conformance table). The
folder is read, never written.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from mongopat.guide.build import MigrationGuide
from mongopat.guide.proof import ProofResult, prove
from mongopat.migrate.dump_folder.files import CHANGELOG_FILE, DumpFolder, backup_name, decoded_documents
from mongopat.migrate.dump_folder.runner import DumpRunner
from mongopat.sources.dump import BSON_SUFFIXES, JSON_SUFFIXES
from mongopat.timeseries.buckets import BUCKETS_PREFIX, unpack

_SUFFIXES = BSON_SUFFIXES + JSON_SUFFIXES


def collection_files(folder: Path) -> dict[str, str]:
    """Collection name -> file suffix, for the folder's collections (not mongopat's own files)."""
    found: dict[str, str] = {}
    for path in sorted(folder.iterdir()):
        if path.name.startswith(("mongopat_", ".")) or path.name == CHANGELOG_FILE:
            continue
        suffix = next(
            (s for s in _SUFFIXES if path.name.endswith(s) and not path.name.endswith(".metadata.json")), None
        )
        if suffix:
            found.setdefault(path.name[: -len(suffix)], suffix)
    return found


def states(runner: DumpRunner, guide: MigrationGuide) -> tuple[dict[str, Path], dict[str, Path]]:
    """The files holding each collection before the migration and after it."""
    # The runner's own Migration object: it tells this migration's backups from later ones by identity.
    migration = next(m for m in runner.migrations if m.id == guide.migration.id)
    created = {name for step in migration.steps for name in step.created_collections()}
    before: dict[str, Path] = {}
    after: dict[str, Path] = {}
    for name, suffix in collection_files(runner.folder).items():
        after[name] = runner.after(migration.id, len(migration.steps) - 1, name, suffix)
        if name in created:
            continue
        kept = (runner.folder / backup_name(migration.id, j, f"{name}{suffix}") for j in range(len(migration.steps)))
        before[name] = next((path for path in kept if path.exists()), after[name])
    return before, after


def check_migration(
    runner: DumpRunner, guide: MigrationGuide, samples: int, seed: int, client: Any = None
) -> ProofResult:
    """Prove ``guide`` with both states loaded into ``client`` (a scratch server), or the embedded engine."""
    from mongopat.sources.mongo import mongomock_client

    before_files, after_files = states(runner, guide)
    embedded = mongomock_client("guide-check") if client is None else None
    client = client if client is not None else embedded
    # Names of their own: two checks on one scratch server never share a database.
    run = uuid.uuid4().hex[:8]
    before_db = client[f"mongopat_guide_{run}_before"]
    after_db = client[f"mongopat_guide_{run}_after"]
    try:
        # A scratch server holds a time-series collection as one; the embedded engine has none, and holds
        # its readings as documents (what a read of the collection returns).
        as_timeseries = client is not embedded
        _load(before_db, before_files, runner.folder, as_timeseries)
        _load(after_db, after_files, runner.folder, as_timeseries)
        return prove(guide, before_db, after_db, samples=samples, seed=seed)
    finally:
        client.drop_database(before_db.name)
        client.drop_database(after_db.name)


def _load(db: Any, files: dict[str, Path], folder: Path, as_timeseries: bool) -> None:
    """Each collection's documents into ``db``; a time-series collection's (its buckets' file) as readings,
    into a time-series collection with its options on a scratch server (``as_timeseries``)."""
    for name, path in files.items():
        documents = decoded_documents(path)
        if name.startswith(BUCKETS_PREFIX):
            name = name[len(BUCKETS_PREFIX) :]
            options = DumpFolder(folder).timeseries(name)
            if options is None:
                continue  # buckets without their options: no reading can be told from them
            documents = (m for bucket in decoded_documents(path) for m in unpack(bucket, options).measurements)
            if as_timeseries:
                db.create_collection(name, timeseries=options.create_options())
        batch = []
        for document in documents:
            batch.append(document)
            if len(batch) == 1000:
                db[name].insert_many(batch)
                batch = []
        if batch:
            db[name].insert_many(batch)
