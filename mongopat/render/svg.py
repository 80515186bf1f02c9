"""Small inline SVG charts for the HTML report. Every chart carries a text alternative (title, desc and
aria-label) that states its data, so it reads without sight and without the picture."""

from __future__ import annotations

from html import escape

ACCENT = "#2f6fb0"
WARN = "#c0392b"
MUTED = "#8a94a3"
GRID = "#e6e9ef"


def _frame(width: int, height: int, label: str, description: str, body: str) -> str:
    label, description = escape(label), escape(description)
    return (
        f'<svg class="chart" role="img" aria-label="{label}" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" xmlns="http://www.w3.org/2000/svg"><title>{label}</title><desc>{description}</desc>{body}</svg>'
    )


def _count(value: float) -> str:
    """An axis tick: 1,234 / 12.3K / 4.5M, short enough for a narrow margin."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:.3g}M"
    if value >= 10_000:
        return f"{value / 1000:.3g}K"
    return f"{value:,.0f}"


def _y_axis(left: float, top: float, inner_h: float, right: float, peak: float, title: str) -> list[str]:
    """Ticks at 0, half and the peak with light grid lines, and the axis's title written upwards."""
    parts = []
    for share in (0.0, 0.5, 1.0):
        y = top + inner_h * (1 - share)
        parts.append(f'<line x1="{left:.1f}" x2="{right:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{GRID}"/>')
        parts.append(
            f'<text x="{left - 3:.1f}" y="{y + 3:.1f}" font-size="8" text-anchor="end" fill="#444">'
            f"{_count(peak * share)}</text>"
        )
    middle = top + inner_h / 2
    parts.append(
        f'<text x="9" y="{middle:.1f}" font-size="8" text-anchor="middle" fill="#444" '
        f'transform="rotate(-90 9 {middle:.1f})">{escape(title)}</text>'
    )
    return parts


def histogram(
    bins: list[tuple[str, int]],
    label: str,
    markers: list[tuple[int, str]] | None = None,
    limit_bin: int | None = None,
    width: int = 380,
    height: int = 150,
    x_title: str = "",
    y_title: str = "documents",
) -> str:
    """Bars per bin over a counted axis, the count above each bar while they fit; ``markers`` (bin index,
    text) draw lines such as p50/p95; ``limit_bin`` a red limit; ``x_title`` names what the bins hold."""
    if not bins:
        return ""
    peak = max(count for _, count in bins) or 1
    left, right, top, bottom = 44, 8, 30 if markers else 22, 34 if x_title else 22
    inner_w, inner_h = width - left - right, height - top - bottom
    slot = inner_w / len(bins)
    parts = _y_axis(left, top, inner_h, width - right, peak, y_title)
    # As many labels under the axis as fit: about 5 px a character.
    widest = max(len(name) for name, _ in bins) * 5 + 6
    every = max(1, -(-widest // max(int(slot), 1)))
    for index, (name, count) in enumerate(bins):
        bar_h = inner_h * count / peak
        x = left + index * slot
        parts.append(
            f'<rect x="{x + 1:.1f}" y="{top + inner_h - bar_h:.1f}" width="{max(slot - 2, 1):.1f}" '
            f'height="{max(bar_h, 0.5 if count else 0):.1f}" fill="{ACCENT}"><title>{escape(name)}: {count:,}</title></rect>'
        )
        if count and len(bins) <= 16:
            parts.append(
                f'<text x="{x + slot / 2:.1f}" y="{top + inner_h - bar_h - 2:.1f}" font-size="7" '
                f'text-anchor="middle" fill="#222">{_count(count)}</text>'
            )
        if index % every == 0:
            parts.append(
                f'<text x="{x + slot / 2:.1f}" y="{top + inner_h + 11:.1f}" font-size="8" text-anchor="middle" '
                f'fill="#444">{escape(name)}</text>'
            )
    parts.append(
        f'<line x1="{left}" x2="{width - right}" y1="{top + inner_h:.1f}" y2="{top + inner_h:.1f}" stroke="#666"/>'
    )
    if x_title:
        parts.append(
            f'<text x="{left + inner_w / 2:.1f}" y="{height - 4}" font-size="8" text-anchor="middle" '
            f'fill="#444">{escape(x_title)}</text>'
        )
    for place, (index, text) in enumerate(markers or []):
        x = left + (index + 0.5) * slot
        lift = 8 * (place % 2)  # neighbouring markers' labels on two rows
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 6 - lift}" y2="{top + inner_h:.1f}" stroke="#222" '
            f'stroke-dasharray="2,2"/>'
        )
        # A label near an edge is drawn inward, so it is never cut off.
        anchor = "end" if x > width - 40 else "start" if x < left + 20 else "middle"
        parts.append(
            f'<text x="{x:.1f}" y="{top - 9 - lift}" font-size="8" text-anchor="{anchor}">{escape(text)}</text>'
        )
    if limit_bin is not None:
        x = left + (limit_bin + 1) * slot
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 10}" y2="{top + inner_h:.1f}" stroke="{WARN}" stroke-width="2"/>'
        )
        parts.append(
            f'<text x="{x - 2:.1f}" y="{top - 12}" font-size="8" text-anchor="end" fill="{WARN}">16 MiB limit</text>'
        )
    description = "; ".join(f"{name}: {count:,}" for name, count in bins)
    if markers:
        description += ". Marked: " + ", ".join(text for _, text in markers)
    return _frame(width, height, label, description, "".join(parts))


