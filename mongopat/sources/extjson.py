"""Decode MongoDB Extended JSON (relaxed and canonical, v2 and the legacy forms) into BSON types.

mongoexport writes one document a line; the common wrappers (``$oid``, ``$date``, ``$numberLong``...)
are decoded here directly, which is several times faster than ``bson.json_util``; every other wrapper is
handed to ``bson.json_util`` so that all types stay correct.
"""

from __future__ import annotations

import contextlib
import datetime
from itertools import repeat
from operator import itemgetter
from typing import Any

from bson import Decimal128, Int64, ObjectId, json_util
from bson.errors import InvalidId

try:  # orjson parses about 2x faster than the standard library; optional at run time.
    import orjson

    loads = orjson.loads
    _PASS_THROUGH = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS
    JSONDecodeError: type[Exception] = orjson.JSONDecodeError
except ImportError:  # pragma: no cover - exercised only without orjson installed
    import json

    loads = json.loads
    JSONDecodeError = json.JSONDecodeError

_EPOCH = datetime.datetime(1970, 1, 1)
_OPTIONS = json_util.JSONOptions(json_mode=json_util.JSONMode.CANONICAL, tz_aware=False)


class ExtendedJSONError(ValueError):
    pass


def _date(value: Any) -> Any:
    if type(value) is str:
        try:
            if value.endswith("Z"):
                return datetime.datetime.fromisoformat(value[:-1])
            parsed = datetime.datetime.fromisoformat(value)
        except ValueError:  # forms Python's parser does not know (e.g. before 3.11): the slow, complete path
            return json_util.object_hook({"$date": value}, _OPTIONS)
        if parsed.tzinfo is not None:
            parsed = parsed.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return parsed
    if type(value) is dict and "$numberLong" in value:
        millis = int(value["$numberLong"])
    elif type(value) is int:
        millis = value
    else:
        raise ExtendedJSONError(f"invalid $date value: {value!r}")
    try:
        return _EPOCH + datetime.timedelta(milliseconds=millis)
    except OverflowError:
        return json_util.object_hook({"$date": {"$numberLong": str(millis)}}, _OPTIONS)


def decode_wrapper(value: dict[str, Any]) -> Any:
    """Decode a one-or-two-key ``$``-wrapper; return ``value`` itself when it is a plain document."""
    key = next(iter(value))
    try:
        if len(value) == 1:
            inner = value[key]
            if key == "$oid":
                # From 12 bytes ObjectId skips its own checks of a string (see decode_wrappers).
                return ObjectId(bytes.fromhex(inner) if type(inner) is str and len(inner) == 24 else inner)
            if key == "$date":
                return _date(inner)
            if key == "$numberLong":
                return Int64(int(inner))
            if key == "$numberInt":
                return int(inner)
            if key == "$numberDouble":
                return float(inner)
            if key == "$numberDecimal":
                return Decimal128(inner)
        # bson.json_util expects its input decoded bottom-up, as json.loads' object_hook would.
        for inner_key, inner in value.items():
            if type(inner) is dict or type(inner) is list:
                value[inner_key] = decode_value(inner)
        decoded = json_util.object_hook(value, _OPTIONS)
    except (InvalidId, ValueError, TypeError, KeyError, ArithmeticError) as exc:  # Decimal128: InvalidOperation
        raise ExtendedJSONError(f"invalid Extended JSON {key}: {exc}") from None
    return decoded


def is_object_id(value: Any) -> bool:
    """Whether a value as a JSON parser gave it is the wrapper of a valid ObjectId: ``{"$oid": ...}`` holding
    24 hex digits (what :func:`decode_wrapper` decodes without an error)."""
    if type(value) is not dict or len(value) != 1:
        return False
    inner = value.get("$oid")
    if type(inner) is not str or len(inner) != 24:
        return False
    try:
        return len(bytes.fromhex(inner)) == 12  # fromhex skips whitespace, which would leave fewer
    except ValueError:
        return False


_SIMPLE = {"$oid": ObjectId, "$date": _date}
_ZULU = repeat("Z")
_WITHOUT_LAST = itemgetter(slice(None, -1))


