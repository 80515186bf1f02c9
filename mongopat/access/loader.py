"""Read and validate an access-pattern file, with file:line:column in every message.

The YAML is composed into nodes (``yaml.SafeLoader``: no tags that build objects) and validated node by
node, so that each error names where it is. Every problem is collected, not just the first.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from mongopat.access.model import (
    FILTER_OPERATORS,
    AccessFile,
    Aggregate,
    CollectionAccess,
    CounterSpec,
    Embed,
    History,
    Location,
    Lookup,
    Query,
    Writes,
)
from mongopat.expressions import ExpressionError, parse
from mongopat.yamlfile import YamlFileError, compose_yaml, read_yaml_text

SUPPORTED_VERSIONS = (1,)
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*/\s*(s|sec|second|m|min|minute|h|hr|hour|d|day)\s*$")
_UNIT_SECONDS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hr": 3600,
                 "hour": 3600, "d": 86400, "day": 86400}  # fmt: skip
_MULTIPLIER = {"": 1, "k": 1_000, "m": 1_000_000}
AGGREGATE_OPERATORS = ("sum", "count", "avg", "min", "max")


# The access file's errors are those of every YAML file mongopat reads.
AccessFileError = YamlFileError


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


class _Validator:
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
            self.error(node, path, f"expected a mapping, found {_describe(node)}")
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
        parse: Callable[[_Validator, yaml.Node, str], Any],
        key: tuple[str, str] | None = None,
    ) -> list[Any]:
        """The parsed entries of a list (``parse`` returns None for a broken one); ``key`` = (attribute,
        label) reports entries whose attribute repeats an earlier one's."""
        if not isinstance(node, yaml.SequenceNode):
            self.error(node, path, f"expected a list of {what}, found {_describe(node)}")
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
            self.error(node, path, f"expected a non-empty string, found {_describe(node)}")
            return None
        return value

    def strings(self, node: yaml.Node, path: str) -> list[str]:
        if not isinstance(node, yaml.SequenceNode):
            self.error(node, path, f"expected a list of field names, found {_describe(node)}")
            return []
        return [s for i, item in enumerate(node.value) if (s := self.string(item, f"{path}[{i}]")) is not None]

    def boolean(self, node: yaml.Node, path: str) -> bool | None:
        value = self.value(node)
        if not isinstance(value, bool):
            self.error(node, path, f"expected true or false, found {_describe(node)}")
            return None
        return value

    def integer(self, node: yaml.Node, path: str, minimum: int = 0) -> int | None:
        value = self.value(node)
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(node, path, f"expected a whole number, found {_describe(node)}")
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
            self.error(node, path, f"expected a number, found {_describe(node)}")
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


