"""Online step types: one module per document step, each the step's pending filter and inverse.

The runner on a live server rewrites a document only while it is still the version the transform read,
migrates documents the application writes in the old shape later (the pending filter), and reverts a
document the application changed after ``up`` by the step's inverse instead of its saved original. A new
document step adds its module here and to :data:`OPERATIONS`.
"""

from __future__ import annotations

from mongopat.migrate.operations import (
    approximation,
    attribute,
    computed,
    document_versioning,
    extended_reference,
    map_to_array,
    outlier,
    polymorphic,
    pre_aggregation,
    rename_field,
    schema_versioning,
    set_field,
    subset,
    tree,
    unset_field,
)
from mongopat.migrate.operations.base import DocumentOperation

OPERATIONS: dict[str, DocumentOperation] = {
    module.Operation.name: module.Operation()
    for module in (
        set_field, unset_field, rename_field, computed, attribute, map_to_array, polymorphic, schema_versioning,
        approximation, tree, extended_reference, pre_aggregation, document_versioning, subset, outlier,
    )
}  # fmt: skip


def operation(name: str) -> DocumentOperation:
    return OPERATIONS[name]


__all__ = ["OPERATIONS", "DocumentOperation", "operation"]
