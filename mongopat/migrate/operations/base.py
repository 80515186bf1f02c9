"""What a step is, apart from how a runner executes it: its type and parameters (:class:`StepType`), and
for a document step its pure transform, which documents are still in the old shape, and its inverse.

``transform`` turns a copy of a document into the new document plus side documents for other collections
(deterministic ``_id``s, so writing them twice changes nothing); both runners (a server, a dump folder) call
it. ``pending`` returns a MongoDB filter; ``is_pending`` answers the same question for one document in hand
(the runner reads documents once and must not ask the server again per document). ``inverse`` receives the
document as it is now and the original the step transformed, and returns the document in the old shape that
keeps what the application wrote since, or None when it cannot (the runner then leaves the document as it
is and reports it). ``side`` holds, per document ``_id``, the documents the step wrote to other collections
(subset's full list, outlier's overflow pages), for steps whose inverse merges them back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from mongopat.migrate.operations.server_paths import holds, place_of, plain, put_back, value_at, within
from mongopat.migrate.transform_api import (
    Context,
    ContextSource,
    Document,
    Result,
    copy_document,
    get_path,
    has_path,
    hashable_key,
    pop_path,
    set_path,
)

if TYPE_CHECKING:
    from mongopat.guide.cost import Evidence
    from mongopat.guide.reads import ReadPlan
    from mongopat.guide.writes import WritePlan
    from mongopat.migrate.catalog import Catalog

_MISSING = object()


@dataclass(frozen=True)
class ServerInverse:
    """A step's inverse inside the server, for a document whose original had none of ``fields`` (top-level
    names): the update pipeline ``stages`` that make it of the document as it is now, with the fields of
    the original (absent) and the application's changes kept, as :meth:`DocumentOperation.inverse` does."""

    fields: list[str]
    stages: list[dict[str, Any]]


@dataclass(frozen=True)
class ServerUnmade:
    """A top-level field's original value made again inside the server of the field as a step rewrote it,
    from a place and a value the step says how to read off the original: ``made``, an expression of
    ``$$wv`` (the field's value in a document), ``$$at`` and ``$$held`` giving ``{ok, v}`` (``ok``: the
    value is one the step's stages could have made, so that they take ``v`` without an error; ``v``: the
    original's value); ``place``, an expression of ``$$wv`` (here the original's value) giving the
    ``$$at`` that one needs (a key's place among its neighbours; -1 where there is none); ``held``, None
    where ``made`` needs no value of the original, else an expression of ``$$wv`` (the original's) and
    ``$$at`` (its place) giving the one it needs as ``$$held.v`` (missing where it has none): the only
    part of the field that travels."""

    made: Any
    place: Any = 0
    held: Any = None


@dataclass(frozen=True)
class RangeValues:
    """What a range's server stages read besides the document (another collection's documents), sent with
    the range's commands as ``let`` variables (MongoDB 5.0): ``variables`` by name, each a literal, and
    ``takes``, an expression over them true for the range's documents they can transform (the others stay
    pending, as :meth:`DocumentOperation.transform` leaves them)."""

    variables: dict[str, Any]
    takes: Any


class WrittenFiles(Protocol):
    """A dump folder's collections as a step left them, for :meth:`DocumentOperation.verify_files`. A
    collection without a file has no documents."""

    def count(self, name: str) -> int:
        """Its documents, counted without parsing them."""
        ...

    def total(self, name: str, measure: Callable[[Document], int]) -> int:
        """``measure`` of each of its documents added up. Documents are given as plain structures (Extended
        JSON wrappers stay undecoded: enough to sum counts and measure arrays), and a large file is read in
        parts at the same time, so ``measure`` must depend on the document alone."""
        ...


# Where a server's stages find a document's original beside what the step made of it: the input of
# :meth:`DocumentOperation.server_side_documents` holds it (subset and outlier move its elements). A name no
# application uses.
ORIGINAL = "__mongopat_original"


class StepError(ValueError):
    """A step's parameters are wrong; the message names the parameter."""


@dataclass(frozen=True)
class Param:
    kind: type | tuple[type, ...]
    required: bool = True
    default: Any = None
    help: str = ""


