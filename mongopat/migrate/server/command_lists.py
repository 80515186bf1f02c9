"""Values cut into lists that each fit one command (a command is at most 16 MiB)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import bson

Item = TypeVar("Item")


def fitting(items: list[Item], size_of: Callable[[Item], int], limit: int) -> list[list[Item]]:
    """``items`` in order, in lists of at most ``limit`` bytes by ``size_of`` (at least one item each: a
    single larger one is allowed its own list); none for no items."""
    if not items:
        return []
    lists: list[list[Item]] = [[]]
    size = 0
    for item in items:
        grows = size_of(item)
        if lists[-1] and size + grows > limit:
            lists.append([])
            size = 0
        lists[-1].append(item)
        size += grows
    return lists


def id_bytes(ident: Any) -> int:
    """About what an ``_id`` adds to a list of them in a command: its value encoded, with a name."""
    return len(bson.encode({"_id": ident}))
