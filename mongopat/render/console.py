"""Rich tables of an analysis report, for people. Reads only the report dict (never a live source)."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from mongopat.render.words import data_value, moment, percent

BAR_WIDTH = 6


def bar(share: float | None, width: int = BAR_WIDTH) -> Text:
    if share is None:
        return Text("")
    filled = round(max(0.0, min(1.0, share)) * width)
    text = Text("█" * filled, style="green")
    text.append("░" * (width - filled), style="dim")
    text.append(f" {percent(share):>4}")
    return text


def human_bytes(value: float | None) -> str:
    if value is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return str(value)


def human_number(value: float | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}"
    return f"{int(value):,}"


def human_rate(per_second: float) -> str:
    for unit, factor in (("s", 1), ("min", 60), ("h", 3600), ("day", 86400)):
        value = per_second * factor
        if value >= 1 or unit == "day":
            return f"{value:,.1f}/{unit}"
    return f"{per_second:.3g}/s"


def _types(types: list[dict[str, Any]]) -> str:
    return " · ".join(f"{t['type']} {percent(t['share'])}" for t in types[:3]) + (" …" if len(types) > 3 else "")


def _cardinality(card: dict[str, Any] | None) -> str:
    if not card:
        return ""
    text = f"{card['distinct']:,}" if card["exact"] else f"~{card['distinct']:,}"
    if card.get("top"):
        text += "  " + ", ".join(data_value(item["value"])[:16] for item in card["top"][:3])
    return text


ARRAY_KINDS = {"geojson": "GeoJSON geometry", "vector": "a vector of numbers", "coordinates": "a coordinate pair"}


def _map(keys: dict[str, Any]) -> Text:
    form = keys["key_forms"][0]["form"] if keys["key_forms"] else "?"
    approx = "" if keys["keys_exact"] else "~"
    return Text(f"map: {approx}{human_number(keys['keys'])} {form} keys", style="magenta")


def _array(array: dict[str, Any] | None, narrow: bool = False) -> str:
    if not array:
        return ""
    if narrow:
        return f"{array['p50']}/{array['max']}"
    return f"{array['p50']}/{array['p95']}/{array['p99']}/{array['max']}"


def bulk_load_text(bulk: dict[str, Any]) -> str:
    """A time field's bulk loads, said as such: their rate is how fast a load ran, not how fast the
    application inserts."""
    largest = bulk["largest"]
    return (
        f"bulk load: {bulk['share']:.0%} written in {bulk['loads']:,} load(s), the largest "
        f"{largest['documents']:,} in {largest['seconds']} s at {largest['at']} (not an insert rate)"
    )


def middle_cut(path: str, width: int) -> str:
    """``path`` in at most ``width`` characters: its whole last segments (the leaf says the most) after
    the start of the path, an ellipsis between them."""
    if len(path) <= width:
        return path
    parts = path.split(".")
    first = len(parts) - 1
    while first > 1 and len(".".join(parts[first - 1 :])) + 5 <= width:
        first -= 1
    tail = ".".join(parts[first:])
    room = width - len(tail) - 2
    if room < 3:  # even the leaf is too long: its start and its end
        keep = width - 1
        return path[: keep // 2] + "…" + path[len(path) - (keep - keep // 2) :]
    return path[:room] + "…." + tail


def collection_view(collection: dict[str, Any], verbose: bool = False, width: int = 120) -> Group:
    parts: list[Any] = []
    sampling = collection["sampling"]
    count = collection["count"]
    header = Text(collection["name"], style="bold cyan")
    header.append(
        f"  {human_number(count)} documents" + ("" if collection["count_exact"] else " (estimated)"), style=""
    )
    header.append(f"  · read {sampling['documents']:,} ({sampling['method']})", style="dim")
    parts.append(header)
    for note in collection["notes"] if verbose else []:
        parts.append(Text(f"  note: {note}", style="dim"))
    size = collection["document_size"]
    if size["count"]:
        line = Text("  document size  ")
        line.append(
            f"min {human_bytes(size['min'])} · p50 {human_bytes(size['p50'])} · p95 {human_bytes(size['p95'])}"
            f" · p99 {human_bytes(size['p99'])} · max {human_bytes(size['max'])}"
        )
        big = size["over_1mb"]
        if big:
            line.append(
                f"  {big} over 1 MiB, {size['over_8mb']} over 8 MiB, {size['over_16mb']} over 16 MiB",
                style="yellow",
            )
        parts.append(line)
        storage = collection["storage"]
        if storage["storage_bytes"] is not None:
            parts.append(
                Text(
                    f"  storage {human_bytes(storage['storage_bytes'])} · data {human_bytes(storage['size_bytes'])}"
                    f" · indexes {human_bytes(storage['index_bytes'])}",
                    style="dim",
                )
            )
    fields = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    # A path is never broken over lines: the path column takes what the other columns need and a longer
    # path loses its middle. In a narrow terminal paths are not indented (the path shows the nesting).
    narrow = width < 100
    indent = 0 if narrow else 2
    has_arrays = any(f["array"] for f in collection["fields"])
    types_width, distinct_width = (12, 10) if narrow else (None, 28)
    rows = []
    for field in collection["fields"]:
        rows.append(
            [
                field,
                bar(field["presence"]),
                _types(field["types"]),
                _map(field["map"]) if field.get("map") else _cardinality(field["cardinality"]),
                _array(field["array"], narrow) if has_arrays else None,
            ]
        )
    array_header = "array p50/max" if narrow else "array p50/p95/p99/max"
    others = [
        max((len(r[1]) for r in rows), default=0),
        min(types_width or 999, max([len("types"), *(len(r[2]) for r in rows)])),
        min(distinct_width, max([len("distinct"), *(len(r[3]) for r in rows)])),
    ]
    if has_arrays:
        others.append(max([len(array_header), *(len(r[4]) for r in rows)]))
    longest = max((len(f["path"]) + indent * (f["depth"] - 1) for f in collection["fields"]), default=5)
    path_width = min(longest, max(22, width - sum(others) - 2 * len(others)))
    fields.add_column("field", no_wrap=True, min_width=path_width, max_width=path_width)
    fields.add_column("presence", no_wrap=True)
    fields.add_column("types", no_wrap=True, overflow="ellipsis", max_width=types_width)
    fields.add_column("distinct", justify="right", no_wrap=True, overflow="ellipsis", max_width=distinct_width)
    if has_arrays:
        fields.add_column(array_header, justify="right", no_wrap=True)
    for field, presence, types, distinct, array in rows:
        margin = " " * indent * (field["depth"] - 1)
        row = [Text(margin + middle_cut(field["path"], path_width - len(margin))), presence, types, distinct]
        if has_arrays:
            row.append(array)
        fields.add_row(*row)
    if collection["fields"]:
        parts.append(fields)
    for profile in collection["time"]:
        rate = profile["avg_per_sec"]
        line = Text(f"  inserts by {profile['field']}: ", style="")
        line.append(f"{moment(profile['first'])} → {moment(profile['last'])}")
        if rate is not None:
            line.append(f" · avg {human_rate(rate)}")
        if profile["peak_per_second"] is not None:
            line.append(f" · peak {profile['peak_per_second']:,}/s, {profile['peak_per_minute']:,}/min")
        if profile["peak_per_hour"] is not None:
            line.append(
                f" · peak {profile['peak_per_hour']:,}/h" + (" (scaled from sample)" if profile["scaled"] else "")
            )
        bulk = profile.get("bulk_load")
        if bulk:
            line.append(f" · {bulk_load_text(bulk)}", style="yellow")
        parts.append(line)
    document_map = collection.get("document_map")
    if document_map:
        parts.append(Text(f"  documents keyed by values: {_map(document_map)}", style="magenta"))
    for field in collection["fields"]:
        for sentinel in (field.get("numbers") or {}).get("sentinels") or []:
            what = "the only value" if sentinel["constant"] else f"{sentinel['share']:.1%} of the values"
            parts.append(
                Text(
                    f"  placeholder {sentinel['value']} in {field['path']} ({what}): not a measurement", style="yellow"
                )
            )
        kind = (field.get("array") or {}).get("kind")
        if kind and not field["path"].endswith("[]"):
            parts.append(Text(f"  {field['path']}: {ARRAY_KINDS[kind]} (bounded by what it stands for)", style="dim"))
    for item in collection.get("patterns_in_place") or []:
        parts.append(
            Text(
                f"  pattern in place: {item['pattern'].replace('_', ' ')} ({', '.join(item['fields'])})", style="green"
            )
        )
    drift = collection["drift"]
    for item in drift["appeared"]:
        parts.append(
            Text(
                f"  field {item['field']} appeared at {moment(item['first_seen'])} ({item['documents']:,} documents)",
                style="yellow",
            )
        )
    for item in drift["vanished"]:
        parts.append(
            Text(
                f"  field {item['field']} last seen at {moment(item['last_seen'])} ({item['documents']:,} documents)",
                style="yellow",
            )
        )
    for ref in collection["references"]:
        parts.append(
            Text(
                f"  {ref['field']} → {ref['target']}._id ({ref['matched']}/{ref['checked']} matched)",
                style="magenta",
            )
        )
    if collection["indexes"]:
        names = []
        for index in collection["indexes"]:
            usage = index["usage"]
            names.append(index["name"] + (f" ({usage['ops']:,} ops)" if usage else ""))
        parts.append(Text("  indexes: " + ", ".join(names), style="dim"))
    return Group(*parts)


def print_report(report: dict[str, Any], console: Console, verbose: bool = False) -> None:
    source = report["source"]
    console.print(Text(f"{source['kind']} {source['location']} · database {source['database']}", style="bold"))
    summary = Table(title=None, header_style="bold")
    summary.add_column("collection")
    summary.add_column("documents", justify="right")
    summary.add_column("read", justify="right")
    summary.add_column("fields", justify="right")
    summary.add_column("doc p50", justify="right")
    summary.add_column("doc max", justify="right")
    summary.add_column("largest array (max)", justify="right")
    for collection in report["collections"]:
        arrays = [f for f in collection["fields"] if f["array"]]
        widest = max(arrays, key=lambda f: f["array"]["max"], default=None)
        size = collection["document_size"]
        summary.add_row(
            collection["name"],
            human_number(collection["count"]),
            f"{collection['sampling']['documents']:,}",
            str(len(collection["fields"])),
            human_bytes(size["p50"]),
            human_bytes(size["max"]),
            f"{widest['path']} ({widest['array']['max']:,})" if widest else "-",
        )
    console.print(summary)
    for collection in report["collections"]:
        console.print()
        console.print(collection_view(collection, verbose, console.width))
    for note in report.get("notes", []):
        console.print(Text(f"note: {note}", style="dim"))