def _describe(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if node.tag.endswith(":null"):
        return "nothing"
    return repr(node.value)


QUERY_KEYS = ("name", "filter", "sort", "limit", "fields", "derive", "lookup", "aggregate", "embed", "per_sec")
COLLECTION_KEYS = ("description", "writes", "queries", "counters", "history")
TOP_KEYS = ("version", "database", "collections", "thresholds", "check")


def load_access_file(path: str | Path, known_collections: Iterable[str] | None = None) -> AccessFile:
    """Parse ``path``; ``known_collections`` (from the data) also count as valid ``from`` targets."""
    return parse_access_text(read_yaml_text(path, "access-pattern file"), str(path), known_collections)


def parse_access_text(text: str, file: str = "<access>", known_collections: Iterable[str] | None = None) -> AccessFile:
    root = compose_yaml(text, file)
    if root is None:
        raise AccessFileError([f"{file}: the file is empty (expected 'version: 1' and 'collections:')"])
    check = _Validator(file)
    _reject_foreign_tags(check, root)
    if check.problems:
        raise AccessFileError(check.problems)
    top = check.mapping(root, "(top)", TOP_KEYS, ("version", "collections"))
    if top is None:
        raise AccessFileError(check.problems)
    version = None
    if "version" in top:
        version = check.value(top["version"])
        if version not in SUPPORTED_VERSIONS:
            check.error(top["version"], "version", f"unsupported version {version!r} (this mongopat reads version 1)")
    database = check.string(top["database"], "database") if "database" in top else None
    collections: dict[str, CollectionAccess] = {}
    collection_nodes = check.free_mapping(top["collections"], "collections") if "collections" in top else None
    for name, node in (collection_nodes or {}).items():
        collections[name] = _collection(check, name, node)
    thresholds = _thresholds(check, top["thresholds"]) if "thresholds" in top else {}
    if "check" in top:  # the CI gate's settings (mongopat check); validated here so recommend reports them too
        from mongopat.check.config import parse_section

        parse_section(check, top["check"], "check", allow_version=False)
    known = set(collections) | set(known_collections or ())
    for access in collections.values():
        for query in access.queries:
            for target in filter(
                None, (query.lookup and query.lookup.source, query.aggregate and query.aggregate.source)
            ):
                if target not in known:
                    close = difflib.get_close_matches(target, sorted(known), n=1)
                    hint = f" (did you mean '{close[0]}'?)" if close else ""
                    check.problems.append(
                        f"{query.location}: collections.{access.name}.queries.{query.name}: collection '{target}'"
                        f" is neither in the file nor in the data{hint}"
                    )
    if check.problems:
        raise AccessFileError(check.problems)
    return AccessFile(file, int(version or 1), database, collections, thresholds)


_PLAIN_TAGS = {
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")
}


def _reject_foreign_tags(check: _Validator, root: yaml.Node) -> None:
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


def _thresholds(check: _Validator, node: yaml.Node) -> dict[str, dict[str, float]]:
    from mongopat.rules import registry  # late import: rules depend on the access model

    known = {rule.code: rule for rule in registry()} | {rule.name: rule for rule in registry()}
    out: dict[str, dict[str, float]] = {}
    for rule_key, rule_node in (check.free_mapping(node, "thresholds") or {}).items():
        rule = known.get(rule_key)
        if rule is None:
            close = difflib.get_close_matches(rule_key, sorted(known), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            check.error(rule_node, f"thresholds.{rule_key}", f"unknown rule{hint}")
            continue
        values = check.mapping(rule_node, f"thresholds.{rule_key}", rule.defaults) or {}
        out[rule.code] = {}
        for key, value_node in values.items():
            number = check.number(value_node, f"thresholds.{rule_key}.{key}")
            if number is not None:
                out[rule.code][key] = number
    return out


def _collection(check: _Validator, name: str, node: yaml.Node) -> CollectionAccess:
    path = f"collections.{name}"
    access = CollectionAccess(name)
    fields = check.mapping(node, path, COLLECTION_KEYS)
    if not fields:
        return access
    if "description" in fields:
        access.description = check.string(fields["description"], f"{path}.description")
    if "writes" in fields:
        writes = (
            check.mapping(fields["writes"], f"{path}.writes", ("inserts_per_sec", "updates_per_sec", "deletes_per_sec"))
            or {}
        )
        access.writes = Writes(**{key: check.rate(value, f"{path}.writes.{key}") for key, value in writes.items()})
    if "queries" in fields:
        access.queries = check.items(fields["queries"], f"{path}.queries", "queries", _query, ("name", "query name"))
    if "counters" in fields:
        access.counters = check.items(fields["counters"], f"{path}.counters", "counters", _counter)
    if "history" in fields:
        history = check.mapping(fields["history"], f"{path}.history", ("keep_versions", "restore")) or {}
        values = {key: check.boolean(value, f"{path}.history.{key}") for key, value in history.items()}
        access.history = History(**{k: bool(v) for k, v in values.items()})
    return access


def _counter(check: _Validator, node: yaml.Node, where: str) -> CounterSpec | None:
    spec = check.mapping(node, where, ("field", "increments_per_sec", "exact"), ("field", "increments_per_sec"))
    if not spec or "field" not in spec or "increments_per_sec" not in spec:
        return None
    field_name = check.string(spec["field"], f"{where}.field")
    rate = check.rate(spec["increments_per_sec"], f"{where}.increments_per_sec")
    exact = check.boolean(spec["exact"], f"{where}.exact") if "exact" in spec else True
    if field_name and rate is not None and exact is not None:
        return CounterSpec(field_name, rate, exact)
    return None


def _query(check: _Validator, node: yaml.Node, path: str) -> Query | None:
    if isinstance(node, yaml.MappingNode):  # name the query by its name in messages, once it has one
        for key_node, value_node in node.value:
            if (
                getattr(key_node, "value", None) == "name"
                and isinstance(value_node, yaml.ScalarNode)
                and value_node.value
            ):
                path = f"{path.rsplit('[', 1)[0]}.{value_node.value}"
    fields = check.mapping(node, path, QUERY_KEYS, ("name",))
    if not fields or "name" not in fields:
        return None
    name = check.string(fields["name"], f"{path}.name")
    if name is None:
        return None
    query = Query(name=name, location=check.where(node))
    if "per_sec" in fields:
        query.per_sec = check.rate(fields["per_sec"], f"{path}.per_sec")
    if "filter" in fields:
        for field_name, op_node in (check.free_mapping(fields["filter"], f"{path}.filter") or {}).items():
            op = check.value(op_node)
            if op not in FILTER_OPERATORS:
                close = difflib.get_close_matches(str(op), FILTER_OPERATORS, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else f" (one of: {', '.join(FILTER_OPERATORS)})"
                check.error(op_node, f"{path}.filter.{field_name}", f"unknown operator {op!r}{hint}")
                continue
            query.filter[field_name] = op
    if "sort" in fields:
        query.sort = check.sort(fields["sort"], f"{path}.sort")
    if "limit" in fields:
        query.limit = check.integer(fields["limit"], f"{path}.limit", minimum=1)
    if "fields" in fields:
        query.fields = check.strings(fields["fields"], f"{path}.fields")
    if "derive" in fields:
        for target, expr_node in (check.free_mapping(fields["derive"], f"{path}.derive") or {}).items():
            text = check.string(expr_node, f"{path}.derive.{target}")
            if text is None:
                continue
            try:
                query.derive[target] = parse(text)
            except ExpressionError as exc:
                check.error(expr_node, f"{path}.derive.{target}", f"invalid expression: {exc}")
    if "lookup" in fields:
        spec = check.mapping(
            fields["lookup"], f"{path}.lookup", ("from", "local", "foreign", "fields", "as"), ("from", "local")
        )
        if spec and "from" in spec and "local" in spec:
            source = check.string(spec["from"], f"{path}.lookup.from")
            local = check.string(spec["local"], f"{path}.lookup.local")
            foreign = check.string(spec["foreign"], f"{path}.lookup.foreign") if "foreign" in spec else "_id"
            lookup_fields = check.strings(spec["fields"], f"{path}.lookup.fields") if "fields" in spec else []
            as_field = check.string(spec["as"], f"{path}.lookup.as") if "as" in spec else None
            if source and local and foreign:
                query.lookup = Lookup(source, local, foreign, lookup_fields, as_field)
    if "aggregate" in fields:
        query.aggregate = _aggregate(check, f"{path}.aggregate", fields["aggregate"])
    if "embed" in fields:
        spec = check.mapping(fields["embed"], f"{path}.embed", ("field", "sort", "limit"), ("field",))
        if spec and "field" in spec:
            embed_field = check.string(spec["field"], f"{path}.embed.field")
            sort = check.sort(spec["sort"], f"{path}.embed.sort") if "sort" in spec else {}
            limit = check.integer(spec["limit"], f"{path}.embed.limit", minimum=1) if "limit" in spec else None
            if embed_field:
                query.embed = Embed(embed_field, sort, limit)
    return query


def _aggregate(check: _Validator, path: str, node: yaml.Node) -> Aggregate | None:
    spec = check.mapping(node, path, ("from", "local", "foreign", "compute"), ("from", "foreign", "compute"))
    if not spec or not {"from", "foreign", "compute"} <= set(spec):
        return None
    source = check.string(spec["from"], f"{path}.from")
    local = check.string(spec["local"], f"{path}.local") if "local" in spec else "_id"
    foreign = check.string(spec["foreign"], f"{path}.foreign")
    compute: dict[str, dict[str, Any]] = {}
    for output, op_node in (check.free_mapping(spec["compute"], f"{path}.compute") or {}).items():
        ops = check.mapping(op_node, f"{path}.compute.{output}", AGGREGATE_OPERATORS)
        if not ops:
            continue
        if len(ops) != 1:
            check.error(op_node, f"{path}.compute.{output}", "exactly one of sum, count, avg, min, max")
            continue
        ((op, argument_node),) = ops.items()
        argument = check.value(argument_node)
        if op == "count":
            if argument is not True and not isinstance(argument, dict):
                check.error(argument_node, f"{path}.compute.{output}.count", "count takes true or a filter mapping")
                continue
        elif not isinstance(argument, str) or not argument:
            check.error(argument_node, f"{path}.compute.{output}.{op}", f"{op} takes a field name")
            continue
        compute[output] = {op: argument}
    if source and local and foreign:
        return Aggregate(source, local, foreign, compute)
    return None
