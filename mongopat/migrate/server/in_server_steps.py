"""Document steps a server computes itself, for steps whose transform is aggregation stages
(``server_stages``): no document and no ``_id`` travels between the server and mongopat.

Each batch is an ``_id`` range holding ``batch_size`` pending documents (fewer where a collection sharded on
a range of ``_id`` passes to another shard's chunks: ``sharding.shard_breaks``), taken in one pass or, a
thread each, in stretches of ``_id`` (a shard's, or ``--workers`` parts: ``stretches.py``):

1. **rewrite**: one ``update`` whose pipeline first keeps the document as it is in the document itself
   (``__mongopat_original: {k: migration/step, d: $$ROOT}``), then applies the step's stages. Each
   document's update is atomic, on MongoDB as on the test server: the original kept is exactly the
   version transformed, and an application's write lands before it (and is transformed) or after it;
2. **backup**: an aggregation over the range's documents holding an original puts each original and what
   the same stages make of it into ``mongopat_backup`` (``$merge`` into mongopat's own collection); the
   side documents of a step that makes them (``document_versioning``'s first revisions, ``subset``'s full
   list, ``outlier``'s overflow pages) are merged from these backups into their collection next;
3. **release**: an update pipeline ``$unset`` of the originals kept in the range's documents;
4. **check**: backups whose document is no longer what ``up`` made of the original (the application
   changed it since its rewrite, or deleted it) are marked ``raced``: ``down`` gives those the step's
   inverse, never the original. A change the step's own transform would erase (the application writing
   the very field ``unset_field`` removes) cannot be told from none, so ``down`` gives that document the
   original kept.

A step whose stages read other documents (``extended_reference``, ``tree``: ``server_range_key`` and
``server_range_values``) gets them as the range's ``let`` variables: the distinct keys of the range's
pending documents are read (one ``$group``, followed by a step's ``server_range_stages``: what
``extended_reference`` and ``pre_aggregation`` look up for each key, found in the same aggregation), the
documents ``tree`` needs found as the client side finds them, and the table sent with the rewrite (a
range whose table would pass ``VARIABLES_LIMIT`` is halved until it does not); only documents the table
can transform are rewritten (``RangeValues.takes``; the others stay pending, or go to the client side's
pass where ``server_leaves_untaken``). The backup's
aggregation reads the same documents inside the server instead (``server_settle_stages``: ``$lookup``,
``$graphLookup``), so the table travels once; a referenced document changed in between (or before a stopped
run's range is settled) makes ``after`` differ from the document, which is marked ``raced``.

The changelog records the range before its rewrite (``stashed_to``) and clears it with the range's
checkpoint: a run stopped anywhere in between settles that range first (steps 2 to 4 again), so a crash
leaves no original in a document and no document without its backup. An application reading the range
meanwhile sees the field ``__mongopat_original`` for the moment between steps 1 and 3.

``down`` restores a document still equal to ``after`` byte for byte (inside the server:
``unset_in_server.py``, ``restore_in_server.py``) and gives one the application changed since the step's
inverse (``document_steps.py``).

Operators: update pipelines with ``$set``, ``$unset`` and ``$replaceWith`` (MongoDB 4.2), ``$merge`` into
mongopat's own collections (4.2), ``$bsonSize`` (4.4), ``$setField`` for nested paths (5.0,
``operations/server_paths.py``), the steps' ``$isNumber`` (4.4), ``$type``, ``$switch``, ``$cond``, ``$let``,
``$map``, ``$range``, ``$slice``, ``$mergeObjects``, ``$lookup``, ``$$REMOVE``, ``$group``,
``$indexOfArray``, ``$arrayToObject``, ``$reduce``, ``$reverseArray``, ``$concat``, ``$toString``,
``$graphLookup`` and ``let`` on ``update`` (5.0): all in MongoDB 5.0. A
collection is taken on the client side instead when it holds ``_id``s of several BSON types (a range stays
within one), is sharded and the step writes its shard key, or has a ``$jsonSchema`` validator refusing
fields it does not name; a document over 7 MiB (its original would not fit beside it) is left to a
client-side pass after the server's, as is a document whose transform the server would compute otherwise
than Python (``server_declines``: a sorted ``subset``'s list whose sort values the two order differently,
``operations/server_order.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import bson
from bson import MinKey, ObjectId
from pymongo import ASCENDING, DESCENDING

from mongopat.errors import OperationFailed
from mongopat.migrate.bookkeeping import BACKUP
from mongopat.migrate.context_sources import DatabaseDocuments
from mongopat.migrate.contracts import StepRun, StepState
from mongopat.migrate.operations import OPERATIONS
from mongopat.migrate.operations.base import ORIGINAL, RangeValues
from mongopat.migrate.runner import CATCH_UP_PASSES, StepOutcome, count
from mongopat.migrate.server import sharding
from mongopat.migrate.server.sharding import MergeTarget, NotMergeable, ShardBreaks
from mongopat.migrate.server.steps import ServerSteps
from mongopat.migrate.steps import Step

if TYPE_CHECKING:
    from mongopat.migrate.server.runner import Runner

# ORIGINAL (operations/base.py) is also where the rewrite keeps a document's original in the document until
# its backup is taken (a document of the application's holding that name is left to the client side).
# A document holds its original beside itself for a moment: one larger than this would not fit in 16 MB
# with its copy (``$bsonSize``, MongoDB 4.4); the client side takes it.
STASH_LIMIT = 7 * 1024 * 1024
FITS_TWICE = {"$expr": {"$lte": [{"$bsonSize": "$$ROOT"}, STASH_LIMIT]}}
# The most a range's let variables (extended_reference's copies) may take: a range whose referenced copies
# are larger is halved, as the rewrite's command carries them.
VARIABLES_LIMIT = 4 * 1024 * 1024
# The pending documents the server leaves to the client side's pass after its own (with those the step's
# server_declines names: left_to_the_client_side).
LEFT_TO_THE_CLIENT_SIDE = [{"$expr": {"$gt": [{"$bsonSize": "$$ROOT"}, STASH_LIMIT]}}, {ORIGINAL: {"$exists": True}}]
# What the stages of a step's side documents read: the document as the step left it, with its original
# under ORIGINAL (subset and outlier move the original's elements; document_versioning copies the result).
SIDE_INPUT = [{"$replaceWith": {"$mergeObjects": ["$after", {ORIGINAL: "$original"}]}}]


class TakenRange(NamedTuple):
    """A range the server rewrote: its last ``_id``, its documents backed up and rewritten, and the share
    of a ``--batch-size`` range it was sized for (less than 1 once halved)."""

    high: Any
    backed: int
    rewritten: int
    share: float


class After(NamedTuple):
    """Where a range of a pass starts: after ``value`` (the last ``_id`` done), or from it on where
    ``inclusive`` (the low bound of a shard's stretch, ``stretches.py``); from the first ``_id``
    without a value."""

    value: Any = None
    has_value: bool = False
    inclusive: bool = False

    def bound(self) -> dict[str, Any]:
        """The ``_id`` condition of the documents from here on (empty: all)."""
        if not self.has_value:
            return {}
        return {"$gte" if self.inclusive else "$gt": self.value}


FIRST = After()


class InServerSteps(ServerSteps):
    """Document steps computed by the server (the base of ``document_steps.DocumentSteps``)."""

    def __init__(self, runner: Runner) -> None:
        super().__init__(runner)
        # Per (collection, side collection): how its $merge matches (read, and its index made, once).
        self._targets: dict[tuple[str, str], MergeTarget] = {}
        # Per collection: where its chunks pass to another shard (read again at each pass: the balancer
        # moves chunks, and stale breaks only cost a range a second shard).
        self._breaks: dict[str, ShardBreaks] = {}

    def in_server(self, run: StepRun) -> bool:
        """Whether the step runs inside the server; decided once per step and kept in the changelog, so a
        resumed run goes on the way it began."""
        if run.state.get("in_server") is not None:
            return bool(run.state["in_server"])
        why = self._client_side_because(run.step, run.state)
        # A sharded side collection's $merge matches on its shard key too: said in the changelog.
        targets = {} if why else self._merge_targets(run.step)
        merge_on = {t.into: list(t.on) for t in targets.values() if t.on != ("_id",)}
        more = {"merge_on": merge_on} if merge_on else {}
        self.changelog.step(run.migration_id, run.index, in_server=why is None, client_side=why, **more)
        run.state["in_server"], run.state["client_side"] = why is None, why
        if merge_on:
            run.state["merge_on"] = merge_on
        return why is None

    def _client_side_because(self, step: Step, state: StepState) -> str | None:
        operation = OPERATIONS[step.name]
        if operation.server_stages(step) is None or operation.server_side_documents(step) is None:
            return "the step's transform needs Python"
        if self.options.client_side:
            return "--client-side"
        if not type(getattr(self.db, "client", None)).__module__.startswith("pymongo"):
            return "the embedded engine runs no $merge"
        if state.get("has_last") or state.get("ranges"):
            return "resumed from a run that began on the client side"
        name = step.collection
        if (why := self._shard_key_because(step)) is not None:
            return why
        if (why := self._side_collections_because(step)) is not None:
            return why
        if (why := self._options_because(step)) is not None:
            return why
        ends = [
            found[0]["_id"]
            for direction in (ASCENDING, DESCENDING)
            if (found := list(self.db[name].find({}, {"_id": 1}, sort=[("_id", direction)], limit=1)))
        ]
        if len({_bracket(value) for value in ends}) > 1:
            return "its _ids are of several BSON types"
        return None

    def _options_because(self, step: Step) -> str | None:
        """Why the collection's options keep it on the client side: its ``$jsonSchema`` refuses fields it
        does not name, and the rewrite keeps each original in its document until it is backed up; or the
        step orders or matches values (``server_declines``) and the collection's default collation, which
        the update pipelines compare strings with, is not the simple binary order Python's is."""
        options = self.collection_options(step.collection)
        validator = options.get("validator") or {}
        schema = validator.get("$jsonSchema") if isinstance(validator, dict) else None
        if isinstance(schema, dict) and schema.get("additionalProperties") is False:
            return "its validator refuses fields it does not name"
        locale = (options.get("collation") or {}).get("locale", "simple")
        if locale != "simple" and OPERATIONS[step.name].server_declines(step) is not None:
            return f"the step compares values and its default collation ({locale}) compares strings other than Python"
        return None

    def _shard_key_because(self, step: Step) -> str | None:
        """Why a sharded collection stays on the client side: the step writes its shard key (or the key
        cannot be read), or the server is older than 5.1. The rewrite and the release are updates of the
        collection's own documents, which a sharded collection takes on every shard at once; the backups'
        ``$merge`` stages go into mongopat's own unsharded collection (on its ``_id``), those of side
        documents into a collection that may be sharded (``_side_collections_because``); the check reads
        the collection with ``$lookup``, whose ``from`` may be sharded from MongoDB 5.1 on."""
        found = sharding.sharding(self.db, step.collection)
        if not found.sharded:
            return None
        version = list((self.db.client.server_info().get("versionArray") or [0, 0])[:2])
        if version < [5, 1]:
            return "the collection is sharded and $lookup from a sharded collection needs MongoDB 5.1"
        key = list(found.key)
        if not key:
            return "the collection is sharded and its shard key could not be read"
        written = OPERATIONS[step.name].written_fields(step)
        touched = [k for k in key if any(w == k or w.startswith(k + ".") or k.startswith(w + ".") for w in written)]
        return f"the step writes {', '.join(touched)}, part of the shard key" if touched else None

    def _side_collections_because(self, step: Step) -> str | None:
        """Why the step's side documents cannot be merged into their collections inside the server: one is
        sharded on a field they may lack, or the unique index its ``on`` needs cannot be made."""
        try:
            self._merge_targets(step)
        except NotMergeable as exc:
            return str(exc)
        return None

    def _merge_targets(self, step: Step) -> dict[str, MergeTarget]:
        """How each of the step's side collections takes its ``$merge`` (read once per step and runner)."""
        cache = self._targets
        operation = OPERATIONS[step.name]
        holds = operation.side_document_fields(step)
        targets = {}
        for into in operation.server_side_documents(step) or {}:
            if (step.collection, into) not in cache:
                cache[step.collection, into] = sharding.merge_target(self.db, into, holds.get(into, frozenset()))
            targets[into] = cache[step.collection, into]
        return targets

    # -- the run -----------------------------------------------------------------------------------

    def in_server_step(self, run: StepRun) -> StepOutcome:
        outcome = StepOutcome(
            read=run.state.get("read", 0), written=run.state.get("written", 0), stats=dict(run.state.get("stats") or {})
        )
        total = self.db[run.step.collection].estimated_document_count()
        self.throttle.start(outcome.read)
        start = After(run.state.get("last_id"), run.state.get("has_last", False))
        breaks: ShardBreaks | None = None  # read once here when a new pass plans its stretches
        if run.state.get("stretches") is not None or not (start.has_value or run.state.get("stashed_to") is not None):
            # Chunks on several shards, or --workers: a thread per stretch of _id (begun so, goes on so).
            from mongopat.migrate.server import stretches  # (it builds on this module)

            breaks = sharding.shard_breaks(self.db, run.step.collection)
            if run.state.get("stretches") is None and (planned := stretches.planned(self, run, breaks)):
                run.state["stretches"] = planned
                self.changelog.step(run.migration_id, run.index, stretches=planned)
            if (taken := run.state.get("stretches")) is not None:
                self._breaks[run.step.collection] = breaks
                threads = stretches.threads_for(taken, self.options.workers)
                stretches.StretchPass(self, run, outcome, total).run_all(threads)
                self.in_server_catch_up(run, outcome)
                return outcome
        if (open_to := run.state.get("stashed_to")) is not None:
            # A run stopped inside a range: its rewritten documents still hold their originals.
            backed = self._settle(run, start, open_to, outcome.stats, replay=True)
            outcome.read += backed
            self.runner.checkpoint(run, outcome, backed, 0, open_to, total, stashed_to=None)
            start = After(open_to, True)
        budget = (total or 0) // self.options.batch_size + 2  # documents inserted behind it: the catch-up's
        self._in_server_pass(run, outcome, start, budget, total, replay=False, breaks=breaks)
        self.in_server_catch_up(run, outcome)
        return outcome

    def in_server_catch_up(self, run: StepRun, outcome: StepOutcome) -> int:
        """Passes over the documents still pending (written in the old shape behind the scan or since, or
        changed back to it), as the client-side runner's catch-up passes; returns the documents migrated."""
        where = server_pending(run.step)
        collection = self.db[run.step.collection]
        ceiling = collection.estimated_document_count() // self.options.batch_size + 2
        migrated = 0
        for _pass in range(CATCH_UP_PASSES):
            budget = min(collection.count_documents(where) // self.options.batch_size + 1, ceiling)
            done = self._in_server_pass(run, outcome, FIRST, budget, None, replay=True)
            migrated += done
            if not done:
                break
        outcome.stats["caught_up"] = outcome.stats.get("caught_up", 0) + migrated
        outcome.stats["pending_left"] = collection.count_documents(where)
        # What verify finds again later: the backups this step keeps (one per document, however often it
        # was rewritten).
        outcome.stats["backups"] = self.backups_kept(run)
        return migrated

    def settle_stashed(self, run: StepRun) -> int:
        """Before ``down``: the documents a stopped run left holding their originals (a range rewritten but
        not yet settled, of one pass or of a stretch) settled as the next ``up`` would settle them, so that
        ``down`` finds their backups; returns how many. Without this, ``down`` would leave them in the new
        shape with their original inside."""
        # Recorded before each rewrite and cleared with its checkpoint: without an open range, nothing holds
        # an original, and the collection (no index on mongopat's field) is not scanned to find none.
        stretches = run.state.get("stretches") or []
        if run.state.get("stashed_to") is None and all(s["stashed_to"] is None for s in stretches):
            return 0
        collection = self.db[run.step.collection]
        holding = {f"{ORIGINAL}.k": stash_key(run)}
        last = list(collection.find(holding, {"_id": 1}, sort=[("_id", DESCENDING)], limit=1))
        if not last:
            return 0
        stats: dict[str, Any] = {}
        settled = self._settle(run, FIRST, last[0]["_id"], stats, replay=True)
        if left := collection.count_documents(holding):  # _ids of another BSON type than the last's
            raise OperationFailed(
                f"{run.step.name} on {run.step.collection}: {left} document(s) still hold the original a stopped "
                "run kept in them",
                hint="run `mongopat migrate up` to finish the step, then down",
            )
        return settled

    def _in_server_pass(
        self,
        run: StepRun,
        outcome: StepOutcome,
        start: After,
        budget: int,
        total: int | None,
        replay: bool,
        breaks: ShardBreaks | None = None,
    ) -> int:
        """Ranges of pending documents from ``start`` on, at most ``budget`` of them, each checkpointed;
        returns the documents rewritten. ``replay``: the side documents of these documents may exist
        already (a catch-up pass: the application wrote a migrated document back in the old shape).
        ``breaks``: the collection's shard breaks, when just read (else read here)."""
        rewritten, spent = 0, 0.0
        if breaks is None:
            breaks = sharding.shard_breaks(self.db, run.step.collection)
        self._breaks[run.step.collection] = breaks
        while spent < budget:
            taken = self._in_server_batch(run, start, outcome.stats, replay)
            if taken is None:
                break
            start = After(taken.high, True)
            outcome.read += taken.backed
            outcome.written += taken.rewritten
            rewritten += taken.rewritten
            spent += taken.share  # a range halved to fit its let variables counts for what it held
            self.runner.checkpoint(run, outcome, taken.backed, taken.rewritten, taken.high, total, stashed_to=None)
        return rewritten

    def _range_end(self, collection: Any, query: dict[str, Any], size: int, start: After) -> tuple[bool, Any, bool]:
        """Whether ``query`` matches a document, the end of the next range: the ``_id`` of the ``size``-th
        match in ``_id`` order, or of the last one when fewer match (one small reply), and whether it was
        ended earlier, where a sharded collection's chunks pass to another shard (``_within_a_shard``)."""
        for skip, order in ((size - 1, ASCENDING), (0, DESCENDING)):
            for doc in collection.find(query, {"_id": 1}, sort=[("_id", order)], skip=skip, limit=1):
                return True, *self._within_a_shard(collection, query, start, doc["_id"])
        return False, None, False

    def _within_a_shard(self, collection: Any, query: dict[str, Any], start: After, high: Any) -> tuple[Any, bool]:
        """``high`` itself (and False), or (and True) the last match of ``query`` below the first break
        (``sharding.shard_breaks``) above the range's first match: each command of the range then goes to
        one shard. At most two more small queries, and only for a range that would cross a break."""
        breaks = self._breaks.get(collection.name) or ShardBreaks()
        value, has_value = start.value, start.has_value
        while breaks.values:
            found = breaks.after(value, has_value)
            if found is None or breaks.below(high, found[1]):
                return high, False
            brk = found[0]
            below = {"$and": [query, {"_id": {"$lt": brk}}]}
            for doc in collection.find(below, {"_id": 1}, sort=[("_id", DESCENDING)], limit=1):
                return doc["_id"], True
            # Nothing pending below that break: the range starts at its first match, past it.
            value, has_value = collection.find(query, {"_id": 1}, sort=[("_id", ASCENDING)], limit=1)[0]["_id"], True
        return high, False

    def _in_server_batch(
        self,
        run: StepRun,
        start: After,
        stats: dict[str, Any],
        replay: bool,
        below: dict[str, Any] | None = None,
        recorded_as: str = "",
    ) -> TakenRange | None:
        """Rewrite the next range of pending documents, each keeping its original, then settle the range;
        None when none is left from ``start`` on (and ``below`` a shard stretch's end: its ``_id``
        condition). The range's end is recorded in the changelog field ``recorded_as`` + ``stashed_to``."""
        collection = self.db[run.step.collection]
        operation = OPERATIONS[run.step.name]
        stages = operation.server_stages(run.step) or []
        where, query = pending_from(run.step, start, below)
        found, high, at_a_break = self._range_end(collection, query, self.options.batch_size, start)
        if not found:
            return None
        if at_a_break:
            count(stats, "ended_at_chunks", 1)
        values, high, size = self._values_that_fit(run, start, high, where, query)
        # Before the rewrite: a crash from here on leaves documents of the range holding their originals,
        # which the next run settles first.
        self.changelog.step(run.migration_id, run.index, **{recorded_as + "stashed_to": high})
        takeable = [_span(start, high), where, {ORIGINAL: {"$exists": False}}, FITS_TWICE]
        if (declines := operation.server_declines(run.step)) is not None:
            # Evaluated here only, on the range's documents: the range queries and counts stay cheap.
            takeable.append({"$expr": {"$not": [declines]}})
        if values is not None:
            takeable.append({"$expr": values.takes})
        stash = {"$set": {ORIGINAL: {"k": stash_key(run), "d": "$$ROOT"}}}
        rewritten = collection.update_many({"$and": takeable}, [stash, *stages], **_let(values)).matched_count
        backed = self._settle(run, start, high, stats, replay)
        if rewritten > backed:
            count(stats, "deleted_meanwhile", rewritten - backed)
        return TakenRange(high, backed, rewritten, size / self.options.batch_size)

    def _settle(self, run: StepRun, start: After, high: Any, stats: dict[str, Any], replay: bool) -> int:
        """The documents of a range holding their originals: each original and what the step's stages make
        of it kept in ``mongopat_backup``, the step's side documents made from them, the originals taken
        out of the documents, and the backups of documents changed since their rewrite marked ``raced``.
        Returns the documents backed up. Every command can run again after a crash to the same end."""
        name, collection = run.step.collection, self.db[run.step.collection]
        operation = OPERATIONS[run.step.name]
        stages = operation.server_settle_stages(run.step) or []
        span = _span(start, high)
        holding = {"$and": [span, {f"{ORIGINAL}.k": stash_key(run)}]}
        batch = ObjectId()  # names this range's backups
        key = {"m": run.migration_id, "s": run.index, "c": name}
        collection.aggregate(
            [
                {"$match": holding},
                # The original as the rewrite read it, transformed again by the same stages: what the rewrite
                # wrote, whatever the application wrote since.
                {"$replaceWith": f"${ORIGINAL}.d"},
                {"$set": {ORIGINAL: "$$ROOT"}},
                *stages,
                {"$replaceWith": {"original": f"${ORIGINAL}", "after": "$$ROOT"}},
                {"$project": {f"after.{ORIGINAL}": 0}},
                {
                    "$replaceWith": {
                        "_id": {**{k: {"$literal": v} for k, v in key.items()}, "id": "$original._id"},
                        "original": "$original",
                        "after": "$after",
                        "run": batch,
                    }
                },
                {"$merge": {"into": BACKUP, "on": "_id", "whenMatched": "replace", "whenNotMatched": "insert"}},
            ]
        )
        # This range's backups: a range of mongopat_backup's _id (documents compare field by field).
        lower = {**key, "id": start.value if start.has_value else MinKey()}
        above = "$gt" if start.has_value and not start.inclusive else "$gte"
        mine = {"_id": {above: lower, "$lte": {**key, "id": high}}, "run": batch}
        side = operation.server_side_documents(run.step) or {}
        if side and replay and operation.side_collections:
            # A document written back in the old shape since an earlier up: its earlier side documents go,
            # so that a shorter list leaves none behind (as the client side does on a replay).
            parents = [
                d["i"] for d in self.db[BACKUP].aggregate([{"$match": mine}, {"$project": {"_id": 0, "i": "$_id.id"}}])
            ]
            for collection_name in side:
                self.db[collection_name].delete_many({"parentId": {"$in": parents}})
        targets = self._merge_targets(run.step) if side else {}
        for collection_name, side_stages in side.items():
            self._side_documents(BACKUP, [{"$match": mine}, *SIDE_INPUT], side_stages, targets[collection_name])
        collection.update_many(holding, [{"$unset": ORIGINAL}])
        raced = self._mark_raced(name, mine)
        gone = self._side_documents_of_deleted(name, mine, side) if side else 0
        if gone:
            count(stats, "deleted_meanwhile", gone)
        backed = self.db[BACKUP].count_documents(mine)
        count(stats, "transformed", backed)
        if raced:
            count(stats, "conflicts", raced)
        return backed

    def _values_that_fit(
        self, run: StepRun, start: After, high: Any, where: dict[str, Any], query: dict[str, Any]
    ) -> tuple[RangeValues | None, Any, int]:
        """The range's ``let`` variables, its end and the documents it was sized for, the range halved until
        they take at most ``VARIABLES_LIMIT`` bytes (the rewrite carries them; a command is at most
        16 MiB)."""
        size = self.options.batch_size
        while True:
            values = self._range_values(run, {"$and": [_span(start, high), where]})
            if values is None or size == 1 or len(bson.encode(values.variables)) <= VARIABLES_LIMIT:
                return values, high, size
            size = max(1, size // 2)
            _found, high, _at_a_break = self._range_end(self.db[run.step.collection], query, size, start)

    def _range_values(self, run: StepRun, match: dict[str, Any]) -> RangeValues | None:
        """The ``let`` variables of the range's documents matching ``match`` (``server_range_values``): the
        distinct values of the step's range key among them, with what ``server_range_stages`` computes of
        them inside the server (one small reply); None for a step whose stages read the document alone."""
        operation = OPERATIONS[run.step.name]
        key = operation.server_range_key(run.step)
        if key is None:
            return None
        pipeline: list[dict[str, Any]] = [{"$match": match}]
        if (declines := operation.server_declines(run.step)) is not None:
            # Only the keys the server takes: a group of equal numbers keeps one of them, which must not be
            # a Decimal128 the step declines where an int of the same value is taken.
            pipeline.append({"$match": {"$expr": {"$not": [declines]}}})
        grouped = self.db[run.step.collection].aggregate(
            [
                *pipeline,
                {"$group": {"_id": key}},
                {"$match": {"_id": {"$ne": None}}},
                *operation.server_range_stages(run.step),
            ],
            allowDiskUse=True,
        )
        return operation.server_range_values(run.step, list(grouped), DatabaseDocuments(self.db))

    def _side_documents_of_deleted(self, name: str, mine: dict[str, Any], side: dict[str, list[dict[str, Any]]]) -> int:
        """Remove the side documents of this range's documents the application deleted since their rewrite
        (as the client side does); returns how many documents that was."""
        gone = [{"$match": mine}, {"$lookup": {"from": name, "localField": "_id.id", "foreignField": "_id",
                                               "as": "current"}}, {"$match": {"current": {"$size": 0}}}]  # fmt: skip
        deleted = 0
        for collection_name, stages in side.items():
            made = self.db[BACKUP].aggregate([*gone, *SIDE_INPUT, *stages, {"$project": {"_id": 1}}])
            ids = [d["_id"] for d in made]
            if ids:
                self.db[collection_name].delete_many({"_id": {"$in": ids}})
            deleted = max(deleted, len(ids))
        return deleted

    def _side_documents(
        self, source: str, pipeline: list[dict[str, Any]], stages: list[dict[str, Any]], into: MergeTarget
    ) -> None:
        self.db[source].aggregate([*pipeline, *stages, {"$project": {ORIGINAL: 0}}, into.stage()])

    def _mark_raced(self, name: str, mine: dict[str, Any]) -> int:
        """Mark this range's backups whose document is no longer what ``up`` made of the original kept (the
        application changed it since its rewrite, or deleted it): ``down`` gives those the step's inverse,
        never the original (``document_versions.left_alone``). Returns how many were marked."""
        self.db[BACKUP].aggregate(
            [
                {"$match": mine},
                {"$lookup": {"from": name, "localField": "_id.id", "foreignField": "_id", "as": "now"}},
                {"$match": {"$expr": {"$ne": [{"$arrayElemAt": ["$now", 0]}, "$after"]}}},
                {"$project": {"_id": 1, "raced": {"$literal": True}}},
                # mongopat_backup is mongopat's alone: nothing else writes it meanwhile.
                {"$merge": {"into": BACKUP, "on": "_id", "whenMatched": "merge", "whenNotMatched": "discard"}},
            ]
        )
        return self.db[BACKUP].count_documents({**mine, "raced": True})


def _let(values: RangeValues | None) -> dict[str, Any]:
    """The ``let`` option of a range's commands, when its stages read variables (MongoDB 5.0)."""
    return {"let": values.variables} if values is not None else {}


def _span(start: After, high: Any) -> dict[str, Any]:
    return {"_id": {"$lte": high, **start.bound()}}


def stash_key(run: StepRun) -> str:
    """What marks an original kept in its document by this step of this migration (never by anything else)."""
    return f"{run.migration_id}/{run.index}"


def server_pending(step: Step) -> dict[str, Any]:
    """The filter of the documents the in-server path takes: the step's own, or the exact expression it
    gives where its filter would read a nested path through arrays."""
    operation = OPERATIONS[step.name]
    exact = operation.server_pending(step)
    return operation.pending(step) if exact is None else {"$expr": exact}


def pending_from(step: Step, start: After, below: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The documents of ``step`` pending (``below`` a stretch's end: its ``_id`` condition), and those of them
    from ``start`` on."""
    where = server_pending(step) if below is None else {"$and": [server_pending(step), below]}
    return where, ({"$and": [{"_id": start.bound()}, where]} if start.has_value else where)


def left_to_the_client_side(step: Step) -> dict[str, Any] | None:
    """The filter of the pending documents the server leaves to a client-side pass after its own: too
    large to hold their original beside them, holding mongopat's field, or declined by the step; None
    for all those still pending, where the step leaves the documents its range values cannot transform
    to the client side (``server_leaves_untaken``)."""
    operation = OPERATIONS[step.name]
    if operation.server_leaves_untaken(step):
        return None
    declines = operation.server_declines(step)
    return {"$or": [*LEFT_TO_THE_CLIENT_SIDE, *([{"$expr": declines}] if declines is not None else [])]}


def _bracket(value: Any) -> str:
    """A value's BSON comparison bracket, as far as ranges of _id care (numbers are one)."""
    name = type(value).__name__
    return "number" if name in ("int", "Int64", "float", "Decimal128") else name
