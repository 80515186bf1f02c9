"""What an array is for, told from its report entry: a GeoJSON geometry, a vector, a coordinate pair.

Such arrays are bounded by what they stand for (a polygon's ring, an embedding's dimensions), not lists
that grow with use: capping them (subset, outlier) would break ``2dsphere`` queries and vector search.
The analysis names them (``array.kind``) and the array-length rules leave them alone.
"""

from __future__ import annotations

from typing import Any

GEOJSON_TYPES = frozenset(
    ("Point", "MultiPoint", "LineString", "MultiLineString", "Polygon", "MultiPolygon", "GeometryCollection")
)
NUMERIC = frozenset(("double", "int", "long", "decimal"))
# Arrays of numbers that every document holds at one length: from this many elements on a vector (an
# embedding, a feature vector); two or three, a legacy coordinate pair ([lng, lat]) or a point in space.
VECTOR_MIN_LENGTH = 8
NUMERIC_SHARE = 0.99

KINDS = ("geojson", "vector", "coordinates")


def _geometries(fields: dict[str, dict[str, Any]]) -> list[str]:
    """Paths of GeoJSON geometries: a sub-document whose ``type`` holds only GeoJSON type names and that
    has ``coordinates`` (or ``geometries``) beside it."""
    found = []
    for path, field in fields.items():
        if not (path == "type" or path.endswith(".type")):
            continue
        parent = path[: -len("type")].rstrip(".")
        top = (field.get("cardinality") or {}).get("top") or []
        if not top or not all(item["value"] in GEOJSON_TYPES for item in top):
            continue
        prefix = f"{parent}." if parent else ""
        if f"{prefix}coordinates" in fields or f"{prefix}geometries" in fields:
            found.append(parent)
    return found


def _numeric_share(array: dict[str, Any]) -> float:
    return sum(item["share"] for item in array.get("element_types") or [] if item["type"] in NUMERIC)


def array_kind(field: dict[str, Any], geometries: list[str]) -> str | None:
    """``geojson``, ``vector``, ``coordinates`` or None (an ordinary list) for one field entry."""
    array = field.get("array")
    if not array:
        return None
    path = field["path"]
    for geometry in geometries:
        prefix = f"{geometry}." if geometry else ""
        if path.startswith(f"{prefix}coordinates") or path.startswith(f"{prefix}geometries"):
            return "geojson"
    if _numeric_share(array) < NUMERIC_SHARE or array.get("min") != array.get("max"):
        return None
    length = array.get("max") or 0
    if length >= VECTOR_MIN_LENGTH:
        return "vector"
    if length in (2, 3):
        return "coordinates"
    return None


def annotate_arrays(fields: list[dict[str, Any]]) -> None:
    """Set ``array.kind`` on every array entry of a collection's fields (None for an ordinary list)."""
    by_path = {field["path"]: field for field in fields}
    geometries = _geometries(by_path)
    for field in fields:
        if field.get("array"):
            field["array"]["kind"] = array_kind(field, geometries)
