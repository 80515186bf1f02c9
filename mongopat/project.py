"""The project file: ``mongopat.yaml`` in the working directory names the source, the migrations folder and
the access-pattern file once, so that ``mongopat migrate up`` (and every other command) needs no flags.

```yaml
version: 1
source: {dump: ./export, db: shop}     # or {uri: mongodb://host/shop}: credentials come from MONGOPAT_URI
migrations: migrations
access: access.yaml
```

A flag given on the command line wins over the file; ``MONGOPAT_URI`` counts as given. Paths in the file
are relative to the file's folder. The same file holds ``mongopat check``'s configuration (thresholds,
rules, waivers, snapshot): :mod:`mongopat.check.config` reads those keys, this module the rest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from mongopat.errors import InputError
from mongopat.yamlfile import YamlFileError, YamlValidator, compose_yaml, read_yaml_text, reject_foreign_tags

FILE_NAME = "mongopat.yaml"
PROJECT_KEYS = ("source", "migrations", "access")
CHECK_KEYS = ("thresholds", "rules", "waivers", "snapshot")  # check's configuration (mongopat.check.config)
TOP_KEYS = ("version", *PROJECT_KEYS, *CHECK_KEYS)
SOURCE_KEYS = ("uri", "dump", "db")
DEFAULT_MIGRATIONS = "migrations"


@dataclass(frozen=True)
class Project:
    """What the project file says; every field None where it says nothing (or where there is no file)."""

    file: Path | None = None
    uri: str | None = None
    dump: str | None = None
    db: str | None = None
    migrations: str | None = None
    access: str | None = None

    def migrations_folder(self, given: str | None) -> str:
        return given or self.migrations or DEFAULT_MIGRATIONS

    def access_file(self, given: str | None) -> str | None:
        return given or self.access

    def source(self, uri: str | None, dump: str | None, db: str | None) -> tuple[str | None, str | None, str | None]:
        """The source the command reads: the flags where any names one, else the file's."""
        if uri or dump:
            return uri, dump, db or (self.db if self.names_source(uri, dump) else None)
        return self.uri, self.dump, db or self.db

    def names_source(self, uri: str | None, dump: str | None) -> bool:
        """Whether the file names this source (so a command or hint need not)."""
        return bool(self.uri or self.dump) and self.uri == uri and same_path(self.dump, dump)

    def names_folder(self, folder: str) -> bool:
        """Whether ``folder`` is the migrations folder a command takes without ``--dir``."""
        return same_path(self.migrations_folder(None), folder)

    def names_access(self, access: str | None) -> bool:
        """Whether the file names an access file and ``access`` is it (or is not given)."""
        return bool(self.access) and (not access or same_path(self.access, access))


def same_path(a: str | None, b: str | None) -> bool:
    """Both None, or the same file or folder however written (relative, ``~``, absolute)."""
    if not a or not b:
        return a == b
    return a == b or Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def _relative(folder: Path, value: str) -> str:
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else folder / path)


def parse_project(path: Path, check: YamlValidator, root: yaml.Node) -> Project:
    """The project keys of a ``mongopat.yaml`` already composed (its other keys belong to ``check``)."""
    found = check.mapping(root, "(top)", TOP_KEYS)
    if found is None:
        return Project(path)
    if "version" in found and check.value(found["version"]) != 1:
        check.error(found["version"], "(top).version", "unsupported version (this mongopat reads version 1)")
    folder = path.parent
    values: dict[str, str | None] = {}
    if "source" in found:
        source = check.mapping(found["source"], "source", SOURCE_KEYS) or {}
        for key, node in source.items():
            values[key] = check.string(node, f"source.{key}")
        if values.get("uri") and values.get("dump"):
            check.error(found["source"], "source", "give uri or dump, not both")
        uri = values.get("uri")
        if uri and _has_credentials(uri):
            check.error(
                source["uri"],
                "source.uri",
                "keep credentials out of the project file: set MONGOPAT_URI in the environment instead",
            )
            values["uri"] = None
    for key in ("migrations", "access"):
        if key in found:
            values[key] = check.string(found[key], key)
    for key in ("dump", "migrations", "access"):
        if values.get(key):
            values[key] = _relative(folder, values[key] or "")
    return Project(path, **values)


def _has_credentials(uri: str) -> bool:
    from mongopat.redact import secrets

    return bool(secrets(uri))


def load_project(folder: Path | None = None) -> Project:
    """The project file of ``folder`` (the working directory by default); an empty Project where none is."""
    path = (folder or Path.cwd()) / FILE_NAME
    if not path.is_file():
        return Project()
    text = read_yaml_text(path, "project file")
    root = compose_yaml(text, str(path))
    if root is None:
        return Project(path)
    check = YamlValidator(str(path))
    reject_foreign_tags(check, root)
    project = parse_project(path, check, root)
    if check.problems:
        raise YamlFileError(check.problems)
    return project


_loaded: dict[Path, Project] = {}


def current() -> Project:
    """The working directory's project, read once per process."""
    folder = Path.cwd().resolve()
    if folder not in _loaded:
        _loaded[folder] = load_project(folder)
    return _loaded[folder]


def write_project(
    folder: Path,
    uri: str | None,
    dump: str | None,
    db: str | None,
    migrations: str,
    access: str | None,
    force: bool = False,
) -> Path:
    """Write ``folder/mongopat.yaml`` naming the source, the migrations folder and the access file."""
    path = folder / FILE_NAME
    if path.exists() and not force:
        raise InputError(f"{path} exists", hint="edit it, or pass --force to write a new one")
    if uri and dump:
        raise InputError("give --uri or --dump, not both")
    if not (uri or dump or os.environ.get("MONGOPAT_URI")):
        raise InputError("name the source: --dump FOLDER_OR_ARCHIVE or --uri mongodb://host/db")
    if uri and _has_credentials(uri):
        raise InputError(
            "the URI carries credentials: they do not belong in a file that is committed",
            hint="write the URI without them, and set MONGOPAT_URI (with them) in the environment",
        )
    source = {key: value for key, value in (("uri", uri), ("dump", dump), ("db", db)) if value}
    document: dict[str, object] = {"version": 1}
    if source:
        document["source"] = source
    document["migrations"] = migrations
    if access:
        document["access"] = access
    text = (
        "# mongopat's project file: the flags every command would otherwise need (a flag given still wins).\n"
        + yaml.safe_dump(document, sort_keys=False, default_flow_style=False)
    )
    path.write_text(text, encoding="utf-8")
    _loaded.pop(folder.resolve(), None)
    return path


__all__ = ["FILE_NAME", "Project", "current", "load_project", "same_path", "write_project"]