@dataclass(frozen=True)
class StepType:
    name: str
    kind: str  # document, regroup, collection
    params: dict[str, Param]
    summary: str
    # Collections the step creates (parameter names holding their names), dropped by ``down``.
    creates: tuple[str, ...] = ()
    # Optional parameters 'migrate new' leaves to fill in all the same (one of several that are needed).
    fill_in: tuple[str, ...] = ()
    # A step whose verification finds its copy behind the collection (the application wrote behind it)
    # runs again on the next up, instead of staying applied and failing verification for ever.
    reruns_when_behind: bool = False


STR, INT, NUM, LIST, DICT, ANY = str, int, (int, float), list, dict, object


@dataclass
class Step:
    type: StepType
    collection: str
    params: dict[str, Any] = field(default_factory=dict)
    # What the step read from other files when its migration was loaded (StepOperation.resolve).
    loaded: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.type.name

    def created_collections(self) -> list[str]:
        return [self.params[key] for key in self.type.creates if self.params.get(key)]

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.name, "collection": self.collection, **self.params}


class StepOperation:
    """One step type; subclasses live one per module of this package."""

    type: ClassVar[StepType]
    # A sample of the collection as the step leaves it can be taken (document steps): ``migrate plan``
    # describes that shape with a validator.
    sampled_after: ClassVar[bool] = False
    # The step gives its collection another name: MongoDB renames no sharded collection, and the guide
    # cannot follow a join into it.
    renames_collection: ClassVar[bool] = False
    # Where ``migrate plan`` puts the step among a collection's recommendations: steps that only add fields
    # first (0), then those that reshape fields (1), copy history (2), move elements out (3), regroup
    # documents (4) and change indexes (5); 9 for steps no recommendation plans.
    plan_order: ClassVar[int] = 9

    @property
    def name(self) -> str:
        return self.type.name

    def check(self, params: dict[str, Any]) -> None:
        """Raise :class:`StepError` for parameters that have the right types but cannot work together."""

    def resolve(self, step: Step, folder: Path) -> bytes:
        """Read the files the step names (relative to its migration's ``folder``) into ``step.loaded``;
        their bytes, which count in the migration's checksum. Raise :class:`StepError` when one is wrong."""
        return b""

    def written_fields(self, step: Step) -> set[str]:
        """Fields the step sets, renames or removes (the plan checks them against shard keys and validators)."""
        return set()

    def removed_fields(self, step: Step) -> set[str]:
        return set()

    # -- the guide: what the application must change (``mongopat migrate guide``) ---------------------

    def today_read(self, read: ReadPlan, step: Step) -> None:
        """Express a read of the access file that needs the new shape's fields as today's data serves it
        (a subtree read by ancestors is a ``$graphLookup`` today)."""

    def rewrite_read(self, read: ReadPlan, step: Step, evidence: Evidence) -> None:
        """Rewrite ``read`` in place for the shape this step leaves: its match on the new fields, reshape
        stages that give documents back the fields today's read returns, or parts made unnecessary."""

    def during_read(self, before: ReadPlan, after: ReadPlan, step: Step) -> ReadPlan | None:
        """The read while ``up`` runs, when documents of both shapes are in the collection (None when no
        read serves both): today's read, for a step that only adds fields (the old ones are still there)."""
        return before.copy()

    def writes(self, step: Step, evidence: Evidence) -> list[WritePlan]:
        """The application's writes the step changes, before and after."""
        return []

    def indexes(self, step: Step) -> list[tuple[str, dict[str, int]]]:
        """The indexes a run of the step creates: (collection, keys)."""
        return []

    def new_shape(self, step: Step) -> str:
        """What a document written after the migration must hold, in one sentence."""
        return self.type.summary

    def deploy(self, step: Step) -> dict[str, list[str]]:
        """What the application deploys ``before`` up, handles ``during`` up, and can drop ``after``."""
        return {
            "before": [],
            "during": [f"`{step.collection}`: read documents of both shapes until `migrate up` has finished"],
            "after": [],
        }

    def preview(self, step: Step, before: Document) -> tuple[list[Document], list[Document], str]:
        """Documents before and after the step, from one example document, and a note (the reports')."""
        return [before], [before], f"no document changes: {step.type.summary}"

    def examples(self, step: Step, samples: list[Document], ctx: Context | None) -> list[dict[str, Any]]:
        """Before/after pairs of ``migrate up --dry-run`` from the collection's first documents."""
        before, after, _note = self.preview(step, samples[0])
        return [{"before": before[0], "after": after[0]}]

    def plan_refusals(self, step: Step, shard_key: dict[str, Any], schema: dict[str, Any] | None) -> list[str]:
        """Why the step cannot be planned on a collection sharded on ``shard_key`` or validated by the
        ``$jsonSchema`` ``schema``, beyond the fields it writes and removes (``plan_refusals.py``)."""
        return []


