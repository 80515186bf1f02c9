"""The migrations folder: one file per migration, ordered by the number its id starts with.

A YAML migration (``0003_bucket_readings.yaml``) holds an ``id`` (the file name without extension), a
``description`` and a list of declarative ``steps``. A Python migration (``0004_fix.py``) defines
``up(db)`` and ``down(db)``; it is the only kind of file mongopat ever executes, and only because its
name ends in ``.py``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from mongopat.errors import InputError
from mongopat.migrate.operations import STEP_OPERATIONS
from mongopat.migrate.steps import STEP_TYPES, Step, StepError, build_step
from mongopat.yamlfile import compose_yaml, read_yaml_text

ID_PATTERN = re.compile(r"^(\d{4,})_[A-Za-z0-9_]+$")
TOP_KEYS = ("id", "description", "steps", "prediction")


@dataclass
class Migration:
    id: str
    path: Path
    description: str
    checksum: str
    steps: list[Step] = field(default_factory=list)
    python: ModuleType | None = None
    # The file's text and its steps as written: the changelog keeps both when the migration is applied,
    # so that 'migrate repair' can show what an edit changed and tell a reworded file from new steps.
    text: str = ""
    spec: str | None = None  # the steps as canonical JSON (values YAML reads as dates become strings)
    # What ``migrate plan`` predicted the migration does (``mongopat.predictions.Prediction``); ``up``
    # records what it measured beside it.
    prediction: dict[str, Any] | None = None

    @property
    def number(self) -> int:
        match = ID_PATTERN.match(self.id)
        return int(match.group(1)) if match else 0

    @property
    def collections(self) -> list[str]:
        return list(dict.fromkeys(step.collection for step in self.steps))


def checksum(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_folder(folder: str | Path) -> list[Migration]:
    """Every migration in ``folder``, in order; raises :class:`InputError` naming file and line."""
    root = Path(folder)
    if not root.exists():
        return []
    if not root.is_dir():
        raise InputError(f"--dir {root} is not a folder")
    migrations = []
    for path in sorted(root.iterdir()):
        if path.name.startswith(".") or path.suffix not in (".yaml", ".yml", ".py"):
            continue
        migrations.append(load_migration(path))
    seen: dict[int, str] = {}
    for migration in migrations:
        if migration.number in seen:
            raise InputError(
                f"{migration.path}: number {migration.number:04d} is also used by {seen[migration.number]}"
            )
        seen[migration.number] = migration.id
    return sorted(migrations, key=lambda m: m.number)


def load_migration(path: Path) -> Migration:
    stem = path.stem
    if not ID_PATTERN.match(stem):
        raise InputError(f"{path}: a migration file is named NNNN_name.yaml (e.g. 0003_bucket_readings.yaml)")
    if path.suffix == ".py":
        return _load_python(path)
    text = read_yaml_text(path, "migration file")
    root = compose_yaml(text, str(path))
    if not isinstance(root, yaml.MappingNode):
        raise InputError(f"{path}:1: a migration file is a mapping with id, description and steps")
    data = yaml.safe_load(text)
    nodes = {key.value: value for key, value in root.value}
    for key_node, _ in root.value:
        if key_node.value not in TOP_KEYS:
            raise InputError(
                f"{path}:{key_node.start_mark.line + 1}: unknown key {key_node.value!r} (keys: {', '.join(TOP_KEYS)})"
            )
    if data.get("id") != stem:
        line = nodes["id"].start_mark.line + 1 if "id" in nodes else 1
        raise InputError(f"{path}:{line}: id must be the file name without extension ({stem!r})")
    steps_node = nodes.get("steps")
    if not isinstance(steps_node, yaml.SequenceNode) or not steps_node.value:
        line = steps_node.start_mark.line + 1 if steps_node is not None else 1
        raise InputError(f"{path}:{line}: 'steps' must be a non-empty list")
    steps = []
    digest = hashlib.sha256(path.read_bytes())
    for index, (step_data, node) in enumerate(zip(data["steps"], steps_node.value, strict=True)):
        try:
            step = build_step(step_data)
            digest.update(STEP_OPERATIONS[step.name].resolve(step, path.parent))
        except StepError as exc:
            raise InputError(f"{path}:{node.start_mark.line + 1}: steps[{index}]: {exc}") from None
        steps.append(step)
    description = str(data.get("description") or "")
    prediction = data.get("prediction")
    if prediction is not None and not (
        isinstance(prediction, dict) and isinstance(prediction.get("collections"), list)
    ):
        line = nodes["prediction"].start_mark.line + 1
        raise InputError(f"{path}:{line}: 'prediction' is a mapping with a 'collections' list (as migrate plan writes)")
    # The steps as written, with what they read from other files: repair tells a new validator from a comment.
    written = [dict(d, loaded=s.loaded) if s.loaded else d for d, s in zip(data["steps"], steps, strict=True)]
    spec = json.dumps(written, sort_keys=True, default=str)
    return Migration(stem, path, description, digest.hexdigest(), steps, text=text, spec=spec, prediction=prediction)


def _load_python(path: Path) -> Migration:
    spec = importlib.util.spec_from_file_location(f"mongopat_migration_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise InputError(f"{path}: cannot be loaded as Python")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's code: report it, whatever it raised
        raise InputError(f"{path}: loading failed: {type(exc).__name__}: {exc}") from None
    for name in ("up", "down"):
        if not callable(getattr(module, name, None)):
            raise InputError(f"{path}: a Python migration defines {name}(db)")
    doc_lines = (module.__doc__ or "").strip().splitlines()
    description = str(getattr(module, "description", "") or (doc_lines[0] if doc_lines else ""))
    text = path.read_text(encoding="utf-8", errors="replace")
    return Migration(path.stem, path, description, checksum(path), [], module, text=text)


def next_number(migrations: list[Migration]) -> int:
    return max((m.number for m in migrations), default=0) + 1


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()[:40] or "migration"


def render(
    migration_id: str,
    description: str,
    steps: list[dict[str, Any]],
    header: str = "",
    prediction: dict[str, Any] | None = None,
) -> str:
    lines = [f"# {line}" for line in header.splitlines()] if header else []
    data: dict[str, Any] = {"id": migration_id, "description": description, "steps": steps}
    if prediction:
        data["prediction"] = prediction
    body = yaml.safe_dump(data, sort_keys=False, width=100)
    return "\n".join(lines + [body])


def write_new(folder: Path, name: str, pattern: str, collection: str, params: dict[str, Any]) -> Path:
    """A migration with one step of type ``pattern``; parameters not given are left for the user to fill."""
    if pattern not in STEP_TYPES:
        raise InputError(f"unknown step type {pattern!r}", hint=f"one of: {', '.join(STEP_TYPES)}")
    step_type = STEP_TYPES[pattern]
    step: dict[str, Any] = {"step": pattern, "collection": collection}
    for key, param in step_type.params.items():
        if key in params:
            step[key] = params[key]
        elif param.required or key in step_type.fill_in:
            step[key] = None
    unknown = set(params) - set(step_type.params)
    if unknown:
        raise InputError(
            f"{pattern} has no parameter {', '.join(sorted(unknown))}",
            hint=f"parameters: {', '.join(step_type.params)}",
        )
    folder.mkdir(parents=True, exist_ok=True)
    number = next_number(load_folder(folder))
    migration_id = f"{number:04d}_{slug(name)}"
    path = folder / f"{migration_id}.yaml"
    missing = [key for key, value in step.items() if value is None]
    header = f"{step_type.summary}.\nFill in: {', '.join(missing)}." if missing else step_type.summary + "."
    path.write_text(render(migration_id, name, [step], header), encoding="utf-8")
    return path
