"""``down`` inside the server for the documents left alone since an ``up`` that ran there: each gets its
original back by an update pipeline, for every step whose transform is stages over the document alone
(``server_stages`` without ``server_range_key``: the field steps, computed, approximation, attribute,
map_to_array, subset, outlier, the versioning steps; top-level or nested). Run after
``unset_in_server.py``, on the backups it left.

A backup the server made (``in_server_steps._settle``: original and ``after`` as documents) and not marked
``raced`` is taken a range at a time in ``_id`` order:

1. one aggregation returns, for each backup whose document is still ``after`` (left alone since ``up``),
   what its original holds that ``after`` does not (``patches``): the top-level fields ``up`` changed or
   took out, each with its place among the original's fields and its value, or the name of the field
   ``up`` added that holds it (a rename), or the place (and the value, where one was lost) the step
   needs to make it again of the field as ``up`` rewrote it (the operation's ``server_unmade``:
   map_to_array's map, a key renamed inside a sub-document, a nested key set or taken out), and the names
   of the fields ``up`` added. ``up``'s stages only set and unset fields, so every other field is
   ``after``'s, in the original's order: only the patch travels, and a patch that one of the previous
   eight documents has, not again, where its values are of types ``$eq`` tells apart as their bytes do
   (``shared_patches``: documents a field was set, renamed or moved in alike, or that held one code or
   flag ``up`` took out, are their ``_id``s and one patch); the rows come back packed, each run of rows
   sharing the patch before them as one array of ``_id``s (``command_lists.packed_rows``);
2. one update pipeline over those documents (their ``_id`` range, and ``$in`` the ``_id``s sent with the
   groups' patches as ``let`` variables; in the simple collation) rebuilds each original from the document
   and its group's patch, transforms it by the step's stages as ``up`` did, and compares that with the
   document as it is (``$eq`` and ``$bsonSize``, as ``after`` is checked on ``up``). Equal: the document
   becomes the original followed by ``__mongopat_original: {k}`` (this step's mark of a restore). Not
   equal (the application changed a field the step writes since step 1): it stays as it is. Each
   document's update is atomic on every server: an application's write lands before it or after it (on
   the original). One that lands between steps 1 and 2 on a field the step neither reads nor writes is
   kept, in the original's order; one on a field ``up`` added and a patch names is what the original's
   field gets back (the application's latest value of it);
3. one aggregation returns the ``_id``s of the range's documents neither marked nor equal to their
   original (changed, or deleted): usually none;
4. one update pipeline ``$unset`` of the mark: the original's bytes again;
5. one delete of the range's other backups. Those of step 3 go to the client side's ``down``, which gives a
   changed document the step's inverse and leaves a deleted one deleted.

So what travels is each document's ``_id`` twice (the reply and the update, an element of an array in
both: about 17 bytes an ObjectId each way) and the part of it the step
changed, twice, where that holds values (a value ``up`` rewrote and the document no longer holds:
approximation's exact value, a nested key's value ``up`` replaced or took out); the
client side's ``down`` moves the original, what ``up`` made of it and the document as it is, and writes it
with the whole document as its condition.

A ``down`` stopped anywhere takes the range again: a document restored is no longer ``after`` (step 1
leaves it out), and step 3 finds it marked or equal to its original.
An application reading the range meanwhile sees the mark for the moment between steps 2 and 4; one that
replaces a marked document whole in that moment has its document given to the client side's ``down``
(which leaves it as it is in the old shape, and gives it the step's inverse in the new one). A collection
whose ``_id``s are of several BSON types never ran ``up`` inside the server, so ``$indexOfArray`` over a
range's ``_id``s finds each document's own patch.

Operators: update pipelines with ``$set``, ``$unset``, ``$replaceWith`` (MongoDB 4.2), ``let`` on
``update`` (5.0), ``$setField`` (5.0), ``$bsonSize`` (4.4), ``$objectToArray``, ``$arrayToObject``,
``$reduce``, ``$slice``, ``$concatArrays``, ``$range``, ``$filter``, ``$map``, ``$let``, ``$type``,
``$mergeObjects``, ``$indexOfArray``, ``$arrayElemAt``, ``$cond``, ``$switch``, ``$ifNull``, ``$allElementsTrue``,
``$indexOfBytes``, ``$lookup`` (``localField``/``foreignField``), ``$setWindowFields`` with ``$shift`` (5.0):
all in MongoDB 5.0.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from bson import MaxKey, MinKey

from mongopat.migrate.bookkeeping import BACKUP
from mongopat.migrate.contracts import StepRun
from mongopat.migrate.operations import OPERATIONS
from mongopat.migrate.operations.base import ORIGINAL, ServerUnmade
from mongopat.migrate.operations.server_paths import NOT_OK, keys_of, put_at
from mongopat.migrate.server.command_lists import fitting, id_bytes, packed_rows, unpacked

if TYPE_CHECKING:
    from mongopat.migrate.server.in_server_steps import InServerSteps

# Of patches in one update's let variables (a command is at most 16 MiB; a patch is at most an original,
# at most 7 MiB: ``in_server_steps.STASH_LIMIT``, so one alone always fits).
PATCHES_BYTES = 4 * 1024 * 1024
# The backups taken here: made inside the server, and not changed between the rewrite and the backup.
TAKEN = {"original": {"$type": "object"}, "after": {"$type": "object"}, "raced": {"$ne": True}}
IDS, ENDS, PATCHES = "ids", "ends", "patches"
# Of _ids in one group (documents sharing a patch: one item of a command's lists).
GROUP_IDS = 65536
# How many backups back a row may find the patch it shares.
BACK = 8
# A row (shared_patches) that begins a run of packed rows: one with a patch of its own (``q``, null for a
# document changed or deleted) or naming the one it shares (``s``); the rows after it share the previous
# row's. ``$type`` of a document's missing field is "missing" on every server.
OWN_OR_NAMED = {"$or": [{"$ne": [{"$type": f"${name}"}, "missing"]} for name in ("q", "s")]}


def restore_in_server(steps: InServerSteps, run: StepRun) -> int:
    """Give the documents left alone since ``up`` their originals inside the server (see the module);
    returns how many backups it took out. Nothing with ``--client-side``, or for a step whose stages read
    other documents."""
    operation = OPERATIONS[run.step.name]
    stages, unmade = operation.server_stages(run.step), operation.server_unmade(run.step)
    if stages is None or operation.server_range_key(run.step) is not None or steps.options.client_side:
        return 0
    mark = restore_mark(run)
    backups, collection = steps.db[BACKUP], steps.db[run.step.collection]
    key = {"m": run.migration_id, "s": run.index, "c": run.step.collection}
    low: dict[str, Any] = {"$gte": {**key, "id": MinKey()}}
    done = 0
    while True:
        ranged = {"$and": [{"_id": {**low, "$lte": {**key, "id": MaxKey()}}}, TAKEN]}
        found = steps._collection(BACKUP).aggregate(
            [
                {"$match": ranged},
                {"$sort": {"_id": 1}},
                {"$limit": steps.options.batch_size},
                *patches(run.step.collection, unmade),
                *shared_patches(),
                *packed_rows("i", OWN_OR_NAMED, {"q": "$q", "s": "$s"}),
            ],
            collation={"locale": "simple"},  # $eq tells strings apart by their bytes (shared_patches)
        )
        rows = unpacked(found)  # raw BSON: each original's values as kept
        if not rows:
            return done
        first, last = rows[0]["i"], rows[-1]["i"]
        for some in fitting(_groups(rows), _group_bytes, PATCHES_BYTES):
            chosen = [ident for _, idents in some for ident in idents]  # by group, each in _id order
            ends = list(itertools.accumulate(len(idents) for _, idents in some))
            # The step's server_unmade travels only with patches naming values by it.
            placed = any("u" in entry for patch, _ in some for entry in patch["p"])
            collection.update_many(
                # The documents by their range and the let variable: their _ids travel once more, not twice.
                {"_id": {"$gte": first, "$lte": last}, "$expr": {"$in": ["$_id", f"$${IDS}"]}},
                restore_stages(stages, mark, unmade if placed else {}),
                # $literal: a let variable is an expression, and an original's "$price" would be a path.
                let={
                    IDS: {"$literal": chosen},
                    ENDS: ends,
                    PATCHES: {"$literal": [patch for patch, _ in some]},
                },
                collation={"locale": "simple"},  # the stages compare as Python does, whatever the collection's
            )
        span = {"_id": {**low, "$lte": {**key, "id": last}}}
        changed = _not_restored(steps, run, span, mark)
        collection.update_many({"_id": {"$gte": first, "$lte": last}, f"{ORIGINAL}.k": mark}, [{"$unset": ORIGINAL}])
        # The same backups: nothing but this run writes mongopat_backup while it holds the lock.
        gone = backups.delete_many({"$and": [span, TAKEN, {"_id.id": {"$nin": changed}}]}).deleted_count
        done += gone
        low = {"$gt": {**key, "id": last}}
        steps.lock.renew()


def restore_mark(run: StepRun) -> str:
    """What marks a document this step's ``down`` restored (never an ``up``'s original: ``stash_key``)."""
    return f"{run.migration_id}/{run.index}/down"


def _same(one: Any, other: Any) -> dict[str, Any]:
    """Whether two values are the same: equal (``$eq``), of one BSON type and of one size."""
    return {
        "$and": [
            {"$eq": [one, other]},
            {"$eq": [{"$type": one}, {"$type": other}]},
            {"$eq": [{"$bsonSize": {"v": one}}, {"$bsonSize": {"v": other}}]},
        ]
    }


def _pair_value(element: Any) -> dict[str, Any]:
    """``{ok, v}``: whether ``element`` is a document holding a field ``v``, and its value (null if not)."""
    held = {"$filter": {"input": {"$objectToArray": "$$el"}, "as": "p", "cond": {"$eq": ["$$p.k", "v"]}}}
    first = {"$let": {"vars": {"z": {"$arrayElemAt": ["$$vv", 0]}}, "in": "$$z.v"}}
    found = {
        "$let": {
            "vars": {"vv": held},
            "in": {"$cond": [{"$gt": [{"$size": "$$vv"}, 0]}, {"ok": True, "v": first}, NOT_OK]},
        }
    }
    return {"$let": {"vars": {"el": element}, "in": {"$cond": [
        {"$eq": [{"$type": "$$el"}, "object"]}, found, NOT_OK]}}}  # fmt: skip


def _pair_holds(pair: Any, value: Any) -> dict[str, Any]:
    """Whether a :func:`_pair_value` holds ``value`` (the same: :func:`_same`)."""
    return {"$let": {"vars": {"pv": pair}, "in": {"$cond": ["$$pv.ok", _same("$$pv.v", value), False]}}}


def _unmade_of(unmade: dict[str, ServerUnmade], name: Any, value: Any, at: Any, held: Any) -> dict[str, Any]:
    """``{ok, v}``: the original's value of the field ``name`` made again of its ``value`` in a document, the
    place ``at`` and ``held``, ``{v}`` holding the original's value where there is one, by the step's
    ``server_unmade`` for that field (not ``ok`` for a field it has none for)."""
    branches = [{"case": {"$eq": [name, field]}, "then": how.made} for field, how in unmade.items()]
    made = {"$switch": {"branches": branches, "default": NOT_OK}}
    return {"$let": {"vars": {"wv": value, "at": at, "held": held}, "in": made}}


def _place_of(unmade: dict[str, ServerUnmade], name: Any, value: Any) -> dict[str, Any]:
    """The place :func:`_unmade_of` needs to make the original's ``value`` of the field ``name`` again."""
    branches = [{"case": {"$eq": [name, field]}, "then": how.place} for field, how in unmade.items()]
    return {"$let": {"vars": {"wv": value}, "in": {"$switch": {"branches": branches, "default": -1}}}}


