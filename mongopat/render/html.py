"""One self-contained HTML page for an analysis (and its recommendations): inline CSS, inline SVG, no
network at view time. Sections collapse (``<details>``) so databases with hundreds of collections stay
readable; printing opens them all. Every value from the data is escaped."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from mongopat import __version__
from mongopat.migrate.operations import STEP_OPERATIONS
from mongopat.migrate.preview import example_document, preview, to_json_text
from mongopat.migrate.steps import StepError, build_step
from mongopat.render import svg
from mongopat.render.console import bulk_load_text, human_bytes, human_number, human_rate
from mongopat.render.recommendations import evidence_value, prediction_lines
from mongopat.render.words import data_value, instant, moment, percent
from mongopat.rules.base import SEVERITY_RANK

SIZE_LABELS = {256: "256B", 1024: "1K", 4096: "4K", 16384: "16K", 65536: "64K", 262144: "256K",
               1048576: "1M", 4194304: "4M", 8388608: "8M", 16777216: "16M"}  # fmt: skip
MIB = 1024 * 1024
OPEN_COLLECTIONS_UP_TO = 12

CSS = """
:root{--fg:#1d2330;--muted:#5b6576;--line:#dde2ea;--accent:#2f6fb0;--error:#b3261e;--warning:#a05a00;--info:#2f6fb0}
*{box-sizing:border-box}body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);margin:0;padding:24px 32px;max-width:1200px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}p.meta{color:var(--muted);margin:0}p.summary{margin:6px 0 0;font-weight:600}
table{border-collapse:collapse;width:100%;margin:6px 0 12px}th,td{text-align:left;padding:3px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;background:#f4f6f9}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
details{border:1px solid var(--line);border-radius:6px;padding:6px 12px;margin:10px 0}summary{cursor:pointer;font-weight:600}
.sev{display:inline-block;border-radius:3px;padding:0 6px;color:#fff;font-size:12px;font-weight:600}
.sev-error{background:var(--error)}.sev-warning{background:var(--warning)}.sev-info{background:var(--info)}
.bar{display:inline-block;width:90px;height:10px;background:#e7ebf1;border-radius:2px;vertical-align:middle;overflow:hidden}
.bar>span{display:block;height:100%;background:var(--accent)}
.types{display:inline-flex;width:100px;height:10px;vertical-align:middle;border-radius:2px;overflow:hidden}
.types>span{height:100%}.pct{color:var(--muted);font-size:12px;margin-left:4px}
.charts{display:flex;flex-wrap:wrap;gap:12px 24px;align-items:flex-start}.charts figure{margin:0;display:table}.charts figure>figcaption{display:table-caption;caption-side:top}
figcaption{font-size:12px;color:var(--muted);margin:0 0 2px}.sentinel{color:var(--warning);font-weight:600}pre{background:#f6f8fa;border:1px solid var(--line);border-radius:4px;padding:8px;overflow:auto;font-size:12px;max-height:360px;white-space:pre-wrap;overflow-wrap:anywhere}
.wide{overflow-x:auto}table.fields td:nth-child(2){white-space:nowrap}table.fields td:nth-child(5){min-width:15em}.wide>table{margin:0}.pair{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:12px}.pair>figure{margin:0;min-width:0}code{font-size:12px}.muted{color:var(--muted)}
@page{margin:14mm}@media print{body{padding:0;max-width:none;-webkit-print-color-adjust:exact;print-color-adjust:exact}h2,h3,figcaption{break-after:avoid}figure,tr{break-inside:avoid}details{break-inside:avoid;border:none;padding:0}pre{max-height:none}}
"""
TYPE_COLOURS = ["#2f6fb0", "#e0a030", "#4caf7a", "#b05fc0", "#d35f5f", "#5fb0c0", "#8a94a3"]
# Printing must show closed sections: open them all just before printing (the page's only script).
PRINT_SCRIPT = "addEventListener('beforeprint',()=>document.querySelectorAll('details').forEach(d=>d.open=true));"


def _bar(share: float | None) -> str:
    if share is None:
        return ""
    pct = max(0.0, min(1.0, share)) * 100
    text = percent(share)
    return f'<span class="bar" role="img" aria-label="presence {text}"><span style="width:{pct:.1f}%"></span></span><span class="pct">{text}</span>'


def _types(types: list[dict[str, Any]]) -> str:
    spans = "".join(
        f'<span style="width:{t["share"] * 100:.1f}%;background:{TYPE_COLOURS[i % len(TYPE_COLOURS)]}" title="{escape(t["type"])} {t["share"] * 100:.0f}%"></span>'
        for i, t in enumerate(types)
    )
    text = ", ".join(f"{escape(t['type'])} {percent(t['share'])}" for t in types)
    return f'<span class="types" role="img" aria-label="types: {text}">{spans}</span> <span class="pct">{text}</span>'


def _array_chart(field: dict[str, Any]) -> str:
    array = field["array"]
    bins, labels = [], []
    lower = None
    for item in array["histogram"]:
        upper = item["le"]
        name = (
            f">{human_number(lower)}"
            if upper is None
            else (str(upper) if lower is None or upper - lower <= 1 else f"≤{human_number(upper)}")
        )
        bins.append((name, item["count"]))
        labels.append(upper)
        lower = upper if upper is not None else lower
    markers = []
    for key in ("p50", "p95", "p99", "max"):
        value = array.get(key)
        if value is None:
            continue
        index = next((i for i, upper in enumerate(labels) if upper is None or value <= upper), len(labels) - 1)
        markers.append((index, f"{key} {human_number(value)}"))
    merged: dict[int, str] = {}
    for index, text in markers:
        merged[index] = f"{merged[index]} · {text}" if index in merged else text
    return svg.histogram(bins, f"Lengths of {field['path']}", sorted(merged.items()), x_title="elements")


def _size_chart(size: dict[str, Any]) -> str:
    bins, lower = [], None
    for item in size.get("histogram", []):
        upper = item["le"]
        name = f">{SIZE_LABELS.get(lower, lower)}" if upper is None else f"≤{SIZE_LABELS.get(upper, upper)}"
        bins.append((name, item["count"]))
        lower = upper if upper is not None else lower
    near = (size.get("max") or 0) >= MIB
    limit_bin = (
        next((i for i, item in enumerate(size.get("histogram", [])) if item["le"] == 16 * MIB), None) if near else None
    )
    if near and limit_bin is None:  # draw the 16 MiB limit even when no document reaches that bin
        limit_bin = len(bins) - 1
    return svg.histogram(bins, "Document sizes (BSON)", [], limit_bin, x_title="document size (BSON bytes)")


def _timeline_chart(profile: dict[str, Any]) -> str:
    timeline = profile.get("timeline", [])
    if not timeline:
        return ""
    hours = timeline[0].get("hours") or 1
    points = [(moment(p["start"], hours * 3600), p["count"]) for p in timeline]
    period = f"{hours:g} h" if hours >= 1 else f"{hours * 60:g} min"
    return svg.timeline(points, f"Inserts over time by {profile['field']}", y_title=f"inserts per {period}")


def shape_labels(shapes: list[dict[str, Any]]) -> list[str]:
    """Each shape by what tells it from the most common one: the fields it adds (+) and lacks (−)."""
    common = max(shapes, key=lambda shape: shape["documents"])
    base = set(common["fields"])
    labels = []
    for shape in shapes:
        if shape is common:
            labels.append(f"most common ({len(base)} fields)")
            continue
        own = set(shape["fields"])
        changes = [f"+{f}" for f in shape["fields"] if f not in base] + [
            f"−{f}" for f in common["fields"] if f not in own
        ]
        labels.append(" ".join(changes) or "the same fields in another order")
    return labels


def _drift_chart(drift: dict[str, Any]) -> str:
    shapes = drift.get("shapes", [])
    if len(shapes) < 2 or drift.get("clock") != "_id":
        return ""

    rows = [
        (label, instant(s["first"]).timestamp(), instant(s["last"]).timestamp(), s["documents"])
        for label, s in zip(shape_labels(shapes[:12]), shapes[:12], strict=True)
    ]
    start, end = min(r[1] for r in rows), max(r[2] for r in rows)
    first = min((s["first"] for s in shapes[:12]), key=instant)
    last = max((s["last"] for s in shapes[:12]), key=instant)
    axis = (moment(first, end - start), moment(last, end - start))
    return svg.spans(rows, start, end, "Document shapes over insertion time (documents of each)", axis)


def _figure(caption: str, chart: str, code: bool = False) -> str:
    """A chart under its caption (a caption below a chart reads as the next one's)."""
    text = f"<code>{escape(caption)}</code>" if code else escape(caption)
    return f"<figure><figcaption>{text}</figcaption>{chart}</figure>"


def _number(value: Any) -> str:
    """9,999.9 and 13.18 as written, never 1e+04."""
    if isinstance(value, float):
        text = f"{value:,.6g}"
        return f"{value:,.0f}" if "e" in text else text
    return f"{value:,}" if isinstance(value, int) else str(value)


def _sentinel_text(entry: dict[str, Any]) -> str:
    what = "the only value: a placeholder" if entry["constant"] else 'standing for "missing"?'
    return f"{_number(entry['value'])} × {human_number(entry['count'])} ({percent(entry['share'])}, {what})"


def _values_cell(field: dict[str, Any], show_values: bool) -> str:
    """What a field's values look like, in a line: a range and median, dates first and last, string lengths;
    a sentinel marked."""
    parts = []
    numbers, dates, strings = field.get("numbers"), field.get("dates"), field.get("strings")
    if numbers:
        sentinels = numbers.get("sentinels") or []
        quantiles = numbers.get("quantiles")
        if quantiles:
            low, high = numbers["range"]["min"], numbers["range"]["max"]
            parts.append(f"{_number(low)} … {_number(high)}, median {_number(quantiles['p50'])}")
        elif not sentinels:
            parts.append(f"{_number(numbers['min'])} … {_number(numbers['max'])}")
        parts.extend(f"<span class='sentinel'>sentinel {escape(_sentinel_text(e))}</span>" for e in sentinels)
    if dates:
        parts.append(f"{escape(moment(dates['min']))} … {escape(moment(dates['max']))}")
    if strings and strings.get("count"):
        low, high = strings.get("min_length"), strings.get("max_length")
        median = strings.get("p50_length")
        length = f"{low}–{high}" if low is not None and low != high else f"{high}"
        unit = "character" if length == "1" else "characters"
        parts.append(f"{length} {unit}" + (f", median {median}" if median is not None and low != high else ""))
    return "<br>".join(parts)


def _value_figure(field: dict[str, Any]) -> str:
    """A histogram of a field's numbers or dates with its quartiles marked, under its caption; empty for
    other fields."""
    found = _value_chart(field)
    return _figure(*found) if found else ""


def _value_chart(field: dict[str, Any], label_as: str = "Values of", counted: str = "values") -> tuple[str, str] | None:
    """The caption and chart of :func:`_value_figure` (None where a field has no spread of values)."""
    numbers, dates = field.get("numbers"), field.get("dates")
    spread = (numbers if numbers and numbers.get("histogram") else None) or dates
    if not spread or not spread.get("histogram") or len(spread["histogram"]) < 2:
        return None
    is_date = spread is dates
    if is_date:
        start, end = instant(spread["min"]), instant(spread["max"])
        long = (end - start).total_seconds() >= 3 * 86400
        first, second = spread["histogram"][:2]
        fine = (instant(second["low"]) - instant(first["low"])).total_seconds() < 60  # bins under a minute

        def label(text: str) -> str:
            shown = moment(text, None if long else 60)
            return shown[:10] if long else shown[11:19] if fine else shown[11:16]

        x_title = "date (UTC)" if long else f"time on {start:%Y-%m-%d} (UTC)"
    else:

        def label(value: Any) -> str:
            return _number(value)

        x_title = "value"
    bins = [(label(item["low"]), item["count"]) for item in spread["histogram"]]
    edges = [item["low"] for item in spread["histogram"]]
    markers = []
    for key, name in (("p25", "p25"), ("p50", "median"), ("p75", "p75")):
        value = spread["quantiles"].get(key)
        if value is None:
            continue
        index = max((i for i, edge in enumerate(edges) if edge <= value), default=0)
        markers.append((index, name))
    merged: dict[int, str] = {}
    for index, text in markers:
        merged[index] = f"{merged[index]} · {text}" if index in merged else text
    sentinels = [] if is_date else (numbers or {}).get("sentinels") or []
    caption = field["path"] + ("" if spread.get("exact") else " (estimated)")
    caption += "".join(f"; sentinel {_sentinel_text(e)} left out" for e in sentinels)
    chart = svg.histogram(
        bins, f"{label_as} {field['path']}", sorted(merged.items()), x_title=x_title, y_title="values"
    )
    return caption, chart


def _collection_section(
    collection: dict[str, Any], findings: list[dict[str, Any]], show_values: bool, open_: bool
) -> str:
    name = escape(collection["name"])
    size = collection["document_size"]
    counts = {s: sum(1 for f in findings if f["severity"] == s) for s in ("error", "warning", "info")}
    badge = " ".join(f'<span class="sev sev-{s}">{n} {s}</span>' for s, n in counts.items() if n)
    parts = [
        f'<details id="c-{name}"{" open" if open_ else ""}><summary>{name} · {human_number(collection["count"])} documents {badge}</summary>'
    ]
    sampling = collection["sampling"]
    parts.append(
        f'<p class="meta">Read {human_number(sampling["documents"])} documents ({escape(sampling["method"])}: {escape(sampling["note"] or "")}). '
        f"Document size p50 {human_bytes(size.get('p50'))}, p95 {human_bytes(size.get('p95'))}, max {human_bytes(size.get('max'))}; "
        f"nesting depth {collection.get('max_depth', 0)}.</p>"
    )
    charts = []
    if size.get("count"):
        charts.append(_figure("Document sizes", _size_chart(size)))
    for profile in collection.get("time", []):
        # One bar says nothing a caption does not: a load in one go, or documents of one hour.
        chart = _timeline_chart(profile) if len(profile.get("timeline") or []) > 1 else ""
        if chart or profile.get("bulk_load"):
            rate = profile.get("avg_per_sec")
            if profile.get("bulk_load"):  # a load's speed is not the application's insert rate
                said = bulk_load_text(profile["bulk_load"])
            else:
                said = (
                    f"average {human_rate(rate) if rate else '-'}, peak {human_number(profile.get('peak_per_hour'))}/h"
                )
            charts.append(
                _figure(f"Inserts by {profile['field']}: {said}", chart) if chart
                else f"<p class='meta'>Inserts by {escape(profile['field'])}: {escape(said)}</p>"
            )  # fmt: skip
    loaded = next((p for p in collection.get("time", []) if p["field"] == "_id" and p.get("bulk_load")), None)
    # Shapes over the _id's time say nothing when the documents were loaded in one go.
    drift = "" if loaded and loaded["bulk_load"].get("share", 0) >= 0.5 else _drift_chart(collection.get("drift", {}))
    if drift:
        charts.append(_figure("Shapes (sets of top-level fields) over time", drift))
    elif loaded and len((collection.get("drift") or {}).get("shapes") or []) > 1:
        charts.append("<p class='meta'>Shapes over time are not drawn: the _id times are those of a bulk load.</p>")
    if charts:
        parts.append('<div class="charts">' + "".join(charts) + "</div>")
    rows = []
    for field in collection["fields"]:
        card = field.get("cardinality")
        distinct = ""
        if card:
            distinct = ("" if card["exact"] else "~") + human_number(card["distinct"])
            if show_values and card.get("top"):
                distinct += (
                    " <span class='muted'>"
                    + escape(", ".join(data_value(t["value"])[:20] for t in card["top"][:4]))
                    + "</span>"
                )
        array = field.get("array")
        lengths = f"{array['p50']}/{array['p95']}/{array['p99']}/{human_number(array['max'])}" if array else ""
        indent = "&nbsp;" * 3 * (field["depth"] - 1)
        rows.append(
            f"<tr><td>{indent}<code>{escape(field['path']).replace('.', '.<wbr>')}</code></td><td>{_bar(field['presence'])}</td>"
            f"<td>{_types(field['types'])}</td><td class='num'>{distinct}</td><td>{_values_cell(field, show_values)}</td>"
            f"<td class='num'>{lengths}</td></tr>"
        )
    if rows:
        # Long paths stay whole: a table wider than its card scrolls inside it.
        parts.append("<h3>Fields</h3><div class='wide'><table class='fields'><thead><tr><th>path</th><th>presence</th><th>types</th><th class='num'>distinct</th>"
                     "<th>values</th><th class='num'>array p50/p95/p99/max</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")  # fmt: skip
    arrays = [f for f in collection["fields"] if f.get("array") and f["array"].get("histogram")]
    if arrays:
        parts.append('<h3>Array lengths</h3><div class="charts">' + "".join(
            _figure(f["path"], _array_chart(f), code=True) for f in arrays[:20]
        ) + "</div>")  # fmt: skip
    distributions = [chart for field in collection["fields"] if (chart := _value_figure(field))]
    if distributions:
        parts.append(f"<h3 id='values-{name}'>Values</h3><p class='meta'>Numbers and dates: the range, the quartiles (dashed) and how "
                     "the values fall between; sentinels (a value standing for \"missing\") are left out and named. "
                     "Exact up to 1,024 distinct values, estimated from a sample of them past that.</p>"
                     '<div class="charts">' + "".join(distributions[:24]) + "</div>")  # fmt: skip
    drift_info = collection.get("drift", {})
    changes = [
        f"<li><code>{escape(a['field'])}</code> appeared at {escape(str(a['first_seen']))}</li>"
        for a in drift_info.get("appeared", [])
    ]
    changes += [
        f"<li><code>{escape(v['field'])}</code> last seen at {escape(str(v['last_seen']))}</li>"
        for v in drift_info.get("vanished", [])
    ]
    if changes:
        parts.append("<h3>Shape drift</h3><ul>" + "".join(changes) + "</ul>")
    if collection.get("patterns_in_place"):
        parts.append("<h3>Patterns in place</h3><ul>" + "".join(
            f"<li>{escape(p['pattern'].replace('_', ' '))}: <code>{escape(', '.join(p['fields']))}</code></li>"
            for p in collection["patterns_in_place"]) + "</ul>")  # fmt: skip
    if collection.get("references"):
        parts.append("<h3>References</h3><ul>" + "".join(
            f"<li><code>{escape(r['field'])}</code> → <code>{escape(r['target'])}._id</code> ({r['matched']}/{r['checked']} sampled values matched)</li>"
            for r in collection["references"]) + "</ul>")  # fmt: skip
    if collection.get("indexes"):
        parts.append("<h3>Indexes</h3><table><thead><tr><th>name</th><th>key</th><th>options</th><th class='num'>uses</th></tr></thead><tbody>" + "".join(
            f"<tr><td>{escape(i['name'])}</td><td><code>{escape(', '.join(f'{k}: {d}' for k, d in i['key']))}</code></td>"
            f"<td>{'unique ' if i['unique'] else ''}{'sparse ' if i['sparse'] else ''}{'TTL ' + str(i['ttl_seconds']) + ' s' if i['ttl_seconds'] is not None else ''}</td>"
            f"<td class='num'>{human_number(i['usage']['ops']) if i.get('usage') else 'unknown'}</td></tr>"
            for i in collection["indexes"]) + "</tbody></table>")  # fmt: skip
    parts.append("</details>")
    return "".join(parts)


def collection_field(collection: dict[str, Any], path: str | None) -> dict[str, Any] | None:
    return next((f for f in collection["fields"] if f["path"] == path), None) if path else None


def _evidence_chart(rec: dict[str, Any], collection: dict[str, Any] | None) -> str:
    if collection is not None:
        field = next((f for f in collection["fields"] if f["path"] in rec["fields"] and f.get("array")), None)
        if field is not None and rec["pattern"] in ("outlier", "unbounded_arrays", "subset", "over_embedding"):
            return _array_chart(field)
        if rec["pattern"] in ("bucket", "time_series_collection"):
            # The readings over their own time (the time field's dates), where the insert timeline of
            # whole hours would be one bar for readings of a few minutes.
            time_field = collection_field(collection, rec["evidence"].get("time_field"))
            found = _value_chart(time_field, "Readings over time by", "readings") if time_field else None
            if found:
                return found[1]
            profile = next((p for p in collection.get("time", []) if len(p.get("timeline") or []) > 1), None)
            if profile:
                return _timeline_chart(profile)
        if rec["pattern"] == "bloated_documents":
            return _size_chart(collection["document_size"])
    reads = rec["evidence"].get("reads")
    if isinstance(reads, list) and reads and all(isinstance(r, dict) and "after" in r for r in reads):
        examined = []  # documents examined per read, today and with the advised index
        for read in reads[:3]:
            if read.get("before"):
                examined.append((f"{read['read']}: today", read["before"]["docs_examined"]))
            examined.append((f"{read['read']}: indexed", read["after"]["docs_examined"]))
        return svg.number_bars(examined, f"Documents examined per read for {rec['code']} {rec['pattern']}")
    numbers = [(k, v) for k, v in rec["evidence"].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return svg.number_bars(numbers[:6], f"Evidence for {rec['code']} {rec['pattern']}")


def _access_file(path: str | None, collections: list[str]) -> Any:
    """The access-pattern file the recommendations were made with (None when there is none to read)."""
    if not path:
        return None
    from mongopat.access.loader import load_access_file
    from mongopat.errors import MongopatError

    try:
        return load_access_file(path, collections)
    except MongopatError:
        return None


def _guide_section(rec: dict[str, Any], access: Any, report: dict[str, Any]) -> str:
    """What the application must change for the recommendation's migration: its reads and writes, rewritten."""
    from mongopat.guide.build import recommendation_guide
    from mongopat.guide.output import migration_entry
    from mongopat.render.guide import json_lines

    try:
        entry = migration_entry(recommendation_guide(rec["code"], rec["title"], rec["migration"], access, report))
    except (StepError, ValueError):
        return ""
    parts = []
    for read in (r for r in entry["reads"] if r["changed"]):
        examined = read["documents_examined"]
        parts.append(
            f"<h3>Read {escape(read['query'])} on {escape(read['collection'])}</h3><p class='meta'>documents examined: "
            f"{escape(evidence_value(examined['before'], '; '))} today, {escape(evidence_value(examined['after'], '; '))} after "
            f"({escape(examined['basis'])})</p><div class='pair'>"
            f"<figure><figcaption>today</figcaption><pre>{escape(json_lines(read['before']['pipeline']))}</pre></figure>"
            f"<figure><figcaption>after</figcaption><pre>{escape(json_lines(read['after']['pipeline']))}</pre></figure></div>"
        )
    for write in entry["writes"]:
        parts.append(
            f"<h3>Write: {escape(write['description'])}</h3><div class='pair'>"
            f"<figure><figcaption>today</figcaption><pre>{escape(json_lines(write['before']))}</pre></figure>"
            f"<figure><figcaption>after</figcaption><pre>{escape(json_lines(write['after']))}</pre></figure></div>"
        )
    return "".join(parts)


def _recommendation_section(
    rec: dict[str, Any],
    collection: dict[str, Any] | None,
    show_values: bool,
    source_hint: str,
    access: Any = None,
    report: dict[str, Any] | None = None,
) -> str:
    where = escape(rec["collection"] or "database")
    parts = [f'<details open><summary><span class="sev sev-{rec["severity"]}">{rec["severity"]}</span> {escape(rec["code"])} '
             f'{escape(rec["pattern"])} · {where} · {escape(rec["title"])} <span class="muted">(confidence {rec["confidence"]:.2f})</span></summary>']  # fmt: skip
    parts.append(f"<p>{escape(rec['rationale'])}</p>")
    evidence_rows = "".join(
        f"<tr><td>{escape(str(k))}</td><td>{escape(evidence_value(v, '; '))}</td></tr>"
        for k, v in rec["evidence"].items()
    )
    chart = _evidence_chart(rec, collection)
    parts.append(
        f'<div class="charts"><table style="width:auto"><tbody>{evidence_rows}</tbody></table>{f"<figure>{chart}</figure>" if chart else ""}</div>'
    )
    if rec["tradeoffs"]:
        parts.append("<h3>Trade-offs</h3><ul>" + "".join(f"<li>{escape(t)}</li>" for t in rec["tradeoffs"]) + "</ul>")
    predicted = prediction_lines(rec.get("prediction"))
    if predicted:
        bases = [c["basis"] for c in (rec.get("prediction") or {}).get("collections") or [] if c.get("basis")]
        parts.append(
            "<h3>Prediction</h3><ul>"
            + "".join(f"<li>{escape(line)}</li>" for line in predicted)
            + "</ul>"
            + "".join(f'<p class="basis">basis: {escape(basis)}</p>' for basis in bases)
        )
    if rec.get("migration") and collection is not None:
        try:
            step = build_step(rec["migration"])
        except StepError:
            step = None
        if step is not None and STEP_OPERATIONS[step.name].type.kind == "collection":
            params = json.dumps({k: v for k, v in step.params.items() if v is not None}, default=str)
            parts.append(f"<p class='meta'>The migration: {escape(step.name)} on {escape(step.collection)} "
                         f"<code>{escape(params)}</code>; no document changes.</p>")  # fmt: skip
        elif step is not None:
            before, after, note = preview(step, example_document(collection, show_values))
            label = (
                "an example document"
                if show_values and collection.get("example") is not None
                else "a document with placeholder values"
            )
            parts.append(f"<h3>Before and after</h3><p class='meta'>On {label}. {escape(note)}</p><div class='pair'>"
                         f"<figure><figcaption>before</figcaption><pre>{escape(chr(10).join(to_json_text(d) for d in before[:2]))}</pre></figure>"
                         f"<figure><figcaption>after</figcaption><pre>{escape(chr(10).join(to_json_text(d) for d in after[:2]))}</pre></figure></div>")  # fmt: skip
        if step is not None:
            if access is not None:
                parts.append(_guide_section(rec, access, report))
            parts.append(f"<p>Plan it: <code>mongopat recommend {escape(source_hint)} --format json -o recs.json &amp;&amp; "
                         f"mongopat migrate plan --from recs.json --only {escape(rec['code'])}</code></p>")  # fmt: skip
    parts.append("</details>")
    return "".join(parts)


def _headline(rec: dict[str, Any]) -> str:
    """What a recommendation predicts, in a few words: the first of its predicted figures."""
    lines = prediction_lines(rec.get("prediction"))
    return lines[0].removeprefix("predicted: ") if lines else ""


def _recommendation_index(recs: list[dict[str, Any]]) -> str:
    """One row a recommendation, linked to its section: what, where, how sure, what it predicts."""
    rows = "".join(
        f"<tr><td><span class='sev sev-{r['severity']}'>{r['severity']}</span></td>"
        f"<td><a href='#r-{index}'>{escape(r['code'])}</a></td><td>{escape(r['collection'] or 'the database')}</td>"
        f"<td>{escape(r['title'])}</td><td class='num'>{r['confidence']:.2f}</td>"
        f"<td>{'yes' if r.get('migration') else 'no'}</td><td>{escape(_headline(r))}</td></tr>"
        for index, r in enumerate(recs)
    )
    return (
        "<div class='wide'><table><thead><tr><th>severity</th><th>rule</th><th>collection</th><th>advice</th>"
        "<th class='num'>confidence</th><th>migration</th><th>predicted</th></tr></thead><tbody>"
        + rows + "</tbody></table></div>"
    )  # fmt: skip


def render_html(report: dict[str, Any], result: dict[str, Any] | None = None, show_values: bool = False) -> str:
    source = report["source"]
    recs = (result or {}).get("recommendations", [])
    by_collection: dict[str, list[dict[str, Any]]] = {}
    for rec in recs:
        by_collection.setdefault(rec["collection"] or "", []).append(rec)

    def severity(name: str) -> tuple:
        found = by_collection.get(name, [])
        return (-max((SEVERITY_RANK[f["severity"]] for f in found), default=-1), -len(found), name)

    collections = sorted(report["collections"], key=lambda c: severity(c["name"]))
    overview = []
    for collection in collections:
        found = by_collection.get(collection["name"], [])
        counts = {s: sum(1 for f in found if f["severity"] == s) for s in ("error", "warning", "info")}
        badges = (
            " ".join(f'<span class="sev sev-{s}">{n} {s}</span>' for s, n in counts.items() if n)
            or "<span class='muted'>none</span>"
        )
        size = collection["document_size"]
        name = escape(collection["name"])
        overview.append(
            f"<tr><td><a href='#c-{name}'>{name}</a></td><td class='num'>{human_number(collection['count'])}</td>"
            f"<td class='num'>{human_bytes(size.get('p50'))}</td><td class='num'>{human_bytes(size.get('max'))}</td>"
            f"<td class='num'>{human_bytes(collection['storage'].get('storage_bytes'))}</td><td>{badges}</td></tr>"
        )
    database_findings = by_collection.get("", [])
    if database_findings:
        counts = {s: sum(1 for f in database_findings if f["severity"] == s) for s in ("error", "warning", "info")}
        badges = " ".join(f'<span class="sev sev-{s}">{n} {s}</span>' for s, n in counts.items() if n)
        overview.append(f"<tr><td><i>the database</i></td><td></td><td></td><td></td><td></td><td>{badges}</td></tr>")
    hint = f"--dump {source['location']}" if source["kind"] == "dump" else "--uri <uri>"
    if result and result.get("access_file"):
        hint += f" --access {result['access_file']}"
    many = len(collections) > OPEN_COLLECTIONS_UP_TO
    stamp = report.get("generated_at")
    documents = sum(c.get("count") or 0 for c in report["collections"])
    severities = {s: sum(1 for r in recs if r["severity"] == s) for s in ("error", "warning", "info")}
    said = f"{len(report['collections'])} collections, {human_number(documents)} documents"
    if result is not None:
        said += f"; {len(recs)} recommendations: " + ", ".join(f"{n} {s}" for s, n in severities.items())
        with_migration = sum(1 for r in recs if r.get("migration"))
        said += f"; {with_migration} with a migration"
    body = [
        f"<header><h1>mongopat · database {escape(source['database'])}</h1>",
        f"<p class='meta'>{escape(source['kind'])} {escape(source['location'])} · analysed {escape(moment(stamp) if stamp else '-')} · mongopat {escape(__version__)}"
        + (" · values shown" if show_values else " · values hidden (use --show-values to show them)") + "</p>"
        f"<p class='summary'>{escape(said)}</p></header>",
        "<h2>Overview</h2><table><thead><tr><th>collection</th><th class='num'>documents</th><th class='num'>doc p50</th>"
        "<th class='num'>doc max</th><th class='num'>storage</th><th>findings</th></tr></thead><tbody>" + "".join(overview) + "</tbody></table>",
    ]  # fmt: skip
    if result is not None:
        body.append(f"<h2>Recommendations ({len(recs)})</h2>")
        if not recs:
            body.append("<p>No pattern or anti-pattern applies: the collections look healthy for what is known.</p>")
        if recs:
            body.append(_recommendation_index(recs))
        by_name = {c["name"]: c for c in report["collections"]}
        access = _access_file(result.get("access_file"), list(by_name))
        body.extend(
            _recommendation_section(
                rec, by_name.get(rec["collection"] or ""), show_values, hint, access, report
            ).replace("<details open>", f"<details open id='r-{index}'>", 1)
            for index, rec in enumerate(recs)
        )
    body.append(f"<h2>Collections ({len(collections)})</h2>")
    body.extend(
        _collection_section(c, by_collection.get(c["name"], []), show_values, open_=not many) for c in collections
    )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>mongopat · {escape(source['database'])}</title><style>{CSS}</style></head><body>"
        + "".join(body) + f"<script>{PRINT_SCRIPT}</script></body></html>\n"
    )  # fmt: skip