def timeline(
    points: list[tuple[str, int]], label: str, width: int = 560, height: int = 140, y_title: str = "documents"
) -> str:
    """Counts over time as bars over a counted axis; the first, middle and last periods labelled (the
    labels carry their zone)."""
    if not points:
        return ""
    peak = max(count for _, count in points) or 1
    left, right, top, bottom = 44, 8, 10, 22
    inner_w, inner_h = width - left - right, height - top - bottom
    slot = inner_w / len(points)
    parts = _y_axis(left, top, inner_h, width - right, peak, y_title)
    for index, (when, count) in enumerate(points):
        bar_h = inner_h * count / peak
        parts.append(
            f'<rect x="{left + index * slot:.1f}" y="{top + inner_h - bar_h:.1f}" width="{max(slot - 1, 1):.1f}" '
            f'height="{bar_h:.1f}" fill="{ACCENT}"><title>{escape(when)}: {count:,}</title></rect>'
        )
    parts.append(
        f'<line x1="{left}" x2="{width - right}" y1="{top + inner_h:.1f}" y2="{top + inner_h:.1f}" stroke="#666"/>'
    )
    y = height - 6
    parts.append(f'<text x="{left}" y="{y}" font-size="8" fill="#444">{escape(points[0][0])}</text>')
    if len(points) >= 5:
        middle = len(points) // 2
        parts.append(
            f'<text x="{left + (middle + 0.5) * slot:.1f}" y="{y}" font-size="8" text-anchor="middle" '
            f'fill="#444">{escape(points[middle][0])}</text>'
        )
    if len(points) > 1:
        parts.append(
            f'<text x="{width - right}" y="{y}" font-size="8" text-anchor="end" fill="#444">{escape(points[-1][0])}</text>'
        )
    description = f"{len(points)} periods from {points[0][0]} to {points[-1][0]}; peak {peak:,}; " + "; ".join(
        f"{when}: {count:,}" for when, count in points
    )
    return _frame(width, height, label, description, "".join(parts))


def spans(
    rows: list[tuple[str, float, float, int]],
    start: float,
    end: float,
    label: str,
    axis: tuple[str, str] = ("", ""),
    width: int = 560,
) -> str:
    """One bar per row (name, first, last, documents) over [start, end], its documents at its end: shapes
    over time; ``axis`` labels the start and the end."""
    if not rows:
        return ""
    left, right = 170, 60
    height = 16 * len(rows) + 26
    scale = (width - left - right) / (end - start) if end > start else 0
    parts = []
    for index, (name, first, last, documents) in enumerate(rows):
        y = 10 + index * 16
        x1 = left + (first - start) * scale
        x2 = max(x1 + 3, left + (last - start) * scale)
        shown = name if len(name) <= 30 else name[:29] + "…"
        parts.append(f'<text x="0" y="{y + 3}" font-size="9">{escape(shown)}</text>')
        parts.append(
            f'<line x1="{x1:.1f}" x2="{x2:.1f}" y1="{y}" y2="{y}" stroke="{ACCENT}" stroke-width="7">'
            f"<title>{escape(name)}: {documents:,} documents</title></line>"
        )
        parts.append(f'<text x="{x2 + 4:.1f}" y="{y + 3}" font-size="8" fill="#444">{_count(documents)}</text>')
    base = 16 * len(rows) + 4
    parts.append(f'<line x1="{left}" x2="{width - right}" y1="{base}" y2="{base}" stroke="#666"/>')
    parts.append(f'<text x="{left}" y="{base + 12}" font-size="8" fill="#444">{escape(axis[0])}</text>')
    parts.append(
        f'<text x="{width - right}" y="{base + 12}" font-size="8" text-anchor="end" fill="#444">{escape(axis[1])}</text>'
    )
    description = "; ".join(f"{name}: {documents:,} documents" for name, _, _, documents in rows)
    if axis[0]:
        description += f"; from {axis[0]} to {axis[1]}"
    return _frame(width, height, label, description, "".join(parts))


def _figure(value: float) -> str:
    """``10,000`` rather than ``1e+04``; four significant digits below a thousand."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:,.4g}"


def number_bars(values: list[tuple[str, float]], label: str, width: int = 360) -> str:
    """Horizontal bars for a few named numbers (evidence of a recommendation)."""
    values = [(name, float(value)) for name, value in values if isinstance(value, (int, float))]
    if not values:
        return ""
    top = max(abs(v) for _, v in values) or 1
    height = 18 * len(values) + 6
    parts = []
    for index, (name, value) in enumerate(values):
        y = 4 + index * 18
        length = (width - 190) * abs(value) / top
        parts.append(f'<text x="0" y="{y + 11}" font-size="10">{escape(name[:26])}</text>')
        parts.append(f'<rect x="150" y="{y + 2}" width="{max(length, 1):.1f}" height="11" fill="{ACCENT}"/>')
        parts.append(f'<text x="{154 + length:.1f}" y="{y + 11}" font-size="10">{_figure(value)}</text>')
    description = "; ".join(f"{name}: {_figure(value)}" for name, value in values)
    return _frame(width, height, label, description, "".join(parts))
