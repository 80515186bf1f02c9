"""Which chunks of a sharded collection the sampled documents came from.

``$sample`` through mongos draws from every shard; mapping the sampled shard-key values onto the chunk
ranges of ``config.chunks`` shows how many chunks of each shard the sample touched. Compound and hashed
shard keys are reported without this mapping (their chunk bounds are not plain values of one field).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from mongopat.bson_order import bson_order


def chunks_seen(values: list[Any], chunks: list[dict[str, Any]], field: str) -> dict[str, dict[str, int]]:
    """Per shard: chunks in all and chunks holding at least one of ``values``."""
    ordered = sorted(
        ((bson_order(c["min"][field]), c) for c in chunks if field in c.get("min", {})), key=lambda item: item[0]
    )
    starts = [key for key, _ in ordered]
    result: dict[str, dict[str, int]] = {}
    for _key, chunk in ordered:
        result.setdefault(chunk["shard"], {"chunks": 0, "chunks_seen": 0})["chunks"] += 1
    touched: set[int] = set()
    for value in values:
        position = bisect_right(starts, bson_order(value)) - 1
        if position >= 0:
            touched.add(position)
    for position in touched:
        result[ordered[position][1]["shard"]]["chunks_seen"] += 1
    return result
