"""The Python API of migrations, for applications that migrate at deploy time.

::

    import pymongo
    from mongopat import api

    db = pymongo.MongoClient("mongodb://db1,db2/?replicaSet=rs0")["shop"]
    api.up(db, "migrations", batch_size=500, max_docs_per_sec=2000)
    print(api.status(db, "migrations"))

    api.up(api.dump_folder("./export"), "migrations")   # the same migrations on a dump folder

The target is a pymongo ``Database`` or anything with the same interface (mongomock's too: nothing here
checks its class), or a dump folder (:func:`dump_folder`). The migrations are a folder, or what
:func:`load` returned. The options are those of ``mongopat migrate up``: ``batch_size``, ``lock_timeout``,
``lease_seconds``, ``max_docs_per_sec`` (throttle), ``max_lag``, ``workers``, ``client_side``, ``write_concern``,
``retries``, ``dry_run``, and ``progress`` (called with migration id, step index, documents done, documents in all).
The command line calls these same functions, for both kinds of target.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mongopat.errors import InputError
from mongopat.migrate.runner import RunOptions

OPTION_NAMES = tuple(f.name for f in dataclasses.fields(RunOptions))


def run_options(**options: Any) -> RunOptions:
    """RunOptions from keyword options; an unknown name is an input error that lists the known ones."""
    unknown = sorted(set(options) - set(OPTION_NAMES))
    if unknown:
        raise InputError(f"unknown option(s) {', '.join(unknown)}", hint=f"options: {', '.join(OPTION_NAMES)}")
    concern = str(options.get("write_concern", "majority"))
    if concern != "majority" and not concern.isdigit():
        raise InputError(
            f"write_concern {concern!r}: 'majority' or a number of members",
            hint="on the command line: --write-concern majority, or --write-concern 2",
        )
    return RunOptions(**options)


def load(directory: str | Path) -> list[Any]:
    """The migrations of ``directory`` in order; a file that is wrong is an input error naming its line."""
    from mongopat.migrate.script import load_folder

    return load_folder(directory)


@dataclasses.dataclass(frozen=True)
class DumpFolder:
    """A dump folder as the target of migrations: ``path``, and ``database`` when it holds several."""

    path: Path
    database: str | None = None


def dump_folder(path: str | Path, database: str | None = None) -> DumpFolder:
    """A folder of mongoexport / mongodump files to migrate in place (``--dump``)."""
    return DumpFolder(Path(path), database)


Migrations = str | Path | Sequence[Any]


def runner(target: Any, migrations: Migrations, **options: Any) -> Any:
    """The runner of ``migrations`` on ``target`` (a database or a :class:`DumpFolder`), which every
    function below uses: the server's or the dump folder's, with the same commands."""
    settings = run_options(**options)
    loaded = load(migrations) if isinstance(migrations, (str, Path)) else list(migrations)
    if isinstance(target, DumpFolder):
        from mongopat.migrate.dump_folder.runner import DumpRunner

        return DumpRunner(target.path, loaded, settings, target.database)
    from mongopat.migrate.server.runner import Runner

    return Runner(_with_write_concern(target, settings.write_concern), loaded, settings)


def _with_write_concern(db: Any, concern: str) -> Any:
    """``db`` reading from the primary, with the write concern every write of the run uses (a database with
    no such notions, like mongomock's, is used as it is)."""
    try:
        from pymongo import ReadPreference, WriteConcern

        w: str | int = int(concern) if concern.isdigit() else concern
        return db.with_options(read_preference=ReadPreference.PRIMARY, write_concern=WriteConcern(w=w))
    except (AttributeError, NotImplementedError, TypeError):
        return db


def up(target: Any, migrations: Migrations, to: str | None = None, **options: Any) -> list[dict[str, Any]]:
    """Apply pending migrations in order (resuming an interrupted one), then migrate documents written in the
    old shape since earlier migrations ran. One result per migration."""
    return runner(target, migrations, **options).up(to)


def down(target: Any, migrations: Migrations, to: str | None = None, **options: Any) -> list[str]:
    """Revert the last applied migration, every one after ``to``, or all (``to="base"``); the ids reverted."""
    return runner(target, migrations, **options).down(to)


def down_plan(target: Any, migrations: Migrations, to: str | None = None) -> list[dict[str, Any]]:
    """What :func:`down` would revert, changing nothing: migrations newest first with their steps."""
    return runner(target, migrations).down_plan(to)


def verify(target: Any, migrations: Migrations, migration_id: str | None = None) -> dict[str, list[str]]:
    """Re-check applied migrations: ``{id: [problems]}`` (documents in the old shape are not problems: see
    :func:`status`)."""
    return runner(target, migrations).verify(migration_id)


def predictions(target: Any, migrations: Migrations, migration_id: str | None = None) -> dict[str, list[Any]]:
    """What ``up`` measured against what each applied migration's file predicted: ``{id: [difference]}``
    (:class:`mongopat.predictions.Difference`; migrations without a prediction are left out)."""
    run = runner(target, migrations)
    return {
        m.id: run.prediction_differences(m)
        for m in run.migrations
        if m.prediction and (migration_id is None or m.id == migration_id) and run.prediction_differences(m)
    }


def status(target: Any, migrations: Migrations) -> list[dict[str, Any]]:
    """Every migration with its state, and for applied ones the documents still in the old shape."""
    return runner(target, migrations).status()


def stamp(target: Any, migrations: Migrations, to: str, force: bool = False, **options: Any) -> dict[str, Any]:
    """Record the migrations up to and including ``to`` as applied without running them, once no step finds
    documents in the old shape (``force``: anyway); ``to="base"`` forgets every recorded migration."""
    return runner(target, migrations, **options).stamp(to, force)


def repair(
    target: Any,
    migrations: Migrations,
    migration_id: str,
    force: bool = False,
    confirm: Callable[[dict[str, Any]], bool] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Record the edited file of an applied migration as the one applied, once ``confirm`` (shown the diff
    against the applied text) agrees; refused when its steps changed, unless ``force``."""
    return runner(target, migrations, **options).repair(migration_id, force, confirm)


__all__ = [
    "OPTION_NAMES", "DumpFolder", "down", "dump_folder", "load", "repair", "run_options", "runner", "stamp",
    "status", "up", "verify",
]  # fmt: skip