def _held_of(unmade: dict[str, ServerUnmade], name: Any, value: Any, at: Any) -> dict[str, Any]:
    """``{v}``: the value of the original's ``value`` (at place ``at``) of the field ``name`` that
    :func:`_unmade_of` needs; ``{}`` where it needs none."""
    branches = [
        {"case": {"$eq": [name, field]}, "then": how.held} for field, how in unmade.items() if how.held is not None
    ]
    if not branches:
        return {"$literal": {}}
    held = {"$switch": {"branches": branches, "default": "$$REMOVE"}}
    return {"v": {"$let": {"vars": {"wv": value, "at": at}, "in": held}}}


def _has_place(entry: str) -> dict[str, Any]:
    """Whether a patch's entry names its value by ``server_unmade`` (``u``: a place, 0 among them)."""
    return {"$ne": [{"$ifNull": [f"{entry}.u", None]}, None]}


def patches(name: str, unmade: dict[str, ServerUnmade]) -> list[dict[str, Any]]:
    """The stages giving, for each backup (in ``_id`` order), its document's ``_id`` (``i``) and, where the
    document is still ``after`` (left alone since ``up``), what the original holds that ``after`` does not
    (``q``, else null): the names of the top-level fields ``up`` added (``d``) and each top-level field of
    the original ``after`` lacks or holds otherwise, with its place among the original's fields (``p``:
    ``{i, k, v}``, in the original's order). ``up``'s stages only set and unset fields, so the others are
    ``after``'s, in the original's order. A value ``up`` moved to a field it added (a rename) is named by
    that field (``{i, k, r}``), one it moved into a pair ``{k, v}`` of an array it added (attribute) by
    the field and the pair's place (``{i, k, r, e}``), one it rewrote in place (the step's
    ``server_unmade``: map_to_array's map, a key renamed inside it, a nested key) by the place and the
    part of the original it needs (``{i, k, u, w}``), instead of travelling whole: the document holds the
    rest, and the update's check that the step makes the document again of the rebuilt original covers
    it."""
    original, after = {"$objectToArray": "$original"}, {"$objectToArray": "$after"}
    at = {"$indexOfArray": [keys_of("$$a"), "$$f.k"]}
    value = {"$let": {"vars": {"e": {"$arrayElemAt": ["$$a", "$$j"]}}, "in": "$$e.v"}}
    kept = {"$and": [{"$gte": ["$$j", 0]}, _same("$$f.v", value)]}
    field = {"$arrayElemAt": ["$$o", "$$n"]}
    differs = {"$let": {"vars": {"f": field}, "in": {"$let": {"vars": {"j": at}, "in": {"$not": [kept]}}}}}
    changed = {"$filter": {"input": {"$range": [0, {"$size": "$$o"}]}, "as": "n", "cond": differs}}
    holders = {"$filter": {"input": "$$x", "as": "g", "cond": _same("$$g.v", "$$f.v")}}
    # Else the pairs {k, v} of an array ``up`` added holding it as their ``v`` (attribute's): {r, e}.
    in_pairs = {
        "$filter": {
            "input": {"$range": [0, {"$size": "$$g.v"}]},
            "as": "m",
            "cond": _pair_holds(_pair_value({"$arrayElemAt": ["$$g.v", "$$m"]}), "$$f.v"),
        }
    }
    pairs_of = {
        "$cond": [{"$isArray": "$$g.v"}, {"$map": {"input": in_pairs, "as": "m", "in": {"r": "$$g.k", "e": "$$m"}}}, []]
    }
    elements = {
        "$reduce": {
            "input": "$$x",
            "initialValue": [],
            "in": {"$concatArrays": ["$$value", {"$let": {"vars": {"g": "$$this"}, "in": pairs_of}}]},
        }
    }
    # Else the field as ``up`` rewrote it, where the step makes the original's value again of that.
    again = {"$let": {"vars": {"u": _unmade_of(unmade, "$$f.k", value, "$$ua", "$$uw")},
                      "in": {"$cond": ["$$u.ok", _same("$$u.v", "$$f.v"), False]}}}  # fmt: skip
    by_value: Any = {"i": "$$n", "k": "$$f.k", "v": "$$f.v"}
    if unmade:
        named: dict[str, Any] = {"i": "$$n", "k": "$$f.k", "u": "$$ua"}
        if any(how.held is not None for how in unmade.values()):
            # Only at a place: a variable's missing field is no value to omit on the test server (conformance).
            named["w"] = {"$cond": [{"$gte": ["$$ua", 0]}, "$$uw.v", "$$REMOVE"]}
        chosen = {"$cond": [{"$gte": ["$$j", 0]}, {"$cond": [again, named, by_value]}, by_value]}
        held = {"$let": {"vars": {"uw": _held_of(unmade, "$$f.k", "$$f.v", "$$ua")}, "in": chosen}}
        by_value = {"$let": {"vars": {"j": at, "ua": _place_of(unmade, "$$f.k", "$$f.v")}, "in": held}}
    in_element = {
        "$let": {
            "vars": {"h": elements},
            "in": {
                "$cond": [
                    {"$gt": [{"$size": "$$h"}, 0]},
                    {"$mergeObjects": [{"i": "$$n", "k": "$$f.k"}, {"$arrayElemAt": ["$$h", 0]}]},
                    by_value,
                ]
            },
        }
    }
    entry = {
        "$let": {
            "vars": {"f": field},
            "in": {
                "$let": {
                    "vars": {"h": holders},
                    "in": {
                        "$cond": [
                            {"$gt": [{"$size": "$$h"}, 0]},
                            {"i": "$$n", "k": "$$f.k", "r": {"$arrayElemAt": [keys_of("$$h"), 0]}},
                            in_element,
                        ]
                    },
                }
            },
        }
    }
    added = {"$filter": {"input": "$$a", "as": "f", "cond": {"$not": [{"$in": ["$$f.k", keys_of("$$o")]}]}}}
    patch = {
        "$let": {
            "vars": {"o": original, "a": after},
            "in": {"$let": {"vars": {"x": added}, "in": {
                "d": keys_of("$$x"), "p": {"$map": {"input": changed, "as": "n", "in": entry}}}}},
        }
    }  # fmt: skip
    now = {"$arrayElemAt": ["$now", 0]}
    left_alone = {"$and": [{"$eq": [now, "$after"]}, {"$eq": [{"$bsonSize": now}, {"$bsonSize": "$after"}]}]}
    return [
        {"$lookup": {"from": name, "localField": "_id.id", "foreignField": "_id", "as": "now"}},
        {"$project": {"_id": 0, "i": "$_id.id", "q": {"$cond": [left_alone, patch, None]}}},
    ]