def decode_wrappers(values: list[dict[str, Any]], heads: set[str]) -> list[Any]:
    """Decode many wrappers at once (``heads``: their first keys); same results as :func:`decode_wrapper` on
    each. A column of one-key ``$oid`` or ``$date`` wrappers, the common case, goes straight to the
    constructor, without :func:`decode_wrapper`'s dispatch per value."""
    if len(heads) == 1:
        head = next(iter(heads))
        decode = _SIMPLE.get(head)
        if decode is not None and set(map(len, values)) == {1}:
            try:
                inner = list(map(itemgetter(head), values))
                if decode is ObjectId and set(map(type, inner)) == {str} and set(map(len, inner)) == {24}:
                    # From the 12 bytes, ObjectId skips its checks of a string (a third of its cost). Those
                    # the string needs are made here: 24 characters, all hex (fromhex raises on any other
                    # but whitespace, which would leave fewer than 12 bytes: ObjectId refuses them).
                    return list(map(ObjectId, map(bytes.fromhex, inner)))
                if decode is _date and set(map(type, inner)) == {str} and all(map(str.endswith, inner, _ZULU)):
                    # What _date does with each, in C loops: the ISO string without its "Z", parsed.
                    return list(map(datetime.datetime.fromisoformat, map(_WITHOUT_LAST, inner)))
                return list(map(decode, inner))
            except (InvalidId, ValueError, TypeError, KeyError, ArithmeticError, ExtendedJSONError):
                pass  # one of them is invalid: decode_wrapper names the problem
    return list(map(decode_wrapper, values))


def decode_value(value: Any) -> Any:
    """Replace Extended JSON wrappers by BSON types, in place where possible."""
    kind = type(value)
    if kind is dict:
        if value and next(iter(value))[:1] == "$":
            decoded = decode_wrapper(value)
            if decoded is not value:
                return decoded
        _decode_children(value, value.items(), [-1])
        return value
    if kind is list:
        _decode_children(value, enumerate(value), [-1])
    return value


def decode_parsed(value: Any) -> Any:
    """:func:`decode_value` for a value as a JSON parser gave it (plain JSON, nothing decoded yet). An
    array or document without a wrapper is returned as it is: written back compactly, it has no ``"$``
    (every ``$``-led key shows so, however the file spelled it), and that check runs in C, where walking
    it runs in Python (an order's line items: 0.6 against 1.5 microseconds here)."""
    kind = type(value)
    if kind is list or (kind is dict and not (value and next(iter(value))[:1] == "$")):  # not a wrapper itself
        try:
            if b'"$' not in dumps(value):
                return value
        except TypeError:  # what orjson will not write (an integer over 64 bits): walked
            pass
    return decode_value(value)


class _AllFound(Exception):
    """Every wrapper a line can hold has been decoded: the rest of the document is plain JSON."""


def _decode_children(container: Any, items: Any, left: list[int]) -> None:
    # Wrappers are checked here, before recursing, because most nested dicts in mongoexport output
    # are wrappers ($oid, $date) and a function call per value is the main cost of decoding. ``left``
    # counts down the $-led documents a line can still hold (see decode_document); from -1 it never ends
    # the walk.
    for key, item in items:
        kind = type(item)
        if kind is dict:
            if item and next(iter(item))[:1] == "$":
                decoded = decode_wrapper(item)
                left[0] -= 1
                if decoded is not item:
                    container[key] = decoded
                    if not left[0]:
                        raise _AllFound
                    continue
            _decode_children(item, item.items(), left)
        elif kind is list:
            _decode_children(item, enumerate(item), left)


def decode_document(raw: bytes | str) -> dict[str, Any]:
    """Parse one Extended JSON document (a line of mongoexport output).

    A wrapper (``{"$oid": ...}``, ``{"$date": ...}``) always puts the bytes ``"$`` in the line, so the line's
    count of them bounds the wrappers it holds: a line without any is returned as parsed, and the walk stops
    once it has met as many ``$``-led documents as the line has marks (a ``$`` opening a string, or a
    wrapper inside a wrapper, only makes the walk go on to the end, as it did). A line spelling a ``$`` as
    ``\\u0024`` is walked whole."""
    document = loads(raw)
    if type(document) is not dict:
        raise ExtendedJSONError(f"expected a JSON object, found {type(document).__name__}")
    if type(raw) is bytes:
        marks, escaped = raw.count(b'"$'), b"\\u" in raw
    else:
        marks, escaped = raw.count('"$'), "\\u" in raw
    if escaped or (document and next(iter(document))[:1] == "$"):
        return decode_value(document)
    if marks:
        with contextlib.suppress(_AllFound):
            _decode_children(document, document.items(), [marks])
    return document


# -- writing --------------------------------------------------------------------------------------

_RELAXED = json_util.RELAXED_JSON_OPTIONS
_CANONICAL = json_util.CANONICAL_JSON_OPTIONS


def _date_text(value: datetime.datetime) -> Any:
    if value.tzinfo is not None:
        value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    if 1970 <= value.year <= 9999:
        return value.isoformat(timespec="milliseconds") + "Z"
    millis = (value - _EPOCH) // datetime.timedelta(milliseconds=1)
    return {"$numberLong": str(millis)}


# Values JSON writes as they are (in relaxed mode); everything else goes through to_extended.
_PLAIN = frozenset({str, bool, type(None)})


