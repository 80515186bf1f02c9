"""The step types: one module per step, holding what the step is apart from how a runner executes it.

A document step's module holds its parameters (``type``), its pure ``transform`` (used by both runners,
a server and a dump folder), its pending filter (documents still in the old shape) and its inverse (for a
document the application changed after ``up``); see :mod:`mongopat.migrate.operations.base`. The bucket
step's module holds its in-place updates. A collection step's module applies, reverts and verifies it
against a backend's catalog (:mod:`mongopat.migrate.catalog`). A new step type is a new module here,
added to :data:`STEP_OPERATIONS`.
"""

from __future__ import annotations

from collections.abc import Callable

from mongopat.migrate.operations import (
    approximation,
    attribute,
    bucket,
    computed,
    copy_collection,
    create_index,
    document_versioning,
    drop_index,
    extended_reference,
    map_to_array,
    outlier,
    polymorphic,
    pre_aggregation,
    rename_collection,
    rename_field,
    schema_versioning,
    set_field,
    subset,
    timeseries,
    tree,
    unset_field,
    validator,
)
from mongopat.migrate.operations.base import CollectionOperation, DocumentOperation, Step, StepOperation
from mongopat.migrate.transform_api import Context, Document, Result, copy_document, heads

STEP_OPERATIONS: dict[str, StepOperation] = {
    module.Operation.type.name: module.Operation()
    for module in (
        set_field, unset_field, rename_field, computed, attribute, map_to_array, polymorphic, schema_versioning,
        approximation, tree, extended_reference, pre_aggregation, document_versioning, subset, outlier, bucket,
        create_index, drop_index, copy_collection, rename_collection, validator, timeseries,
    )
}  # fmt: skip

# The collection steps: applied, reverted and verified through a backend's catalog.
COLLECTION_OPERATIONS: dict[str, CollectionOperation] = {
    name: operation for name, operation in STEP_OPERATIONS.items() if isinstance(operation, CollectionOperation)
}

# The document steps: what the online runner needs of each (pending filter, inverse) beyond the transform.
OPERATIONS: dict[str, DocumentOperation] = {
    name: operation for name, operation in STEP_OPERATIONS.items() if isinstance(operation, DocumentOperation)
}


def transform(doc: Document, step: Step, ctx: Context | None = None) -> Result:
    """Apply a document step to a copy of ``doc`` (the input is never modified)."""
    return transformer(step)(doc, ctx or Context())


def transformer(step: Step) -> Callable[[Document, Context], Result]:
    """:func:`transform` for one step, what it needs of the step worked out once: a batch applies it to
    every document."""
    operation = OPERATIONS[step.name]
    apply = operation.transform
    if operation.changes_only_the_top_level and all("." not in name for name in operation.written_fields(step)):
        return lambda doc, ctx: apply(dict(doc) if type(doc) is dict else copy_document(doc), step, ctx)
    if not operation.changes_only_what_it_writes:
        return lambda doc, ctx: apply(copy_document(doc), step, ctx)
    written = heads(*operation.written_fields(step))

    def apply_to_copy(doc: Document, ctx: Context) -> Result:
        # A step that changes only the fields it writes gets a new top level whose values of those
        # fields are copies; the others are shared.
        if type(doc) is not dict:
            return apply(copy_document(doc), step, ctx)
        copied = dict(doc)
        for name in written:
            if name in copied:
                copied[name] = copy_document(copied[name])
        return apply(copied, step, ctx)

    return apply_to_copy


__all__ = [
    "COLLECTION_OPERATIONS",
    "OPERATIONS",
    "CollectionOperation",
    "STEP_OPERATIONS",
    "DocumentOperation",
    "StepOperation",
    "transform",
    "transformer",
]