class CollectionOperation(StepOperation):
    """A step on a collection as a whole (its indexes, name, options, a copy), written once against the
    backend protocol :class:`~mongopat.migrate.catalog.Catalog`; every method must be safe to run again
    after a crash part way (the figures ``catalog.record`` saved are in ``catalog.stats``)."""

    def apply(self, step: Step, catalog: Catalog) -> None:
        raise NotImplementedError

    def revert(self, step: Step, catalog: Catalog) -> None:
        raise NotImplementedError

    def verify(self, step: Step, catalog: Catalog) -> list[str]:
        """What must hold after ``apply``; each problem in a sentence."""
        return []

    def dry_run(self, step: Step, catalog: Catalog) -> list[str]:
        """What ``apply`` would do, in sentences (``migrate up --dry-run``); nothing is changed."""
        return [f"would {self.type.summary}"]

    def deploy(self, step: Step) -> dict[str, list[str]]:
        """A step on a collection as a whole changes no document: nothing to read in two shapes."""
        return {"before": [], "during": [], "after": []}

    def pending(self, step: Step, state: dict[str, Any]) -> dict[str, Any] | None:
        """Documents of the step's collection the application wrote since ``apply`` that the next ``up``
        carries over (a filter; ``state``: the step's changelog record), or None for a step without any."""
        return None