# The BSON types whose values ``$eq`` (in the simple collation) tells apart as their bytes do, once their types
# are the same (an int 1 and a long 1 are one value to it): not double or decimal (0.0 and -0.0, 1.0 and 1.00
# are equal), nor documents and arrays, which may hold them.
EXACT_TYPES = ["string", "bool", "null", "objectId", "date", "int", "long"]


def _types(patch: str) -> dict[str, Any]:
    """The BSON types of the values each of a patch's entries holds: ``[v, w]`` (one of them at most is
    there; an entry naming its value, by a field or a place, holds neither). One not there is ``"null"``:
    ``$ifNull`` makes it null on both servers, where ``$type`` of it alone differs (conformance table)."""
    each = [{"$type": {"$ifNull": [f"$$e.{name}", None]}} for name in ("v", "w")]
    return {"$map": {"input": {"$ifNull": [f"{patch}.p", []]}, "as": "e", "in": each}}


def shared_patches() -> list[dict[str, Any]]:
    """The stages leaving out a patch where one of the ``BACK`` previous backups has the same one: the row
    says which (``s``, 1 when left out); so documents sharing one (a field set, renamed or moved alike in
    each, or a value taken out that many documents held, such as a code or a flag), even interleaved with
    documents of another shape, travel as their ``_id``s and one patch. Only a patch whose every value is of
    :data:`EXACT_TYPES` is shared, and only with a patch holding values of the same types: one holding a
    double, a decimal, a document or an array is each document's own."""
    exact = {"$map": {"input": "$t", "as": "vw", "in": {"$setIsSubset": ["$$vw", EXACT_TYPES]}}}
    alike = {"$and": [{"$ne": ["$q", None]}, {"$allElementsTrue": [exact]}]}
    # A patch beside its values' types: $eq of two such takes an int 1 and a long 1 apart, as $eq alone does not.
    typed = {"q": "$q", "t": "$t"}
    same = [{"case": {"$eq": [typed, f"$b{k}"]}, "then": k} for k in range(1, BACK + 1)]
    shifts = {f"b{k}": {"$shift": {"output": typed, "by": -k}} for k in range(1, BACK + 1)}
    return [
        {"$set": {"t": _types("$q")}},
        # $shift: MongoDB 5.0.
        {"$setWindowFields": {"sortBy": {"i": 1}, "output": shifts}},
        {"$set": {"s": {"$cond": [alike, {"$switch": {"branches": same, "default": 0}}, 0]}}},
        {"$project": {"i": 1, "q": {"$cond": [{"$gt": ["$s", 0]}, "$$REMOVE", "$q"]},
                      "s": {"$cond": [{"$gt": ["$s", 1]}, "$s", "$$REMOVE"]}}},
    ]  # fmt: skip


