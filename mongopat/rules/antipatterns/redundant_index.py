"""MP211 redundant_index: a plain index that is the prefix of another."""

from __future__ import annotations

from mongopat.indexes.catalog import Index, describe_key
from mongopat.rules import register
from mongopat.rules.base import CollectionEvidence, Recommendation, Rule


@register
class RedundantIndexRule(Rule):
    """An index whose key is the leading part of another index's key (same directions, or all of them
    reversed; a single field in either direction) serves no read the longer one does not, and costs a
    write on every insert and space in the cache. Only plain indexes are reported: never the ``_id``
    index, a unique, TTL, partial, sparse or hidden index, one with its own collation, or a text, geo,
    hashed or wildcard index, nor the index of a sharded collection's shard key (the balancer and
    chunk migrations use it); and only where the longer index can stand in for it (itself neither partial,
    sparse nor hidden, with the same collation)."""

    code = "MP211"
    name = "redundant_index"
    kind = "anti-pattern"
    title = "Redundant index"
    defaults: dict[str, float] = {}

    def check(self, collection: CollectionEvidence) -> list[Recommendation]:
        indexes = [Index.from_report(entry) for entry in collection.data.get("indexes") or []]
        shard_key = list(((collection.data.get("sharding") or {}).get("shard_key") or {}).items())
        found = []
        for index in indexes:
            if index.restrictions() or (shard_key and index.key == shard_key):
                continue
            cover = next((other for other in indexes if other is not index and _covers(other, index)), None)
            if cover is None:
                continue
            found.append(
                self.finding(
                    collection.name,
                    index.fields,
                    "warning",
                    0.9,
                    {
                        "index": index.name,
                        "key": describe_key(index.key),
                        "covered_by": cover.name,
                        "covered_by_key": describe_key(cover.key),
                    },  # fmt: skip
                    f"{index.name} {describe_key(index.key)} on {collection.name} is the prefix of {cover.name} "
                    f"{describe_key(cover.key)}, which serves every read it serves. Hide it first (hideIndex), "
                    "watch the reads, then drop it.",
                    tradeoffs=[f"reads that use {index.name} scan the larger keys of {cover.name}"],
                    migration={"step": "drop_index", "collection": collection.name, "name": index.name},
                    title=f"Redundant index: {index.name}",
                )
            )
        return found


def _covers(longer: Index, shorter: Index) -> bool:
    """``longer`` serves every read ``shorter`` serves (and is not itself a duplicate reported the other
    way round: of two indexes on the same key, the one with restrictions stays)."""
    if longer.hidden or longer.partial or longer.sparse or longer.kind != "plain" or longer.collation:
        return False
    if len(longer.key) < len(shorter.key):
        return False
    head = longer.key[: len(shorter.key)]
    if [n for n, _ in head] != shorter.fields:
        return False
    same = all(a == b for (_, a), (_, b) in zip(head, shorter.key, strict=True))
    reversed_ = all(a == -b for (_, a), (_, b) in zip(head, shorter.key, strict=True))
    if not (same or reversed_ or len(shorter.key) == 1):
        return False
    # Two plain indexes on the same fields: the one whose name sorts last is reported, the other stays.
    return not (len(longer.key) == len(shorter.key) and not longer.restrictions() and longer.name > shorter.name)
