"""Names of BSON types as MongoDB's ``$type`` operator spells them, keyed by the Python type pymongo decodes to."""

from __future__ import annotations

import datetime
import re
import uuid

from bson import (
    Binary,
    Code,
    DBRef,
    Decimal128,
    Int64,
    MaxKey,
    MinKey,
    ObjectId,
    Regex,
    Timestamp,
)
from bson.datetime_ms import DatetimeMS

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

TYPE_NAMES: dict[type, str] = {
    str: "string",
    int: "int",  # split into "int"/"long" by value, see split_int_types
    Int64: "long",
    float: "double",
    bool: "bool",
    type(None): "null",
    dict: "object",
    list: "array",
    ObjectId: "objectId",
    datetime.datetime: "date",
    DatetimeMS: "date",
    Decimal128: "decimal",
    Binary: "binData",
    bytes: "binData",
    uuid.UUID: "binData",
    Regex: "regex",
    re.Pattern: "regex",
    Timestamp: "timestamp",
    MinKey: "minKey",
    MaxKey: "maxKey",
    Code: "javascript",
    DBRef: "dbPointer",
}

# Types whose values are counted for cardinality and top values.
SCALAR_HASHABLE = frozenset(
    {
        str,
        int,
        Int64,
        float,
        bool,
        type(None),
        ObjectId,
        datetime.datetime,
        Decimal128,
        Binary,
        bytes,
        uuid.UUID,
    }
)


def type_name(python_type: type) -> str:
    name = TYPE_NAMES.get(python_type)
    if name is not None:
        return name
    for base, base_name in TYPE_NAMES.items():
        if issubclass(python_type, base):
            return base_name
    return python_type.__name__
