"""Reading and validating the YAML files mongopat takes (access-pattern files, migrations, check
configuration): the node tree with line numbers (``yaml.SafeLoader``: no tag that builds objects), a
validator that checks it node by node, and one error listing every problem, each with file:line:column."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mongopat.errors import InputError


class YamlFileError(InputError):
    """One or more problems in a YAML file (all of them listed)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(
            problems[0] if len(problems) == 1 else f"{len(problems)} problems:\n  " + "\n  ".join(problems)
        )


def compose_yaml(text: str, file: str) -> yaml.Node | None:
    """The YAML node tree (no object is built), or an error naming file, line and column."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark else file
        raise YamlFileError([f"{where}: not valid YAML: {exc.problem or exc}"]) from None
    except yaml.YAMLError as exc:
        raise YamlFileError([f"{file}: not valid YAML: {exc}"]) from None


def read_yaml_text(path: str | Path, what: str) -> str:
    """The text of the YAML file ``what`` (e.g. "config file"), or an error naming it: missing,
    unreadable or not UTF-8."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {what} {path}: {exc}") from None


@dataclass
class Location:
    """Where a value stands in the file, for messages: ``access.yaml:12:9``."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*/\s*(s|sec|second|m|min|minute|h|hr|hour|d|day)\s*$")
_UNIT_SECONDS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hr": 3600,
                 "hour": 3600, "d": 86400, "day": 86400}  # fmt: skip
_MULTIPLIER = {"": 1, "k": 1_000, "m": 1_000_000}


def parse_rate(value: Any) -> float:
    """``300``, ``2.5``, ``"300/s"``, ``"5/min"``, ``"2k/h"`` -> operations per second."""
    if isinstance(value, bool):
        raise ValueError("a rate is a number or a string like '300/s', '5/min', '2k/h'")
    if isinstance(value, (int, float)):
        rate = float(value)
    elif isinstance(value, str):
        match = _RATE.match(value)
        if not match:
            raise ValueError(f"{value!r} is not a rate: use a number (per second) or '300/s', '5/min', '2k/h'")
        number, multiplier, unit = match.groups()
        rate = float(number) * _MULTIPLIER[multiplier.lower()] / _UNIT_SECONDS[unit]
    else:
        raise ValueError("a rate is a number or a string like '300/s', '5/min', '2k/h'")
    if rate < 0 or rate != rate:
        raise ValueError("a rate cannot be negative")
    return rate


class YamlValidator:
    """Checks a YAML node tree piece by piece, collecting every problem with file:line:column."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[str] = []
        self._constructor = yaml.SafeLoader("")

    def where(self, node: yaml.Node) -> Location:
        return Location(self.file, node.start_mark.line + 1, node.start_mark.column + 1)

    def error(self, node: yaml.Node, path: str, message: str) -> None:
        self.problems.append(f"{self.where(node)}: {path}: {message}")

    def value(self, node: yaml.Node) -> Any:
        return self._constructor.construct_object(node, deep=True)

    def mapping(
        self, node: yaml.Node, path: str, allowed: Iterable[str], required: Iterable[str] = ()
    ) -> dict[str, yaml.Node] | None:
        if not isinstance(node, yaml.MappingNode):
            self.error(node, path, f"expected a mapping, found {describe_node(node)}")
            return None
        allowed = list(allowed)
        found: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            key = self.value(key_node)
            if not isinstance(key, str):
                self.error(key_node, path, f"keys are strings, found {key!r}")
                continue
            if key in found:
                self.error(key_node, f"{path}.{key}", "duplicate key")
                continue
            if allowed and key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else f" (expected one of: {', '.join(allowed)})"
                self.error(key_node, f"{path}.{key}", f"unknown key{hint}")
                continue
            found[key] = value_node
        for key in required:
            if key not in found:
                self.error(node, path, f"missing required key '{key}'")
        return found

    def items(
        self,
        node: yaml.Node,
        path: str,
        what: str,
        parse: Callable[[YamlValidator, yaml.Node, str], Any],
        key: tuple[str, str] | None = None,
    ) -> list[Any]:
        """The parsed entries of a list (``parse`` returns None for a broken one); ``key`` = (attribute,
        label) reports entries whose attribute repeats an earlier one's."""
        if not isinstance(node, yaml.SequenceNode):
            self.error(node, path, f"expected a list of {what}, found {describe_node(node)}")
            return []
        found, seen = [], set()
        for index, item_node in enumerate(node.value):
            item = parse(self, item_node, f"{path}[{index}]")
            if item is None:
                continue
            if key is not None:
                value = getattr(item, key[0])
                if value in seen:
                    self.error(item_node, f"{path}[{index}].{key[0]}", f"duplicate {key[1]} '{value}'")
                seen.add(value)
            found.append(item)
        return found

    def free_mapping(self, node: yaml.Node, path: str) -> dict[str, yaml.Node] | None:
        return self.mapping(node, path, ())

    def string(self, node: yaml.Node, path: str) -> str | None:
        value = self.value(node) if isinstance(node, yaml.ScalarNode) else None
        if not isinstance(value, str) or not value:
            self.error(node, path, f"expected a non-empty string, found {describe_node(node)}")
            return None
        return value

    def strings(self, node: yaml.Node, path: str) -> list[str]:
        if not isinstance(node, yaml.SequenceNode):
            self.error(node, path, f"expected a list of field names, found {describe_node(node)}")
            return []
        return [s for i, item in enumerate(node.value) if (s := self.string(item, f"{path}[{i}]")) is not None]

    def boolean(self, node: yaml.Node, path: str) -> bool | None:
        value = self.value(node)
        if not isinstance(value, bool):
            self.error(node, path, f"expected true or false, found {describe_node(node)}")
            return None
        return value

    def integer(self, node: yaml.Node, path: str, minimum: int = 0) -> int | None:
        value = self.value(node)
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(node, path, f"expected a whole number, found {describe_node(node)}")
            return None
        if value < minimum:
            self.error(node, path, f"must be at least {minimum}")
            return None
        return value

    def rate(self, node: yaml.Node, path: str) -> float | None:
        try:
            return parse_rate(self.value(node))
        except ValueError as exc:
            self.error(node, path, str(exc))
            return None

    def number(self, node: yaml.Node, path: str) -> float | None:
        value = self.value(node)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.error(node, path, f"expected a number, found {describe_node(node)}")
            return None
        return float(value)

    def sort(self, node: yaml.Node, path: str) -> dict[str, int]:
        fields = self.free_mapping(node, path) or {}
        out = {}
        for name, direction_node in fields.items():
            direction = self.value(direction_node)
            if direction not in (1, -1):
                self.error(direction_node, f"{path}.{name}", "sort direction is 1 or -1")
                continue
            out[name] = direction
        return out


def describe_node(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if node.tag.endswith(":null"):
        return "nothing"
    return repr(node.value)


_PLAIN_TAGS = {
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")
}


def reject_foreign_tags(check: YamlValidator, root: yaml.Node) -> None:
    """Refuse tags beyond plain YAML (``!!python/...`` and the like) before anything is constructed."""
    pending = [root]
    while pending:
        node = pending.pop()
        if node.tag not in _PLAIN_TAGS:
            check.error(node, "(tag)", f"unsupported YAML tag {node.tag!r}: only plain YAML values are read")
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                pending.extend((key, value))
        elif isinstance(node, yaml.SequenceNode):
            pending.extend(node.value)
