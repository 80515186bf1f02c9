"""Detectors: one small rule per pattern or anti-pattern, each in its own module.

A new pattern goes in ``patterns/<name>.py`` (an anti-pattern in ``antipatterns/<name>.py``): subclass
:class:`Rule`, give it a code, a name, thresholds and a docstring, decorate it with ``@register``, and add
the module to the import list below.
"""

from __future__ import annotations

from mongopat.rules.base import Context, Recommendation, Rule

_REGISTRY: list[type[Rule]] = []


def register(rule: type[Rule]) -> type[Rule]:
    if any(existing.code == rule.code for existing in _REGISTRY):
        raise ValueError(f"duplicate rule code {rule.code}")
    _REGISTRY.append(rule)
    return rule


def registry() -> list[type[Rule]]:
    _load()
    return sorted(_REGISTRY, key=lambda rule: rule.code)


def _load() -> None:
    from mongopat.rules.antipatterns import (  # noqa: F401
        bloated_documents,
        large_arrays,
        lookup_heavy,
        missing_index,
        over_embedding,
        redundant_index,
        subset_or_bucket_size,
        too_many_collections,
        too_many_indexes,
        unused_indexes,
        volatile_extended_reference,
    )
    from mongopat.rules.patterns import (  # noqa: F401
        approximation,
        attribute,
        bucket,
        computed,
        document_versioning,
        extended_reference,
        in_place,
        outlier,
        polymorphic,
        pre_aggregation,
        schema_versioning,
        subset,
        time_series,
        tree,
    )


def run_rules(context: Context, only: set[str] | None = None) -> list[Recommendation]:
    """Every rule over every collection; most severe first."""
    found: list[Recommendation] = []
    for rule_class in registry():
        if only and rule_class.code not in only and rule_class.name not in only:
            continue
        rule = rule_class(context)
        for collection in context.collections:
            found.extend(rule.check(collection))
        found.extend(rule.check_database())
    return sorted(found, key=Recommendation.sort_key)


__all__ = ["Context", "Recommendation", "Rule", "register", "registry", "run_rules"]