class DocumentOperation(StepOperation):
    """A step that rewrites each document of its collection in place."""

    sampled_after: ClassVar[bool] = True

    # Whether the transform changes the document only along the paths of :meth:`written_fields` (it sets,
    # renames or removes them and changes no other value in place): the runner then copies only those
    # values for it, where it copies the whole document otherwise.
    changes_only_what_it_writes: ClassVar[bool] = False

    # Whether the transform changes only the top level of the document it is given: it sets or removes
    # top-level fields to values it builds anew (slices, new lists, new documents), and changes no value
    # inside the document in place. The runner then gives it a shallow copy; its results may share values
    # with the document read, which nothing changes afterwards. A step writing a nested field (a subset of
    # ``a.items``) sets it inside a sub-document: it gets a whole copy.
    changes_only_the_top_level: ClassVar[bool] = False

    # Whether each side document the transform writes is the document itself (every field after ``_id``, in
    # the document's order) under an ``_id`` of its own: a dump-folder run reading only :meth:`read_fields`
    # copies the fields the step did not read into it as the line holds them.
    side_documents_copy_the_document: ClassVar[bool] = False

    # Whether the transform uses the document's ``_id`` only to copy it into what it writes (it never
    # compares, hashes or orders it). A dump-folder run reading JSON lines then hands it an ObjectId ``_id``
    # as the line spells it (``{"$oid": ...}``, undecoded), which is written wherever it is copied as it was:
    # decoding it and encoding it again for each copy costs more than the rest of a small side document.
    only_copies_the_id: ClassVar[bool] = False

    # Collections (parameter names) whose documents, keyed by ``parentId``, the inverse needs. A document's
    # side documents there are replaced as a whole when it is written again, and go when it goes.
    side_collections: ClassVar[tuple[str, ...]] = ()

    def server_inverse(self, step: Step) -> ServerInverse | None:
        """The step's inverse as update stages, for a document whose original had none of the fields it
        names; its ``down`` then runs inside the server after an ``up`` that did
        (``server/unset_in_server.py``). None where the inverse needs Python or the original."""
        return None

    def server_unmade(self, step: Step) -> dict[str, ServerUnmade]:
        """Per top-level field the step's stages rewrite, how the server makes the original's value again of
        the document's, from no more of the original than a place and a value (map_to_array's array of
        pairs is its map again; a key renamed inside a sub-document is the old key again at its old
        place): ``down`` inside the server then sends those rather than the whole field
        (``server/restore_in_server.py``), and checks the document it rebuilds as any other. By default,
        for a step writing one nested path, the top-level field holding it: the key taken out of its
        sub-document and, where the original had it, put back at its place with the original's value."""
        written = self.written_fields(step)
        if len(written) != 1:
            return {}
        parts = next(iter(written)).split(".")
        if len(parts) < 2 or not plain(".".join(parts)):
            return {}
        # Read only where the key is there (a place): a missing one travels as nothing, not as null.
        held = {"$cond": [{"$gte": ["$$at", 0]}, value_at(".".join(parts[1:]), "$$wv."), "$$REMOVE"]}
        return {parts[0]: ServerUnmade(within(parts[1:-1], put_back(parts[-1])), place_of(parts[1:]), held)}

    def new_shape_marker(self, step: Step) -> str | None:
        """The field a document written in the new shape holds (by ``up`` or by the application), for steps
        with side collections: ``down`` merges back the documents the application wrote so."""
        return None

    def file_stats(self, documents: list[Document], step: Step) -> dict[str, int]:
        """Figures of a batch of original documents a dump-folder run adds up for :meth:`verify_files` (a
        batch at a time: a call per document costs a step on many small documents a tenth of its time)."""
        return {}

    def preview(self, step: Step, before: Document) -> tuple[list[Document], list[Document], str]:
        from mongopat.migrate.context_sources import Placeholders

        result = self.transform(copy_document(before), step, self.context(step, [before], Placeholders()))
        after = [result.document]
        note = "; ".join(f"{len(docs)} document(s) written to {name}" for name, docs in result.side.items())
        for docs in result.side.values():
            after.extend(docs[:1])
        return [before], after, note

    def examples(self, step: Step, samples: list[Document], ctx: Context | None) -> list[dict[str, Any]]:
        # The real transform on each sample, with the context the runner gathered for them.
        return [
            {"before": s, "after": self.transform(copy_document(s), step, ctx or Context()).document} for s in samples
        ]

    def transform(self, doc: Document, step: Step, ctx: Context) -> Result:
        raise NotImplementedError

    def read_fields(self, step: Step) -> frozenset[str] | None:
        """The top-level fields that :meth:`transform`, :meth:`is_pending` and :meth:`file_stats` read and
        write, or None: the whole document. Given a document holding only these (those it has), the transform
        must change exactly what it changes in the whole document, and add any new top-level field after
        the others: a dump-folder run then decodes only these fields of each line and passes the others
        through as the file holds them (``dump_folder/partial_lines.py``)."""
        return None

    def context(self, step: Step, documents: list[Document] | None, source: ContextSource) -> Context:
        """What the transforms of ``documents`` read beyond them (parents, referenced documents,
        aggregates), read from ``source``, the backend's; ``documents`` None: for every document of the
        collection. Nothing for most steps."""
        return Context()

    def pending(self, step: Step) -> dict[str, Any]:
        raise NotImplementedError

    def is_pending(self, doc: Document, step: Step) -> bool:
        raise NotImplementedError

    def pending_of(self, documents: list[Document], step: Step) -> list[bool]:
        """:meth:`is_pending` of each of a batch's documents (a step may answer for the batch at once: a dump
        folder's batches are of many small documents)."""
        return [self.is_pending(doc, step) for doc in documents]

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        raise NotImplementedError

    def server_stages(self, step: Step) -> list[dict[str, Any]] | None:
        """The transform as aggregation stages a server runs on each pending document, giving exactly what
        :meth:`transform` gives, or None when it needs Python (side documents, context other than
        :meth:`server_range_values` sends, paths the two would read differently). Only ``$set`` and
        ``$unset``: they keep every other field where it is, as the Python transform does, so a document's
        bytes are the same whichever computed it."""
        return None

    def server_pending(self, step: Step) -> Any:
        """An aggregation expression true for exactly the documents :meth:`is_pending` takes, where
        :meth:`pending` (a query) would read a nested path through arrays; None when :meth:`pending` is
        already exact. The in-server path filters with it (``server_paths.py``)."""
        return None

    def server_declines(self, step: Step) -> Any:
        """An aggregation expression true for the pending documents whose transform the server would
        compute otherwise than :meth:`transform` (a list whose sort values the two order differently), or
        None: the server takes every pending document. The in-server path leaves those it declines to a
        client-side pass after its own."""
        return None

    def server_settle_stages(self, step: Step) -> list[dict[str, Any]] | None:
        """The stages the backup's aggregation applies to each original to get what the rewrite wrote
        (``after``, which tells a document the application changed since). :meth:`server_stages` unless
        those read ``let`` variables (:meth:`server_range_values`), which are sent once, with the rewrite:
        then stages reading the same documents inside the server, as they are by then. Where one changed in
        between, ``after`` differs from the document, which is marked raced: ``down`` gives it the step's
        inverse rather than its original."""
        return self.server_stages(step)

    def server_range_key(self, step: Step) -> Any:
        """The expression (a ``$field`` path, or ``server_paths.value_at`` of a nested one) whose distinct
        values among a range's documents decide what :meth:`server_range_values` reads for that range, or
        None when the stages read the document alone."""
        return None

    def server_range_stages(self, step: Step) -> list[dict[str, Any]]:
        """Stages the server runs on a range's distinct keys (``{_id: key}`` each, the ``$group`` of
        :meth:`server_range_key`) before they travel: what it can compute of the table itself
        (pre_aggregation's aggregates), so that only that comes back. None by default (``[]``): the keys
        alone."""
        return []

    def server_range_values(self, step: Step, groups: list[Document], source: ContextSource) -> RangeValues:
        """The ``let`` variables of a range whose documents hold the keys ``groups`` give (``_id``, with
        what :meth:`server_range_stages` computed), the rest read from ``source`` as :meth:`context` reads
        it, so the server transforms as Python does."""
        raise NotImplementedError

    def server_leaves_untaken(self, step: Step) -> bool:
        """Whether the documents :attr:`RangeValues.takes` is false for are left to the client side's pass
        after the server's (a tree's chain the server cannot walk as Python does), rather than pending as
        :meth:`transform` leaves them too (a reference to no document)."""
        return False

    def server_side_documents(self, step: Step) -> dict[str, list[dict[str, Any]]] | None:
        """Per collection the step creates, the stages a server runs on each transformed document (as
        :meth:`server_stages` leave it, with its original under :data:`ORIGINAL`) to make the side
        documents :meth:`transform` gives, or None when they need Python. Steps that create no collection
        have none to make."""
        return None if step.created_collections() else {}

    def side_document_fields(self, step: Step) -> dict[str, frozenset[str]]:
        """Per collection :meth:`server_side_documents` writes, the fields every side document holds, never
        null nor an array: a ``$merge`` into a sharded side collection matches on its shard key
        (``server/sharding.py``), which must be among them."""
        return {}

    def writes(self, step: Step, evidence: Evidence) -> list[WritePlan]:
        """An insert the access file declares (after the migration, the document in the new shape), and an
        update, when the step changes what it becomes (:meth:`update_write`)."""
        from mongopat.guide.writes import insert_write

        plans = []
        if per_sec := evidence.per_sec(step.collection, "inserts"):
            plans.append(insert_write(step, self.new_shape(step), per_sec, self.side_documents(step, evidence)))
        if (per_sec := evidence.per_sec(step.collection, "updates")) and (update := self.update_write(step, per_sec)):
            plans.append(update)
        return plans

    def update_write(self, step: Step, per_sec: float) -> WritePlan | None:
        """What an update of the collection the access file declares becomes, when the step changes it (the
        field it computes from, the element it adds, the revision it stamps...); None when it does not."""
        return None

    def side_documents(self, step: Step, evidence: Evidence) -> float | None:
        """Documents a new document adds to the collections the step creates, on average."""
        return float(len(step.created_collections()))

    def verify_files(self, step: Step, stats: dict[str, Any], written: WrittenFiles) -> list[str]:
        """Problems with what the step wrote in a dump folder, beyond the document counts every step gets:
        ``written`` reads the collections as the step left them; ``stats`` are the step's own figures from
        the changelog."""
        return []