def _groups(rows: list[Any]) -> list[tuple[Any, list[Any]]]:
    """The documents left alone, as groups of ``_id``s sharing one patch, of at most ``GROUP_IDS`` (a row
    without ``q`` shares the patch of the row ``s`` before it, or the previous row's; one whose ``q`` is
    null was changed or deleted)."""
    groups: list[tuple[Any, list[Any]]] = []
    group_of: list[int | None] = []  # each row's group
    for n, row in enumerate(rows):
        if "q" in row:
            patch = row["q"]
            if patch is None:
                group_of.append(None)
                continue
        else:
            shared = group_of[n - row.get("s", 1)]
            assert shared is not None  # the row it names had this patch
            patch = groups[shared][0]
            if len(groups[shared][1]) < GROUP_IDS:
                groups[shared][1].append(row["i"])
                group_of.append(shared)
                continue
        groups.append((patch, [row["i"]]))
        group_of.append(len(groups) - 1)
    return groups


def _group_bytes(group: tuple[Any, list[Any]]) -> int:
    """About what a group adds to an update's let variables: its patch, and each ``_id`` and its place."""
    patch, idents = group
    return len(patch.raw) + sum(map(id_bytes, idents)) + 16


def restore_stages(stages: list[dict[str, Any]], mark: str, unmade: dict[str, ServerUnmade]) -> list[dict[str, Any]]:
    """The update pipeline of step 2: the document's original rebuilt from the document and its patch (the
    let variables; see :func:`patches`), transformed by the step's ``stages`` as on ``up`` (with the
    document as it is kept under ORIGINAL, which the stages leave), then the original marked where that
    equals the document, else the document unchanged."""
    at = {"$indexOfArray": [f"$${IDS}", "$_id"]}
    group = {"$size": {"$filter": {"input": f"$${ENDS}", "as": "e", "cond": {"$lte": ["$$e", at]}}}}
    patch = {"$arrayElemAt": [f"$${PATCHES}", group]}
    replaced = {"$concatArrays": ["$$q.d", keys_of("$$q.p")]}
    kept = {"$filter": {"input": "$$root", "as": "f", "cond": {"$not": [{"$in": ["$$f.k", replaced]}]}}}
    # Each field of the original put back at its place, in the original's order: the fields before it are
    # all there by then.
    put = put_at("$$value", "$$this.k", "$$this.rv.v", "$$this.i")
    rebuilt = {"$arrayToObject": {"$reduce": {"input": "$$q.p", "initialValue": kept, "in": put}}}
    # Every value the patch names still where it named it (else the application moved it: left alone).
    resolved = {"$allElementsTrue": [{"$map": {"input": "$$q.p", "as": "t", "in": "$$t.rv.ok"}}]}
    # Each entry's value found once: {i, k, rv: {ok, v}}.
    entries = {"$map": {"input": "$$given.p", "as": "t",
                        "in": {"i": "$$t.i", "k": "$$t.k", "rv": _resolved("$$t", "$$root", unmade)}}}  # fmt: skip
    found = {"$let": {"vars": {"q": {"d": "$$given.d", "p": entries}},
                      "in": {"now": "$$ROOT", "was": rebuilt, "ok": resolved}}}  # fmt: skip
    # The document's fields as pairs, made once for the patch's entries and the fields kept.
    kept_aside = {"$let": {"vars": {"given": patch, "root": {"$objectToArray": "$$ROOT"}}, "in": found}}
    made = {"$setField": {"field": ORIGINAL, "input": "$$ROOT", "value": "$$REMOVE"}}
    now = f"${ORIGINAL}.now"
    same = {"$and": [f"${ORIGINAL}.ok", {"$eq": [made, now]}, {"$eq": [{"$bsonSize": made}, {"$bsonSize": now}]}]}
    return [
        {"$set": {ORIGINAL: kept_aside}},
        {"$replaceWith": {"$mergeObjects": [f"${ORIGINAL}.was", {ORIGINAL: f"${ORIGINAL}"}]}},
        *stages,
        {"$replaceWith": {"$cond": [same, {"$mergeObjects": [f"${ORIGINAL}.was", {ORIGINAL: {"k": mark}}]}, now]}},
    ]


