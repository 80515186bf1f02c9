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
from mongopat.sources.extjson import (
    ExtendedJSONError,
    JSONDecodeError,
    decode_parsed,
    encode_fields,
    is_object_id,
    loads,
)

_ID: frozenset[str] = frozenset(("_id",))
_NOTHING: frozenset[str] = frozenset()


def partial_versions(
    path: Path, fields: frozenset[str], part: FilePart | None = None, id_as_spelled: bool = False
) -> Iterator[tuple[Version, dict[str, Any] | None]]:
    """The documents of a JSON collection file (of ``part`` of it), each as a :class:`Version` whose
    ``document`` holds only ``fields`` (those the line has), decoded, with the whole line as parsed (None:
    decoded whole). ``id_as_spelled``: an ObjectId ``_id`` stays its wrapper, as parsed
    (``DocumentOperation.only_copies_the_id``)."""
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
            as_spelled = _ID if id_as_spelled and is_object_id(parsed.get("_id")) else _NOTHING
            fields_read = {
                key: parsed[key] if key in as_spelled else decode_parsed(parsed[key]) for key in fields if key in parsed
            }
        except (ExtendedJSONError, ValueError) as exc:
            raise InputError(f"{path}:{line_number}: not a valid Extended JSON document: {exc}") from None
        yield Version(line, fields_read), parsed


def merged_line(parsed: dict[str, Any], read: Document, new: Document, canonical: bool) -> bytes:
    """The line to write, made in ``parsed`` (used up): its fields in their order, those the step read
    (``read``) taken from ``new`` (dropped when ``new`` has none), then ``new``'s fields the line did not
    have, in ``new``'s order. This is the order the transform gives the whole document: a field set in
    place keeps its position, a new one goes last. A read field the step left as it was (the same object)
    that the line spells as a wrapper of one string (``{"$oid": ...}``, ``{"$date": ...}``) keeps that
    spelling, as an unread field does: nothing to encode again."""
    decoded: list[str] = []
    for key in read:
        if key in new:
            value = new[key]
            if value is read[key] and _string_wrapper(parsed[key], value):
                continue
            parsed[key] = value
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


def _string_wrapper(spelled: Any, decoded: Any) -> bool:
    """Whether ``spelled`` (a field as parsed) is a one-key wrapper of a string that ``decoded`` was
    decoded from (a new object: a container is decoded in place, and stays the same object)."""
    if type(spelled) is not dict or spelled is decoded or len(spelled) != 1:
        return False
    key, inner = next(iter(spelled.items()))
    return key[:1] == "$" and type(inner) is str