class AddsFields(DocumentOperation):
    """A step that adds fields (computed, versions, ancestors...): pending while the first is missing; the
    inverse gives each added field back its original value, or removes it when the original had none."""

    def added(self, step: Step) -> list[str]:
        raise NotImplementedError

    def pending(self, step: Step) -> dict[str, Any]:
        return {self.added(step)[0]: {"$exists": False}}

    def server_pending(self, step: Step) -> Any:
        first = self.added(step)[0]
        return {"$not": [holds(first)]} if "." in first else None

    def is_pending(self, doc: Document, step: Step) -> bool:
        return not has_path(doc, self.added(step)[0])

    def inverse(self, current: Document, original: Document, step: Step, side: list[Document]) -> Document | None:
        result = copy_document(current)
        for path in self.added(step):
            restore_field(result, original, path)
        return result

    def server_inverse(self, step: Step) -> ServerInverse | None:
        # The inverse above, for an original without the fields: each removed (nested ones are not taken).
        added = self.added(step)
        return ServerInverse(added, [{"$unset": added}]) if top_level(*added) else None


def top_level(*names: str) -> bool:
    """Whether every name is a top-level field that a server's field path reads as Python does: through an
    array, ``$a.b`` is every element's ``b``, where the Python transforms see no ``a.b``."""
    return all(name and "." not in name and not name.startswith("$") for name in names)


