"""A document step that reads only some top-level fields (``read_fields``) decodes only those of each line of
a dump folder's JSON file and passes the others through (``dump_folder/partial_lines.py``); a context (a
tree's parents, referenced documents) is read decoding only the fields it keeps (``DumpFolder.read_heads``).
Whatever the documents, the file it writes must be the one the step writes decoding every document whole:
the same bytes where the file is in mongopat's own encoding, the same documents in the same field order
otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bson import json_util

from mongopat.errors import InputError
from mongopat.migrate.dump_folder import document_steps
from mongopat.migrate.dump_folder.files import DumpFolder
from mongopat.migrate.dump_folder.runner import DumpRunner
from mongopat.migrate.operations import OPERATIONS, transform
from mongopat.migrate.runner import RunOptions
from mongopat.migrate.script import load_folder
from mongopat.migrate.steps import build_step
from mongopat.sources.extjson import encode_document
from tests.support.migrations import write
from tests.support.step_cases import CASES, CUSTOMERS, DOCUMENTS


def _migrate(tmp_path: Path, body: bytes, spec: dict[str, Any], whole: bool, monkeypatch: Any) -> dict[str, bytes]:
    folder = tmp_path / ("whole" if whole else "partial")
    data = folder / "data"
    data.mkdir(parents=True)
    (data / "orders.json").write_bytes(body)
    (data / "customers.json").write_bytes(CUSTOMERS)
    migrations = write(folder / "m", "0001_step", {"collection": "orders", **spec})
    with monkeypatch.context() as patch:
        if whole:
            patch.setattr(type(OPERATIONS[spec["step"]]), "read_fields", lambda self, step: None)
            # A context (the tree's parents, the referenced documents) read from documents decoded whole.
            patch.setattr(DumpFolder, "read_heads", lambda self, name, heads: self.read(name))
        DumpRunner(data, load_folder(migrations), RunOptions(batch_size=50, lock_timeout=0.3)).up()
    # The collection and those the step wrote beside it.
    return {path.name: path.read_bytes() for path in sorted(data.glob("orders*.json"))}


@pytest.mark.parametrize("canonical", [False, True], ids=["relaxed", "canonical"])
@pytest.mark.parametrize(("case", "spec"), CASES, ids=[case for case, _ in CASES])
def test_the_file_written_is_the_whole_decodings_byte_for_byte(tmp_path, monkeypatch, case, spec, canonical):
    body = b"".join(encode_document(document, canonical) + b"\n" for document in DOCUMENTS)
    partial = _migrate(tmp_path, body, spec, False, monkeypatch)
    assert partial["orders.json"] != body  # the step changed documents: the comparison below is not of two copies
    assert partial == _migrate(tmp_path, body, spec, True, monkeypatch)


@pytest.mark.parametrize(("case", "spec"), CASES, ids=[case for case, _ in CASES])
def test_another_exporters_spelling_gives_the_same_documents_in_the_same_order(tmp_path, monkeypatch, case, spec):
    """Lines as ``bson.json_util`` spells them (spaces after colons and commas): a field the step does not
    read keeps its spelling, so only the decoded documents and their field order can be compared."""
    body = b"".join(json_util.dumps(document).encode() + b"\n" for document in DOCUMENTS)
    partial, whole = (
        {name: [json_util.loads(line) for line in written.splitlines()] for name, written in files.items()}
        for files in (
            _migrate(tmp_path, body, spec, False, monkeypatch),
            _migrate(tmp_path, body, spec, True, monkeypatch),
        )
    )
    assert repr(partial) == repr(whole)  # repr: field order counts, and a NaN equals itself


def test_a_read_field_the_step_leaves_alone_keeps_its_spelling(tmp_path, monkeypatch):
    """An ``_id`` the outlier step reads (to name the pages) but does not change is written back as the line
    spelled it, as a field it does not read is, and so are the copies of it in the pages (the step only
    copies it: ``only_copies_the_id``). The tree step reads the ``_id`` too, decoded (it compares ids), and
    leaves it as the line spelled it as well."""
    spelled = (
        b'{"_id": {"$oid": "6553F1000000000000000ABC"}, "items": [1, 2, 3], "at": {"$date": "2024-01-01T00:00:00Z"}}\n'
    )
    spec = dict(CASES)["outlier"]
    files = _migrate(tmp_path, spelled, spec, False, monkeypatch)
    flag = build_step({"collection": "orders", **spec}).params["flag_field"]
    kept = b'{"_id":{"$oid":"6553F1000000000000000ABC"},"items":[1],"at":{"$date":"2024-01-01T00:00:00Z"},'
    assert files["orders.json"] == kept + f'"{flag}":true}}\n'.encode()
    assert b'"parentId":{"$oid":"6553F1000000000000000ABC"}' in files[f"{spec['overflow_collection']}.json"]

    tree = dict(CASES)["tree"]
    root = b'{"_id": {"$oid": "6553F1000000000000000ABC"}, "parent": null}\n'
    child = b'{"_id": 2, "parent": {"$oid": "6553f1000000000000000abc"}}\n'
    root_line, child_line = _migrate(tmp_path / "tree", root + child, tree, False, monkeypatch)[
        "orders.json"
    ].splitlines()
    assert root_line.startswith(b'{"_id":{"$oid":"6553F1000000000000000ABC"},"parent":null,')
    assert b'{"$oid":"6553f1000000000000000abc"}' in child_line  # what the step wrote, as mongopat spells it


@pytest.mark.parametrize("layout", ["array", "pretty"])
def test_exports_without_a_line_per_document(tmp_path, monkeypatch, layout):
    """A ``--jsonArray`` or ``--pretty`` export has no line to pass through: every document is written from
    its fields, the unread ones as parsed."""
    import json

    values = [json.loads(encode_document(document)) for document in DOCUMENTS[:40]]
    body = (json.dumps(values) if layout == "array" else "\n".join(json.dumps(v, indent=2) for v in values)).encode()
    spec = dict(CASES[0][1])
    assert _migrate(tmp_path, body, spec, False, monkeypatch) == _migrate(tmp_path, body, spec, True, monkeypatch)


def test_the_partial_reading_is_what_runs(tmp_path, monkeypatch):
    """The steps of CASES do take the partial path (else the comparisons above compare a path with itself)."""
    seen: list[frozenset[str]] = []
    real = document_steps.partial_versions

    def spy(path: Path, fields: frozenset[str], part: Any = None, id_as_spelled: bool = False) -> Any:
        seen.append(fields)
        return real(path, fields, part, id_as_spelled)

    monkeypatch.setattr(document_steps, "partial_versions", spy)
    body = b"".join(encode_document(document) + b"\n" for document in DOCUMENTS[:10])
    _migrate(tmp_path, body, CASES[9][1], False, monkeypatch)
    assert seen == [frozenset({"total", "items"})]
    # Every document step declares what it reads and is compared above (bucket has its own reader).
    assert {spec["step"] for _case, spec in CASES} == set(OPERATIONS) - {"bucket"}
    assert all(OPERATIONS[spec["step"]].read_fields(build_step({"collection": "c", **spec})) for _c, spec in CASES)


def test_read_fields_are_top_level_heads_of_every_path_read():
    def fields(spec: dict[str, Any]) -> frozenset[str] | None:
        return OPERATIONS[spec["step"]].read_fields(build_step({"collection": "c", **spec}))

    assert fields(dict(CASES[1][1])) == {"flags"}
    assert fields(dict(CASES[8][1])) == {"qty", "flags"}
    assert fields(dict(CASES[11][1])) == {"flags", "qty", "likes"}
    assert fields(dict(CASES[13][1])) == {"schemaVersion", "cpu"}
    assert fields({"step": "document_versioning", "history_collection": "h"}) == {"_id", "revision"}
    assert fields({"step": "attribute", "fields": ["ram", "cpu"]}) == {"ram", "cpu", "attributes"}
    assert fields({"step": "tree", "parent_field": "parent"}) == {"_id", "ancestors", "path"}


def test_a_relaxed_export_holding_a_nan_stays_relaxed(tmp_path, monkeypatch):
    """Relaxed Extended JSON wraps NaN too ({"$numberDouble": "NaN"}): that is no sign of a canonical file,
    whose numbers would all be wrapped."""
    body = b'{"_id":1,"likes":{"$numberDouble":"NaN"},"qty":3}\n{"_id":2,"qty":4}\n'
    written = _migrate(tmp_path, body, {"step": "set_field", "field": "n", "value": 5}, True, monkeypatch)
    assert (
        written["orders.json"] == b'{"_id":1,"likes":{"$numberDouble":"NaN"},"qty":3,"n":5}\n{"_id":2,"qty":4,"n":5}\n'
    )


def test_a_malformed_line_is_named(tmp_path, monkeypatch):
    body = encode_document(DOCUMENTS[0]) + b"\n" + b'{"_id": 2, "status": }\n'
    with pytest.raises(InputError, match=r"orders\.json:2: not a valid Extended JSON document"):
        _migrate(tmp_path, body, CASES[0][1], False, monkeypatch)


def test_a_malformed_wrapper_in_a_field_read_is_named(tmp_path, monkeypatch):
    body = b'{"_id": 1, "qty": {"$numberLong": "x"}}\n'
    with pytest.raises(InputError, match=r"orders\.json:1: not a valid Extended JSON document"):
        _migrate(tmp_path, body, CASES[10][1], False, monkeypatch)


def test_steps_that_change_only_what_they_write_leave_the_document_read_alone():
    """Such a step's transform gets a copy of only the fields it writes (``changes_only_what_it_writes``),
    or of the top level only (``changes_only_the_top_level``): the document it was given must come out as
    it went in, whatever its shape."""
    flagged = [
        spec
        for _case, spec in CASES
        if OPERATIONS[spec["step"]].changes_only_what_it_writes or OPERATIONS[spec["step"]].changes_only_the_top_level
    ]
    assert len(flagged) >= 10
    for spec in flagged:
        step = build_step({"collection": "orders", **spec})
        for document in DOCUMENTS:
            before = repr(document)
            result = transform(document, step)
            assert repr(document) == before, (spec, before)
            assert result.document is not document


class _Opaque:
    """An ``_id`` that may be copied, and nothing else: comparing, hashing or ordering it fails."""

    __hash__ = None  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        raise AssertionError("an _id the step only copies was compared")

    def __lt__(self, other: object) -> bool:
        raise AssertionError("an _id the step only copies was ordered")


def test_steps_that_only_copy_the_id_only_copy_it():
    """A step declaring ``only_copies_the_id`` is given an ``_id`` as the line spells it on a dump folder:
    its transform must do nothing with it but copy it into what it writes."""
    flagged = [spec for _case, spec in CASES if OPERATIONS[spec["step"]].only_copies_the_id]
    assert {spec["step"] for spec in flagged} == {"subset", "outlier", "document_versioning"}
    for spec in flagged:
        step = build_step({"collection": "orders", **spec})
        for document in DOCUMENTS:
            opaque = _Opaque()
            result = transform({**document, "_id": opaque}, step)
            copies = [side["parentId"] for sides in result.side.values() for side in sides if "parentId" in side]
            assert all(copy is opaque for copy in copies), spec
