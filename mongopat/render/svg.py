"""Small inline SVG charts for the HTML report. Every chart carries a text alternative (title, desc and
aria-label) that states its data, so it reads without sight and without the picture."""

from __future__ import annotations

from html import escape

ACCENT = "#2f6fb0"
WARN = "#c0392b"
MUTED = "#8a94a3"


def _frame(width: int, height: int, label: str, description: str, body: str) -> str:
    label, description = escape(label), escape(description)
    return (
        f'<svg class="chart" role="img" aria-label="{label}" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" xmlns="http://www.w3.org/2000/svg"><title>{label}</title><desc>{description}</desc>{body}</svg>'
    )


def histogram(
    bins: list[tuple[str, int]],
    label: str,
    markers: list[tuple[int, str]] | None = None,
    limit_bin: int | None = None,
    width: int = 360,
    height: int = 120,
) -> str:
    """Bars per bin; ``markers`` (bin index, text) draw lines such as p50/p95; ``limit_bin`` a red limit."""
    if not bins:
        return ""
    top = max(count for _, count in bins) or 1
    left, bottom, right = 8, 28, 8
    inner_w, inner_h = width - left - right, height - bottom - 18
    slot = inner_w / len(bins)
    parts = []
    for index, (name, count) in enumerate(bins):
        bar_h = inner_h * count / top
        x = left + index * slot
        parts.append(
            f'<rect x="{x + 1:.1f}" y="{18 + inner_h - bar_h:.1f}" width="{max(slot - 2, 1):.1f}" height="{bar_h:.1f}" '
            f'fill="{ACCENT}"><title>{escape(name)}: {count:,}</title></rect>'
        )
        if len(bins) <= 14 or index % 2 == 0:
            parts.append(
                f'<text x="{x + slot / 2:.1f}" y="{height - 14}" font-size="8" text-anchor="middle" fill="#444">{escape(name)}</text>'
            )
    for index, text in markers or []:
        x = left + (index + 0.5) * slot
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="14" y2="{18 + inner_h}" stroke="#222" stroke-dasharray="2,2"/>'
        )
        parts.append(f'<text x="{x:.1f}" y="11" font-size="8" text-anchor="middle">{escape(text)}</text>')
    if limit_bin is not None:
        x = left + (limit_bin + 1) * slot
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="8" y2="{18 + inner_h}" stroke="{WARN}" stroke-width="2"/>')
        parts.append(
            f'<text x="{x - 2:.1f}" y="{height - 2}" font-size="8" text-anchor="end" fill="{WARN}">16 MiB limit</text>'
        )
    description = "; ".join(f"{name}: {count:,}" for name, count in bins)
    if markers:
        description += ". Marked: " + ", ".join(text for _, text in markers)
    return _frame(width, height, label, description, "".join(parts))


def timeline(points: list[tuple[str, int]], label: str, width: int = 560, height: int = 110) -> str:
    """Counts over time, as bars; first and last labels drawn."""
    if not points:
        return ""
    top = max(count for _, count in points) or 1
    inner_h = height - 30
    slot = (width - 16) / len(points)
    parts = []
    for index, (when, count) in enumerate(points):
        bar_h = inner_h * count / top
        parts.append(
            f'<rect x="{8 + index * slot:.1f}" y="{8 + inner_h - bar_h:.1f}" width="{max(slot - 1, 1):.1f}" '
            f'height="{bar_h:.1f}" fill="{ACCENT}"><title>{escape(when)}: {count:,}</title></rect>'
        )
    parts.append(f'<text x="8" y="{height - 8}" font-size="9">{escape(points[0][0])}</text>')
    parts.append(
        f'<text x="{width - 8}" y="{height - 8}" font-size="9" text-anchor="end">{escape(points[-1][0])}</text>'
    )
    description = f"{len(points)} periods from {points[0][0]} to {points[-1][0]}; peak {top:,}; " + "; ".join(
        f"{when}: {count:,}" for when, count in points
    )
    return _frame(width, height, label, description, "".join(parts))


def spans(rows: list[tuple[str, float, float, int]], start: float, end: float, label: str, width: int = 560) -> str:
    """One horizontal line per row (name, first, last, documents) over [start, end]: shapes over time."""
    if not rows:
        return ""
    height = 16 * len(rows) + 10
    scale = (width - 170) / (end - start) if end > start else 0
    parts = []
    for index, (name, first, last, documents) in enumerate(rows):
        y = 10 + index * 16
        x1 = 160 + (first - start) * scale
        x2 = max(x1 + 2, 160 + (last - start) * scale)
        shown = name if len(name) <= 28 else name[:27] + "…"
        parts.append(f'<text x="0" y="{y + 4}" font-size="9">{escape(shown)}</text>')
        parts.append(
            f'<line x1="{x1:.1f}" x2="{x2:.1f}" y1="{y}" y2="{y}" stroke="{ACCENT}" stroke-width="6">'
            f"<title>{escape(name)}: {documents:,} documents</title></line>"
        )
    description = "; ".join(f"{name}: {documents:,} documents" for name, _, _, documents in rows)
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