def _resolved(entry: str, pairs: Any, unmade: dict[str, ServerUnmade]) -> dict[str, Any]:
    """``{ok, v}``: the value a patch's ``entry`` gives its field in the document whose fields are
    ``pairs``: its own ``v``; the document's field ``r``; the ``v`` of the pair at ``e`` of the array in
    field ``r``; or (``u``) what the step's ``server_unmade`` makes of the document's field ``k``. Not
    ``ok`` where the document no longer holds what the entry names (the application changed it since the
    patch was read: the document is then left as it is)."""
    # An entry holds ``r`` (a name: true) or ``v``; $ifNull, not $type, tells them apart (conformance table).
    # Null past the end, not $arrayElemAt's missing (whose $type the test server gets wrong: conformance).
    inside = {"$cond": [{"$lt": [f"{entry}.e", {"$size": "$$wv"}]}, {"$arrayElemAt": ["$$wv", f"{entry}.e"]}, None]}
    element = _pair_value({"$cond": [{"$isArray": "$$wv"}, inside, None]})
    in_pair = {"$gte": [{"$ifNull": [f"{entry}.e", -1]}, 0]}
    whole = {"$let": {"vars": {"w": {"$arrayElemAt": [pairs, "$$j"]}}, "in": "$$w.v"}}
    held = {"$let": {"vars": {"wv": whole}, "in": {"$cond": [in_pair, element, {"ok": True, "v": "$$wv"}]}}}
    found = {"$cond": [{"$lt": ["$$j", 0]}, NOT_OK, held]}
    named = {"$let": {"vars": {"j": {"$indexOfArray": [keys_of(pairs), f"{entry}.r"]}}, "in": found}}
    field_value = {"$arrayElemAt": [pairs, "$$j"]}
    made = _unmade_of(unmade, f"{entry}.k", "$$w.v", f"{entry}.u", {"v": f"{entry}.w"})
    own = {"$let": {"vars": {"w": field_value}, "in": made}}
    in_place = {"$cond": [{"$lt": ["$$j", 0]}, NOT_OK, own]}
    rewritten = {"$let": {"vars": {"j": {"$indexOfArray": [keys_of(pairs), f"{entry}.k"]}}, "in": in_place}}
    given: Any = {"ok": True, "v": f"{entry}.v"}
    if unmade:
        given = {"$cond": [_has_place(entry), rewritten, given]}
    return {"$cond": [{"$ifNull": [f"{entry}.r", False]}, named, given]}


def _not_restored(steps: InServerSteps, run: StepRun, span: dict[str, Any], mark: str) -> list[Any]:
    """The ``_id``s of the range's documents step 2 did not restore: neither marked by it nor equal to their
    original (a document restored by a run stopped before step 4 or 5 is one or the other)."""
    original = "$original"
    restored = {
        "$or": [
            {"$eq": [f"$now.{ORIGINAL}.k", mark]},
            {"$and": [{"$eq": ["$now", original]}, {"$eq": [{"$bsonSize": "$now"}, {"$bsonSize": original}]}]},
        ]
    }
    found = steps.db[BACKUP].aggregate(
        [
            {"$match": {"$and": [span, TAKEN]}},
            {"$lookup": {"from": run.step.collection, "localField": "_id.id", "foreignField": "_id", "as": "now"}},
            {"$set": {"now": {"$arrayElemAt": ["$now", 0]}}},
            {"$match": {"$expr": {"$not": [restored]}}},
            {"$project": {"_id": 0, "id": "$_id.id"}},
        ]
    )
    return [backup["id"] for backup in found]
