"""The placeholders of a guide's pipelines and commands, and their binding to values.

``{"$param": "customerId"}`` stands for a value the application supplies; ``{"$param": "ts", "bound":
"lower"}`` and ``{"$param": "ts", "bound": "upper"}`` for the two ends of a range (lower inclusive, upper
exclusive). Other keys of a placeholder say how the application obtains the value (``compute``: an
expression over the document it writes; ``shape``: the document as the new shape has it). A bound value
of :data:`OMIT` removes the key that holds it (a measurement a reading does not have).
"""

from __future__ import annotations

from typing import Any

PARAM = "$param"


class _Omit:
    def __repr__(self) -> str:
        return "OMIT"


OMIT = _Omit()


def param(name: str, **details: Any) -> dict[str, Any]:
    return {PARAM: name, **details}


def range_params(name: str) -> dict[str, Any]:
    """The condition of a range: lower bound inclusive, upper exclusive."""
    return {"$gte": param(name, bound="lower"), "$lt": param(name, bound="upper")}


def is_param(value: Any) -> bool:
    return isinstance(value, dict) and PARAM in value


def names(template: Any) -> list[str]:
    """The parameter names a template uses, in order of first use."""
    found: dict[str, None] = {}

    def walk(node: Any) -> None:
        if is_param(node):
            found[node[PARAM]] = None
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(template)
    return list(found)


class UnboundParameter(KeyError):
    pass


def bind(template: Any, values: dict[str, Any]) -> Any:
    """``template`` with every placeholder replaced by its value: ``values[name]``, or for a range
    ``values[name]`` = (lower, upper)."""
    if is_param(template):
        name = template[PARAM]
        if name not in values:
            raise UnboundParameter(name)
        value = values[name]
        bound = template.get("bound")
        if bound is not None and value is not OMIT:
            return value[0] if bound == "lower" else value[1]
        return value
    if isinstance(template, dict):
        bound: dict[str, Any] = {}
        for key, value in template.items():
            item = bind(value, values)
            # An update operator left with nothing to do is dropped: MongoDB refuses an empty one.
            if item is OMIT or (key.startswith("$") and item == {} and value != {}):
                continue
            bound[key] = item
        return bound
    if isinstance(template, list):
        return [value for value in (bind(item, values) for item in template) if value is not OMIT]
    return template
