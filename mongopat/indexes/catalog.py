"""An index as the analysis report records it (``indexes`` of a collection), and what it may serve."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SPECIAL_KINDS = ("text", "2dsphere", "2d", "geoHaystack", "hashed")


@dataclass
class Index:
    name: str
    key: list[tuple[str, Any]]
    unique: bool = False
    sparse: bool = False
    ttl_seconds: int | None = None
    partial: dict[str, Any] | None = None
    hidden: bool = False
    collation: dict[str, Any] | None = None
    usage_ops: int | None = None
    # An index mongopat advises (not in the collection yet).
    advised: bool = False
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_report(cls, entry: dict[str, Any]) -> Index:
        usage = entry.get("usage") or {}
        return cls(
            name=entry["name"],
            key=[(str(name), direction) for name, direction in entry["key"]],
            unique=bool(entry.get("unique")),
            sparse=bool(entry.get("sparse")),
            ttl_seconds=entry.get("ttl_seconds"),
            partial=entry.get("partial"),
            hidden=bool(entry.get("hidden")),
            collation=entry.get("collation"),
            usage_ops=usage.get("ops"),
        )

    @property
    def fields(self) -> list[str]:
        return [name for name, _ in self.key]

    @property
    def kind(self) -> str:
        """``plain`` for ascending/descending keys, else the special kind (``text``, ``2dsphere``, ...);
        ``wildcard`` for ``$**`` keys."""
        for name, direction in self.key:
            if name == "$**" or name.endswith(".$**"):
                return "wildcard"
            if isinstance(direction, str):
                return direction if direction in SPECIAL_KINDS else "special"
        return "plain"

    @property
    def is_id(self) -> bool:
        return self.name == "_id_" or self.fields == ["_id"]

    def keys_spec(self) -> dict[str, Any]:
        return dict(self.key)

    def restrictions(self) -> list[str]:
        """What makes the index more than an access path (a reason never to drop it as redundant)."""
        found = []
        if self.is_id:
            found.append("the _id index")
        if self.unique:
            found.append("unique")
        if self.ttl_seconds is not None:
            found.append("TTL")
        if self.partial:
            found.append("partial")
        if self.sparse:
            found.append("sparse")
        if self.hidden:
            found.append("hidden")
        if self.collation:
            found.append("its own collation")
        if self.kind != "plain":
            found.append(self.kind)
        return found


def describe_key(key: list[tuple[str, Any]] | dict[str, Any]) -> str:
    """``{st: 1, ts: -1}``"""
    pairs = key.items() if isinstance(key, dict) else key
    return "{" + ", ".join(f"{name}: {direction}" for name, direction in pairs) + "}"


def default_name(key: list[tuple[str, Any]]) -> str:
    """The name MongoDB gives an index of this key when none is given (``st_1_ts_-1``)."""
    return "_".join(f"{name}_{direction}" for name, direction in key)


def listed(entries: list[dict[str, Any]] | None) -> list[Index]:
    """A collection's indexes from its report entries. Every collection has its ``_id`` index (a
    clustered collection's cluster key serves ``_id`` as well), also where the data carries no index list."""
    indexes = [Index.from_report(entry) for entry in entries or []]
    if not any(index.is_id for index in indexes):
        indexes.insert(0, Index(name="_id_", key=[("_id", 1)], unique=True))
    return indexes
