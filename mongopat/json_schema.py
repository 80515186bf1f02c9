"""A collection validator evaluated in Python, for documents that are not on a server: a dump folder's
files, and the documents a planned step would write.

``$jsonSchema`` is evaluated here, keyword by keyword, as MongoDB documents it (``bsonType`` and JSON
``type``, ``required``, ``properties``, ``additionalProperties``, ``patternProperties``, ``items``, bounds,
lengths, ``enum``, ``pattern``, ``allOf``/``anyOf``/``oneOf``/``not``, ``dependencies``); the rest of a
validator (query operators such as ``$in`` or ``$exists``) by the embedded engine. A keyword or operator
neither knows raises :class:`NotImplementedError`: the caller says it cannot tell rather than guess.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from bson import Decimal128, Int64

from mongopat.bsontypes import INT32_MAX, INT32_MIN, type_name

# $jsonSchema's "type" takes JSON types; each covers these BSON types ("integer" is not supported by MongoDB).
JSON_TYPES = {
    "object": {"object"},
    "array": {"array"},
    "number": {"int", "long", "double", "decimal"},
    "boolean": {"bool"},
    "string": {"string"},
    "null": {"null"},
}
IGNORED = {"title", "description"}


def bson_type(value: Any) -> str:
    if type(value) is int:
        return "int" if INT32_MIN <= value <= INT32_MAX else "long"
    if isinstance(value, Mapping):
        return "object"
    return type_name(type(value))


def satisfies(document: Mapping[str, Any], validator: Mapping[str, Any]) -> bool:
    """Whether ``document`` passes ``validator`` (a query document, with or without ``$jsonSchema``)."""
    return not validator_problem(document, validator)


def validator_problem(document: Mapping[str, Any], validator: Mapping[str, Any]) -> str | None:
    """Why ``document`` fails ``validator``, in a few words; None when it passes."""
    rest: dict[str, Any] = {}
    for key, value in validator.items():
        if key == "$jsonSchema":
            problem = schema_problem(document, value, "")
            if problem:
                return problem
        elif key == "$and":
            for part in value:
                if problem := validator_problem(document, part):
                    return problem
        else:
            rest[key] = value
    if rest:
        from mongomock.filtering import filter_applies  # the embedded engine evaluates query operators

        if not filter_applies(rest, document):
            return f"does not match {sorted(rest)}"
    return None


def _number(value: Any) -> float | Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, Decimal128):
        return value.to_decimal()
    if isinstance(value, int | float | Int64):
        return value
    return None


def schema_problem(value: Any, schema: Mapping[str, Any], path: str) -> str | None:
    """The first way ``value`` (at ``path``) breaks ``schema``; None when it satisfies it."""
    if not isinstance(schema, Mapping):
        raise NotImplementedError(f"$jsonSchema at {path or 'the top'} is not an object")
    where = path or "the document"
    kind = bson_type(value)
    for keyword, rule in schema.items():
        problem: str | None = None
        if keyword in IGNORED:
            continue
        if keyword == "bsonType":
            allowed = {rule} if isinstance(rule, str) else set(rule)
            if kind not in allowed and not ("number" in allowed and kind in JSON_TYPES["number"]):
                problem = f"{where} is {kind}, not {' or '.join(sorted(allowed))}"
        elif keyword == "type":
            names = [rule] if isinstance(rule, str) else list(rule)
            if not any(kind in JSON_TYPES.get(name, set()) for name in names):
                problem = f"{where} is {kind}, not {' or '.join(names)}"
        elif keyword == "enum":
            if not any(_equal(value, option) for option in rule):
                problem = f"{where} is not one of {rule!r}"
        elif keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
            problem = _number_problem(value, schema, keyword, where)
        elif keyword in ("minLength", "maxLength", "pattern"):
            problem = _string_problem(value, keyword, rule, where) if kind == "string" else None
        elif keyword in ("required", "properties", "additionalProperties", "patternProperties", "minProperties",
                         "maxProperties", "dependencies"):  # fmt: skip
            problem = _object_problem(value, schema, keyword, path) if kind == "object" else None
        elif keyword in ("items", "additionalItems", "minItems", "maxItems", "uniqueItems"):
            problem = _array_problem(value, schema, keyword, path) if kind == "array" else None
        elif keyword == "allOf":
            problem = next((p for part in rule if (p := schema_problem(value, part, path))), None)
        elif keyword == "anyOf":
            if all(schema_problem(value, part, path) for part in rule):
                problem = f"{where} matches none of anyOf"
        elif keyword == "oneOf":
            if sum(1 for part in rule if not schema_problem(value, part, path)) != 1:
                problem = f"{where} does not match exactly one of oneOf"
        elif keyword == "not":
            if not schema_problem(value, rule, path):
                problem = f"{where} matches a schema under not"
        else:
            raise NotImplementedError(f"$jsonSchema keyword {keyword!r} is not evaluated outside a server")
        if problem:
            return problem
    return None


def _number_problem(value: Any, schema: Mapping[str, Any], keyword: str, where: str) -> str | None:
    number = _number(value)
    if number is None or keyword in ("exclusiveMinimum", "exclusiveMaximum"):
        return None  # bounds apply to numbers only; exclusivity is read with minimum and maximum
    bound = _number(schema[keyword])
    if bound is None:
        raise NotImplementedError(f"$jsonSchema {keyword} {schema[keyword]!r} is not a number")
    if keyword == "minimum":
        low = number <= bound if schema.get("exclusiveMinimum") else number < bound
        return f"{where} is {value}, below the minimum {bound}" if low else None
    if keyword == "maximum":
        high = number >= bound if schema.get("exclusiveMaximum") else number > bound
        return f"{where} is {value}, above the maximum {bound}" if high else None
    return (
        f"{where} is {value}, not a multiple of {bound}"
        if bound and Decimal(str(number)) % Decimal(str(bound))
        else None
    )


def _string_problem(value: str, keyword: str, rule: Any, where: str) -> str | None:
    if keyword == "minLength" and len(value) < rule:
        return f"{where} is shorter than {rule} characters"
    if keyword == "maxLength" and len(value) > rule:
        return f"{where} is longer than {rule} characters"
    if keyword == "pattern" and not re.search(rule, value):
        return f"{where} does not match /{rule}/"
    return None


def _object_problem(value: Mapping[str, Any], schema: Mapping[str, Any], keyword: str, path: str) -> str | None:
    where = path or "the document"
    rule = schema[keyword]
    if keyword == "required":
        missing = [name for name in rule if name not in value]
        return f"{where} lacks required {', '.join(missing)}" if missing else None
    if keyword == "properties":
        for name, sub in rule.items():
            if name in value and (problem := schema_problem(value[name], sub, _join(path, name))):
                return problem
        return None
    if keyword == "patternProperties":
        for pattern, sub in rule.items():
            for name in value:
                if re.search(pattern, name) and (problem := schema_problem(value[name], sub, _join(path, name))):
                    return problem
        return None
    if keyword == "additionalProperties":
        known = set(schema.get("properties") or {})
        patterns = list((schema.get("patternProperties") or {}).keys())
        extra = [n for n in value if n not in known and not any(re.search(p, n) for p in patterns)]
        if rule is False and extra:
            return f"{where} has {', '.join(extra)}, not allowed (additionalProperties: false)"
        if isinstance(rule, Mapping):
            return next((p for n in extra if (p := schema_problem(value[n], rule, _join(path, n)))), None)
        return None
    if keyword == "minProperties" and len(value) < rule:
        return f"{where} has fewer than {rule} fields"
    if keyword == "maxProperties" and len(value) > rule:
        return f"{where} has more than {rule} fields"
    if keyword == "dependencies":
        for name, needs in rule.items():
            if name not in value:
                continue
            if isinstance(needs, list):
                missing = [n for n in needs if n not in value]
                if missing:
                    return f"{where} has {name} without {', '.join(missing)}"
            elif problem := schema_problem(value, needs, path):
                return problem
    return None


def _array_problem(value: list[Any], schema: Mapping[str, Any], keyword: str, path: str) -> str | None:
    where = path or "the document"
    rule = schema[keyword]
    if keyword == "items":
        schemas = rule if isinstance(rule, list) else None
        for position, item in enumerate(value):
            sub = (schemas[position] if position < len(schemas) else None) if schemas is not None else rule
            if sub is not None and (problem := schema_problem(item, sub, f"{path}.{position}")):
                return problem
        return None
    if keyword == "additionalItems":
        items = schema.get("items")
        if not isinstance(items, list) or len(value) <= len(items):
            return None
        if rule is False:
            return f"{where} has more than {len(items)} items (additionalItems: false)"
        if isinstance(rule, Mapping):
            extra = value[len(items) :]
            return next(
                (p for i, v in enumerate(extra) if (p := schema_problem(v, rule, f"{path}.{len(items) + i}"))), None
            )
        return None
    if keyword == "minItems" and len(value) < rule:
        return f"{where} has fewer than {rule} items"
    if keyword == "maxItems" and len(value) > rule:
        return f"{where} has more than {rule} items"
    if keyword == "uniqueItems" and rule and len({repr(v) for v in value}) != len(value):
        return f"{where} has repeated items"
    return None


def _equal(value: Any, option: Any) -> bool:
    """BSON equality: numbers of any width compare by value, a boolean is not a number."""
    if isinstance(value, bool) or isinstance(option, bool):
        return isinstance(value, bool) and isinstance(option, bool) and value == option
    return bool(value == option)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