def check_top_level(step: str, params: dict[str, Any], *names: str) -> None:
    """Refuse a parameter naming a nested field where the step reads and writes top-level fields only."""
    for name in names:
        values = params[name] if isinstance(params[name], list) else [params[name]]
        for value in values:
            if isinstance(value, str) and "." in value:
                raise StepError(f"{step}: {name} names top-level fields only, got {value!r}")


def has_field(name: str) -> dict[str, Any]:
    """An aggregation expression true when the document holds ``name`` (null included), as ``has_path`` is."""
    return holds(name)


def rule_condition(rule: dict[str, Any]) -> dict[str, Any]:
    """A rule of polymorphic or schema versioning (see :func:`check_rules`) as an aggregation expression."""
    parts = []
    if "when_has" in rule:
        parts.append(has_field(rule["when_has"]))
    if "when_missing" in rule:
        parts.append({"$not": [has_field(rule["when_missing"])]})
    return {"$and": parts}


def first_rule(rules: list[dict[str, Any]], value: str, default: Any) -> Any:
    """An aggregation expression: ``rule[value]`` of the first rule that matches (as the transforms take
    it), else ``default`` (an expression)."""
    if not rules:
        return default
    branches = [{"case": rule_condition(rule), "then": {"$literal": rule[value]}} for rule in rules]
    return {"$switch": {"branches": branches, "default": default}}


def rule_paths(params: dict[str, Any]) -> list[str]:
    return [rule[key] for rule in params.get("rules") or [] for key in ("when_has", "when_missing") if key in rule]


def local_values(documents: list[Document] | None, path: str) -> list[Any] | None:
    """The distinct values of ``path`` in ``documents`` (None stands for every document's)."""
    if documents is None:
        return None
    return list({hashable_key(v): v for d in documents if (v := get_path(d, path)) is not None}.values())


def restore_field(document: Document, original: Document, path: str) -> None:
    """``path`` in ``document`` as it was in ``original``: its value, or absent."""
    if has_path(original, path):
        set_path(document, path, copy_document(get_path(original, path)))
    else:
        pop_path(document, path)


def check_rules(name: str, params: dict[str, Any]) -> None:
    """Rules of polymorphic and schema versioning: each says which field a document has or lacks."""
    for rule in params.get("rules") or []:
        if not isinstance(rule, dict) or not ({"when_has", "when_missing"} & set(rule)):
            raise StepError(f"{name}: each rule needs 'when_has' or 'when_missing', got {rule!r}")
