"""attribute: sparse fields pivoted into an array of ``{k, v}`` pairs."""

from __future__ import annotations

import copy
from typing import Any

from mongopat.migrate.operations.base import DICT, LIST, STR, DocumentOperation, Param, Step, StepType
from mongopat.migrate.transforms import Context, Document, Result


class Operation(DocumentOperation):
    type = StepType(
        "attribute",
        "document",
        {"fields": Param(LIST), "into": Param(STR, False, "attributes"), "index": Param(DICT, False)},
        "pivot fields into an array of {k, v} pairs (attribute pattern)",
    )

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        pairs = [{"k": name, "v": doc.pop(name)} for name in step.params["fields"] if name in doc]
        existing = doc.get(step.params["into"])
        doc[step.params["into"]] = (existing if isinstance(existing, list) else []) + pairs
        return Result(doc)

    def written_fields(self, step: Step) -> set[str]:
        p = step.params
        return {*p["fields"], p["into"]}

    def removed_fields(self, step: Step) -> set[str]:
        p = step.params
        return set(p["fields"])

    def pending(self, step: Step) -> dict[str, Any]:
        return {"$or": [{name: {"$exists": True}} for name in step.params["fields"]]}

    def is_pending(self, doc: Document, step: Step) -> bool:
        return any(name in doc for name in step.params["fields"])

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        """The pivoted pairs (with the values the application wrote since) back into fields; pairs of other
        keys stay in the array."""
        result = copy.deepcopy(current)
        into, fields = step.params["into"], set(step.params["fields"])
        pairs = result.get(into)
        if not isinstance(pairs, list):
            return result
        kept = []
        for pair in pairs:
            if isinstance(pair, dict) and pair.get("k") in fields and set(pair) <= {"k", "v"}:
                if pair["k"] in result:
                    return None  # the application wrote the field itself too: which value wins is its call
                result[pair["k"]] = pair.get("v")
            else:
                kept.append(pair)
        if kept or into in original:
            result[into] = kept
        else:
            del result[into]
        return result