def to_extended(value: Any, canonical: bool = False) -> Any:
    """BSON values as Extended JSON structures (relaxed by default), ready for a JSON encoder."""
    kind = type(value)
    if kind is dict:
        return {key: item if type(item) in _PLAIN else to_extended(item, canonical) for key, item in value.items()}
    if kind is list:
        return [item if type(item) in _PLAIN else to_extended(item, canonical) for item in value]
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        if canonical:
            return {"$numberInt" if -(2**31) <= value < 2**31 else "$numberLong": str(value)}
        return value
    if kind is float:
        if value != value:
            return {"$numberDouble": "NaN"}
        if value in (float("inf"), float("-inf")):
            return {"$numberDouble": "Infinity" if value > 0 else "-Infinity"}
        return {"$numberDouble": repr(value)} if canonical else value
    if kind is ObjectId:
        return {"$oid": str(value)}
    if kind is datetime.datetime:
        if canonical:
            millis = (value.replace(tzinfo=None) - _EPOCH) // datetime.timedelta(milliseconds=1)
            return {"$date": {"$numberLong": str(millis)}}
        return {"$date": _date_text(value)}
    if kind is Int64:
        return {"$numberLong": str(int(value))} if canonical else int(value)
    return json_util.default(value, _CANONICAL if canonical else _RELAXED)


def _fast_default(value: Any) -> Any:
    # orjson asks for every ObjectId it meets, and the documents a step writes beside one (an order's line
    # items, each under its parent's _id twice) often hold the same ObjectId again and again: the last one
    # is kept with its Extended JSON (a strong reference, so the identity check cannot be fooled).
    global _LAST_OBJECT_ID
    last = _LAST_OBJECT_ID
    if value is last[0]:
        return last[1]
    extended = to_extended(value)
    if type(value) is ObjectId:
        _LAST_OBJECT_ID = (value, extended)
    return extended


_LAST_OBJECT_ID: tuple[Any, Any] = (None, None)


def encode_document(document: dict[str, Any], canonical: bool = False) -> bytes:
    """One mongoexport line (without the newline).

    Relaxed lines are written by orjson in one pass, BSON types handed to :func:`to_extended` as orjson
    meets them (dates and subclasses such as ``Int64`` and ``Code`` are passed through to it, not written
    as orjson would). orjson writes NaN and infinity as ``null``: a line holding ``null`` is written again
    by the walk that spells them ``{"$numberDouble": "NaN"}``, so every line is the walk's, byte for byte."""
    if not canonical:
        try:
            line: bytes = orjson.dumps(document, default=_fast_default, option=_PASS_THROUGH)  # type: ignore[name-defined]
        except (NameError, TypeError):  # without orjson, or a value orjson refuses: the walk decides
            pass
        else:
            if b"null" not in line:
                return line
    return dumps(to_extended(document, canonical))


def encode_lines(documents: list[dict[str, Any]], canonical: bool = False) -> bytes:
    """:func:`encode_document` of each of ``documents``, each line ended by a newline. Relaxed lines go
    through orjson in one loop; only a line holding ``null`` is written again by the walk."""
    if not canonical and documents:
        try:
            dumps_one = orjson.dumps  # type: ignore[name-defined]
            lines = [dumps_one(document, default=_fast_default, option=_PASS_THROUGH) for document in documents]  # type: ignore[name-defined]
        except (NameError, TypeError):
            pass
        else:
            joined: bytes = b"\n".join(lines)
            if b"null" in joined:
                walked = [
                    line if b"null" not in line else dumps(to_extended(document))
                    for line, document in zip(lines, documents, strict=True)
                ]
                joined = b"\n".join(walked)
            return joined + b"\n"
    return b"".join([encode_document(document, canonical) + b"\n" for document in documents])


def encode_fields(values: dict[str, Any], decoded: list[str], canonical: bool = False) -> bytes:
    """One line from a document whose ``decoded`` fields hold BSON types and whose other fields are JSON
    values already (Extended JSON wrappers as parsed): the line :func:`encode_document` writes for the
    whole document decoded, when those are Extended JSON as this module writes it. Relaxed lines go through
    orjson in one pass, as there; a line holding ``null`` (a NaN, or a null of the line) has its decoded
    fields walked instead."""
    if not canonical:
        try:
            line: bytes = orjson.dumps(values, default=_fast_default, option=_PASS_THROUGH)  # type: ignore[name-defined]
        except (NameError, TypeError):
            pass
        else:
            if b"null" not in line:
                return line
    walked = dict(values)
    for key in decoded:
        walked[key] = to_extended(walked[key], canonical)
    return dumps(walked)


def dumps(values: Any) -> bytes:
    """JSON values (Extended JSON's structures already: :func:`to_extended`'s, or a line as parsed) as one
    compact line, without the newline."""
    try:
        return orjson.dumps(values)  # type: ignore[name-defined,no-any-return]
    except NameError:  # pragma: no cover - without orjson
        import json as _json

        return _json.dumps(values, separators=(",", ":")).encode()
