"""What a time-series collection refuses, by MongoDB version, against what the application declares.

From MongoDB's documentation of time-series limitations:

- 5.0 takes inserts and reads only; 5.1 to 6.3 take deletes and updates that match on the ``metaField``
  alone and change nothing else (multi only); 7.0 lifts most of that for deletes and updates;
- change streams cannot watch a time-series collection, in any version;
- a measurement is at most 4 MB;
- no unique index (``_id`` included: measurements have no unique ``_id``) and no text index;
- ``$merge`` cannot write into one, ``$out`` can from 7.0.3; it cannot be renamed.

Each :class:`Blocker` names the limit and the version that lifts it (None: none does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mongopat.errors import InputError

# Versions are compared as tuples: "7.0.3" -> (7, 0, 3).
Version = tuple[int, ...]
OLDEST = (5, 0)  # time-series collections came with 5.0
MAX_MEASUREMENT_BYTES = 4 * 1024 * 1024


def parse_version(text: str) -> Version:
    if not re.fullmatch(r"\d+(\.\d+){0,2}", text.strip()):
        raise InputError(f"{text!r} is not a MongoDB version (like 7.0 or 6.0.14)")
    return tuple(int(part) for part in text.strip().split("."))


def shown(version: Version) -> str:
    return ".".join(str(part) for part in (version + (0,))[: max(2, len(version))])


@dataclass(frozen=True)
class Workload:
    """What the application does with the collection, as declared or measured."""

    inserts_per_sec: float | None = None
    updates_per_sec: float | None = None
    deletes_per_sec: float | None = None
    change_streams: bool = False
    largest_document_bytes: int | None = None
    unique_indexes: tuple[str, ...] = ()
    text_indexes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Blocker:
    limit: str  # what the time-series collection refuses, and what of the workload meets it
    lifted_in: Version | None = None  # the version that lifts it; None when none does

    def describe(self) -> str:
        return self.limit + (f" (MongoDB {shown(self.lifted_in)} lifts it)" if self.lifted_in else "")


@dataclass
class Verdict:
    version: Version  # the version judged against
    version_basis: str  # where it came from
    blockers: list[Blocker] = field(default_factory=list)
    cautions: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return not self.blockers


def judge(workload: Workload, version: Version | None, version_basis: str, update_share: float = 0.1) -> Verdict:
    """The limits ``workload`` meets on MongoDB ``version`` (None: the oldest that has time-series
    collections, 5.0, so the advice holds on every deployment that has them)."""
    target = version or OLDEST
    verdict = Verdict(
        target,
        version_basis if version else "no version declared: judged for 5.0, the oldest with time-series collections",
    )
    if target < OLDEST:
        verdict.blockers.append(Blocker(f"MongoDB {shown(target)} has no time-series collections", (5, 0)))
        return verdict
    if workload.updates_per_sec:
        if target < (7, 0):
            verdict.blockers.append(
                Blocker(
                    f"{workload.updates_per_sec:,g} updates/s are declared; before 7.0 a time-series collection "
                    "takes only updates that match and change the metaField alone (none at all on 5.0)",
                    (7, 0),
                )
            )
        elif workload.inserts_per_sec and workload.updates_per_sec > update_share * workload.inserts_per_sec:
            verdict.blockers.append(
                Blocker(
                    f"{workload.updates_per_sec:,g} updates/s against {workload.inserts_per_sec:,g} inserts/s: each "
                    "update of a measurement rewrites its whole compressed bucket, so readings updated this often "
                    "belong in documents of their own or in hand-made buckets"
                )
            )
        else:
            verdict.cautions.append(
                f"the declared {workload.updates_per_sec:,g} updates/s work on {shown(target)} (7.0+), each "
                "rewriting a compressed bucket"
            )
    if workload.deletes_per_sec and target < (7, 0):
        verdict.blockers.append(
            Blocker(
                f"{workload.deletes_per_sec:,g} deletes/s are declared; before 7.0 deletes may match the metaField "
                "alone (none at all on 5.0): expiring old readings by expireAfterSeconds needs no delete",
                (7, 0),
            )
        )
    if workload.change_streams:
        verdict.blockers.append(Blocker("the application watches the collection with a change stream, which "
                                        "no time-series collection supports"))  # fmt: skip
    if workload.largest_document_bytes and workload.largest_document_bytes > MAX_MEASUREMENT_BYTES:
        verdict.blockers.append(
            Blocker(f"documents of up to {workload.largest_document_bytes:,} B exceed a measurement's 4 MB")
        )
    for name in workload.unique_indexes:
        verdict.blockers.append(Blocker(f"unique index {name}: a time-series collection takes no unique index"))
    for name in workload.text_indexes:
        verdict.blockers.append(Blocker(f"text index {name}: a time-series collection takes no text index"))
    return verdict
