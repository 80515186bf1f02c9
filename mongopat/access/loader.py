"""Read and validate an access-pattern file, with file:line:column in every message.

The YAML is composed into nodes (``yaml.SafeLoader``: no tags that build objects) and validated node by
node, so that each error names where it is. Every problem is collected, not just the first.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
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
    Lookup,
    Query,
    Writes,
)
from mongopat.errors import InputError
from mongopat.expressions import ExpressionError, parse
from mongopat.rules.thresholds import parse_thresholds
from mongopat.yamlfile import (
    YamlFileError,
    YamlValidator,
    compose_yaml,
    read_yaml_text,
    reject_foreign_tags,
)

SUPPORTED_VERSIONS = (1,)
AGGREGATE_OPERATORS = ("sum", "count", "avg", "min", "max")


# The access file's errors are those of every YAML file mongopat reads.
AccessFileError = YamlFileError


QUERY_KEYS = ("name", "filter", "sort", "limit", "fields", "derive", "lookup", "aggregate", "embed", "per_sec")
COLLECTION_KEYS = (
    "description", "created_by_migration", "change_streams", "writes", "queries", "counters", "history",
)  # fmt: skip
TOP_KEYS = ("version", "database", "mongodb_version", "collections", "thresholds", "check")


def load_access_file(path: str | Path, known_collections: Iterable[str] | None = None) -> AccessFile:
    """Parse ``path``; ``known_collections`` (from the data) also count as valid ``from`` targets."""
    return parse_access_text(read_yaml_text(path, "access-pattern file"), str(path), known_collections)


def parse_access_text(text: str, file: str = "<access>", known_collections: Iterable[str] | None = None) -> AccessFile:
    root = compose_yaml(text, file)
    if root is None:
        raise AccessFileError([f"{file}: the file is empty (expected 'version: 1' and 'collections:')"])
    check = YamlValidator(file)
    reject_foreign_tags(check, root)
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
    mongodb_version = None
    if "mongodb_version" in top:
        from mongopat.timeseries.limits import parse_version

        node = top["mongodb_version"]
        # The text as written: 7.10 read as a number would be 7.1.
        mongodb_version = str(node.value) if isinstance(node, yaml.ScalarNode) else str(check.value(node))
        try:
            parse_version(mongodb_version)
        except InputError as exc:
            check.error(node, "mongodb_version", str(exc))
    collections: dict[str, CollectionAccess] = {}
    collection_nodes = check.free_mapping(top["collections"], "collections") if "collections" in top else None
    for name, node in (collection_nodes or {}).items():
        collections[name] = _collection(check, name, node)
    thresholds = parse_thresholds(check, top["thresholds"]) if "thresholds" in top else {}
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
    return AccessFile(file, int(version or 1), database, collections, thresholds, mongodb_version)


def _collection(check: YamlValidator, name: str, node: yaml.Node) -> CollectionAccess:
    path = f"collections.{name}"
    access = CollectionAccess(name, location=check.where(node))
    fields = check.mapping(node, path, COLLECTION_KEYS)
    if not fields:
        return access
    if "description" in fields:
        access.description = check.string(fields["description"], f"{path}.description")
    if "created_by_migration" in fields:
        created = check.boolean(fields["created_by_migration"], f"{path}.created_by_migration")
        access.created_by_migration = bool(created)
    if "change_streams" in fields:
        access.change_streams = bool(check.boolean(fields["change_streams"], f"{path}.change_streams"))
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


def _counter(check: YamlValidator, node: yaml.Node, where: str) -> CounterSpec | None:
    spec = check.mapping(node, where, ("field", "increments_per_sec", "exact"), ("field", "increments_per_sec"))
    if not spec or "field" not in spec or "increments_per_sec" not in spec:
        return None
    field_name = check.string(spec["field"], f"{where}.field")
    rate = check.rate(spec["increments_per_sec"], f"{where}.increments_per_sec")
    exact = check.boolean(spec["exact"], f"{where}.exact") if "exact" in spec else True
    if field_name and rate is not None and exact is not None:
        return CounterSpec(field_name, rate, exact)
    return None


def _query(check: YamlValidator, node: yaml.Node, path: str) -> Query | None:
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


def _aggregate(check: YamlValidator, path: str, node: yaml.Node) -> Aggregate | None:
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
