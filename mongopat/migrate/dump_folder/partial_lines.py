"""A mongoexport file read for a step that reads only some top-level fields
(:meth:`~mongopat.migrate.operations.base.DocumentOperation.read_fields`).

Each line is parsed, but only the fields the step reads are decoded into BSON types; the others stay as
the parser gave them (Extended JSON wrappers left in place) and go back into the line the step writes as
they were. Decoding every wrapper of every document (dates, ids, numbers) and encoding it again is most of
a document step's time on a dump folder, and a field the step does not read cannot change.

A line whose top level is itself led by a ``$`` key is decoded whole, as the full reader does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mongopat.errors import InputError
from mongopat.migrate.document_batches import Version
from mongopat.migrate.transform_api import Document
from mongopat.sources.dump import FilePart, _json_records, decode_json_record, json_problem
from mongopat.sources.extjson import ExtendedJSONError, JSONDecodeError, decode_parsed, encode_fields, loads


def partial_versions(
    path: Path, fields: frozenset[str], part: FilePart | None = None
) -> Iterator[tuple[Version, dict[str, Any] | None]]:
    """The documents of a JSON collection file (of ``part`` of it), each as a :class:`Version` whose
    ``document`` holds only ``fields`` (those the line has), decoded, with the whole line as parsed (None:
    decoded whole)."""
    for line_number, record in _json_records(path, part):
        try:
            parsed = loads(record) if type(record) is bytes else record
        except (JSONDecodeError, ValueError) as exc:
            raise InputError(f"{path}:{line_number}: not a valid Extended JSON document: {json_problem(exc)}") from None
        line = record if type(record) is bytes else None
        if type(parsed) is not dict or (parsed and next(iter(parsed))[:1] == "$"):
            yield Version(line, decode_json_record(path, line_number, record)), None
            continue
        try:
            # decode_parsed decodes in place: the parsed field now holds BSON types, which is why a written
            # line takes every read field from the document (merged_line), never from ``parsed``.
            fields_read = {key: decode_parsed(parsed[key]) for key in fields if key in parsed}
        except (ExtendedJSONError, ValueError) as exc:
            raise InputError(f"{path}:{line_number}: not a valid Extended JSON document: {exc}") from None
        yield Version(line, fields_read), parsed


def merged_line(parsed: dict[str, Any], read: Document, new: Document, canonical: bool) -> bytes:
    """The line to write, made in ``parsed`` (used up): its fields in their order, those the step read
    (``read``) taken from ``new`` (dropped when ``new`` has none), then ``new``'s fields the line did not
    have, in ``new``'s order. This is the order the transform gives the whole document: a field set in
    place keeps its position, a new one goes last."""
    decoded: list[str] = []
    for key in read:
        if key in new:
            parsed[key] = new[key]
            decoded.append(key)
        else:
            del parsed[key]
    for key, value in new.items():
        if key not in parsed:
            parsed[key] = value
            decoded.append(key)
    return encode_fields(parsed, decoded, canonical)


def copied_line(parsed: dict[str, Any], read: Document, side: Document, canonical: bool) -> bytes:
    """A side document that is the document itself under an ``_id`` of its own
    (``side_documents_copy_the_document``), as a line: ``side``'s ``_id`` first, then the line's other
    fields in their order, those the step read taken from ``side``, then ``side``'s new fields."""
    return merged_line({"_id": None, **parsed}, {"_id": None, **read}, side, canonical)
