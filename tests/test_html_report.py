"""The HTML report: well-formed, self-contained, escaped, charts with data and text alternatives,
and (where Chromium is installed) rendered by a real browser without console errors."""

import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser

import pytest
from bson import ObjectId
from typer.testing import CliRunner

from mongopat import command
from mongopat.cli import app
from mongopat.render.html import render_html
from mongopat.sources import SourceSpec
from tests.support.dumps import write_export
from tests.support.paths import REAL, SAMPLE_CONFIGS
from tests.support.scenarios import update_readings

runner = CliRunner()
VOID = {"meta", "br", "wbr", "img", "input", "link", "hr", "rect", "line", "path", "circle"}


class Checker(HTMLParser):
    """Collects tags, checks nesting, and records each SVG's title/desc/aria-label and data marks."""

    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.svgs, self.scripts, self.text = [], [], [], [], []
        self.external = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("src", "href"):
            value = attrs.get(key) or ""
            if value.startswith(("http:", "https:", "//")):
                self.external.append(value)
        if tag == "svg":
            self.svgs.append({"label": attrs.get("aria-label"), "title": False, "desc": False, "marks": 0})
        elif self.svgs and tag in ("rect", "line") and "svg" in self.stack:
            self.svgs[-1]["marks"] += 1
        elif self.svgs and tag in ("title", "desc") and self.stack and self.stack[-1] == "svg":
            self.svgs[-1][tag] = True
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> with open {self.stack[-3:]}")
            return
        self.stack.pop()

    def handle_data(self, data):
        if self.stack and self.stack[-1] == "script":
            self.scripts.append(data)
        self.text.append(data)


def check(page: str) -> Checker:
    checker = Checker()
    checker.feed(page)
    checker.close()
    assert checker.errors == [] and checker.stack == [], checker.errors[:3]
    assert checker.external == []  # nothing fetched at view time
    for chart in checker.svgs:
        assert chart["label"] and chart["title"] and chart["desc"], chart
        assert chart["marks"] > 0, chart  # every chart has data
    return checker


@pytest.fixture(scope="module")
def ecommerce():
    report = command.analyze(SourceSpec(dump=str(SAMPLE_CONFIGS / "ecommerce")))
    result = command.recommend(report, str(SAMPLE_CONFIGS / "ecommerce/access.yaml"))
    return report, result


def test_report_page_is_well_formed_with_charts(ecommerce):
    report, result = ecommerce
    page = render_html(report, result)
    checker = check(page)
    assert len(checker.svgs) >= 10
    text = "".join(checker.text)
    for name in ("orders", "products", "categories", "customers", "MP102", "Before and after", "Trade-offs"):
        assert name in text
    assert "mongopat migrate plan --from recs.json --only MP104" in text
    assert page.index("Recommendations") < page.index("Collections (")


def test_values_and_names_are_escaped(tmp_path):
    hostile = "<script>alert(1)</script>"
    write_export(tmp_path, "evil", [{"_id": ObjectId(), hostile: hostile, "kind": hostile} for _ in range(5)])
    report = command.analyze(SourceSpec(dump=str(tmp_path)))
    for show in (False, True):
        page = render_html(report, command.recommend(report), show_values=show)
        check(page)
        assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_values_are_hidden_unless_asked(tmp_path):
    write_export(tmp_path, "people", [{"_id": i, "email": "secret@example.com", "kind": "vip"} for i in range(3)])
    assert (
        runner.invoke(app, ["analyze", "--dump", str(tmp_path), "--html", str(tmp_path / "a.html"), "-q"]).exit_code
        == 0
    )
    hidden = (tmp_path / "a.html").read_text()
    assert "vip" not in hidden and "secret@example.com" not in hidden
    assert (
        runner.invoke(
            app, ["analyze", "--dump", str(tmp_path), "--html", str(tmp_path / "b.html"), "--show-values", "-q"]
        ).exit_code
        == 0
    )
    assert "vip" in (tmp_path / "b.html").read_text()


def test_recommend_html_from_a_saved_report(tmp_path):
    saved = tmp_path / "report.json"
    assert runner.invoke(app, ["analyze", "--dump", str(SAMPLE_CONFIGS / "iot"), "-o", str(saved), "-q"]).exit_code == 0
    page_path = tmp_path / "advice.html"
    result = runner.invoke(app, ["recommend", "--report", str(saved), "--html", str(page_path), "-q"])
    assert result.exit_code == 0, result.output
    page = page_path.read_text()
    check(page)
    assert "MP113" in page and "time-series collection" in page and "system.buckets.readings_ts" in page


def test_size_stays_reasonable_for_large_databases():
    fields = [
        {
            "path": f"f{i}",
            "depth": 1,
            "in_array": False,
            "count": 100,
            "presence": 0.5,
            "types": [{"type": "string", "count": 100, "share": 1.0}],
            "cardinality": {"values": 100, "distinct": 50, "exact": True, "all_distinct": False, "top": None},
            "array": None,
        }
        for i in range(30)
    ]
    collection = {
        "name": "c",
        "count": 100,
        "count_exact": True,
        "storage": {"storage_bytes": None},
        "sampling": {"method": "file", "documents": 100, "note": ""},
        "document_size": {
            "count": 100,
            "min": 1,
            "mean": 1,
            "p50": 1,
            "p95": 1,
            "p99": 1,
            "max": 1,
            "histogram": [{"le": 256, "count": 100}],
        },
        "max_depth": 1,
        "fields": fields,
        "time": [],
        "drift": {},
        "references": [],
        "indexes": [],
        "notes": [],
    }
    report = {
        "source": {"kind": "dump", "location": "x", "database": "big"},
        "generated_at": "",
        "collections": [dict(collection, name=f"c{i}") for i in range(300)],
    }
    page = render_html(report)
    check(page)
    per_path = len(page.encode()) / (300 * 30)
    assert per_path < 1500, per_path  # 9,000 paths: under 14 MB, and details keep it navigable


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Rows of an 8-bit, non-interlaced RGB(A) PNG (what Chromium writes), unfiltered."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, idat, width = 8, b"", 0
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        chunk = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and colour in (2, 6)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        position += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, rows


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Chromium is not installed (.ci/run installs it)")
def test_renders_in_headless_chromium_without_console_errors(ecommerce, tmp_path):
    report, result = ecommerce
    page = tmp_path / "advice.html"
    page.write_text(render_html(report, result))
    shot = tmp_path / "shot.png"
    run = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--enable-logging=stderr",
            "--v=0",
            "--hide-scrollbars",
            "--window-size=1280,1600",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.exists(), run.stderr[-2000:]
    console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
    width, height, rows = _png_pixels(shot.read_bytes())
    assert (width, height) == (1280, 1600)
    colours = {row[i : i + 3] for row in rows[::40] for i in range(0, len(row), 64)}
    dark = sum(1 for row in rows[::20] for i in range(0, len(row), 16) if row[i] < 100)
    assert len(colours) > 5 and dark > 50  # text and charts, not a blank page


@pytest.fixture(scope="module")
def weather_page(tmp_path_factory):
    """The weather sample's recommend report, MP101 let through on the fixture's 400 observations."""
    from mongopat.command import analyze, recommend

    report = analyze(SourceSpec(dump=str(REAL / "sample_weatherdata.archive.gz")))
    result = recommend(report, str(REAL / "weatherdata.access.yaml"), {"MP101": {"min_documents": 100}})
    return render_html(report, result)


@pytest.fixture(scope="module")
def bucket_page(tmp_path_factory):
    """The IoT scenario's recommend report: readings that bucketing pays for, with the guide of its migration.
    (The weather sample holds one reading per station in any window: it gets no bucket migration.)"""
    from mongopat.command import analyze, recommend
    from mongopat.sample_data import SCENARIOS, write_scenario

    folder = write_scenario(SCENARIOS["iot"](), tmp_path_factory.mktemp("iot"))
    spec = SourceSpec(dump=str(folder / "iot"))
    report = analyze(spec)
    # Readings updated in place: buckets made by hand, not a time-series collection.
    result = recommend(report, str(update_readings(folder / "access.yaml")), source=spec)
    assert any(r["code"] == "MP101" and r["migration"] for r in result["recommendations"])
    return render_html(report, result)


def test_the_weather_report_names_shapes_by_what_sets_them_apart(weather_page):
    from mongopat.render.html import shape_labels

    shapes = [
        {"fields": ["_id", "a", "b"], "documents": 5},
        {"fields": ["_id", "a", "b", "c"], "documents": 50},
        {"fields": ["_id", "c", "a", "b"], "documents": 2},
    ]
    assert shape_labels(shapes) == ["−c", "most common (4 fields)", "the same fields in another order"]
    # The fixture's _ids come from one bulk load: shapes over that time would say nothing.
    assert "Shapes over time are not drawn: the _id times are those of a bulk load." in weather_page
    assert "_id, airTemperature, atmospher" not in weather_page


def test_a_bulk_loaded_id_is_captioned_as_a_bulk_load(weather_page):
    assert "Inserts by _id: bulk load: 100% written in 1 load(s)" in weather_page
    assert "Inserts by _id: average" not in weather_page


def test_documents_examined_are_whole_documents_on_the_declared_workload(bucket_page):
    import re

    [figures] = re.findall(r"documents examined: ([^<]*)</p>", bucket_page)
    today, after = re.match(r"([\d,]+) today, ([\d,]+) after", figures).groups()
    assert int(today.replace(",", "")) > int(after.replace(",", "")) >= 1
    assert "at the declared 10 inserts/s" in figures


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Chromium is not installed (.ci/run installs it)")
@pytest.mark.parametrize("width", [1000, 1600])
@pytest.mark.parametrize("which", ["bucket_page", "weather_page"])
def test_before_and_after_blocks_and_tables_stay_inside_the_page(request, which, tmp_path, width):
    bucket_page = request.getfixturevalue(which)
    probe = (
        "<script>window.addEventListener('load', () => { const over = [...document.querySelectorAll('details')]"
        ".map(d => d.open = true) && [...document.querySelectorAll('pre')].filter(p => p.getBoundingClientRect()"
        ".right > document.documentElement.clientWidth + 1).length + [...document.querySelectorAll('table')].filter(t => {"
        "const card = t.closest('details'); return card && (t.closest('.wide') || t).getBoundingClientRect().right > "
        "card.getBoundingClientRect().right + 1}).length; document.body.setAttribute('data-over', over);"
        "});</script>"
    )
    page = tmp_path / "readings.html"
    page.write_text(bucket_page.replace("</body>", probe + "</body>"))
    run = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},1200", "--virtual-time-budget=3000",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert 'data-over="0"' in run.stdout, run.stdout[-500:] + run.stderr[-1000:]
    if which == "bucket_page":
        assert bucket_page.count("figcaption>today") >= 2


def test_the_overview_counts_findings_and_indexes_the_advice(ecommerce):
    report, result = ecommerce
    page = render_html(report, result)
    overview = page.split("<h2>Overview</h2>")[1].split("<h2>")[0]
    with_findings = {r["collection"] for r in result["recommendations"] if r["collection"]}
    for name in with_findings:
        row = overview.split(f"href='#c-{name}'")[1].split("</tr>")[0]
        assert "sev-" in row and "none" not in row, name
    for index, _ in enumerate(result["recommendations"]):
        assert f"href='#r-{index}'" in page and f"id='r-{index}'" in page
    assert " UTC · mongopat" in page  # the time with its zone


def test_charts_have_axes_with_counts(ecommerce):
    report, result = ecommerce
    checker = check(render_html(report, result))
    histograms = [svg for svg in checker.svgs if svg["label"].startswith(("Document sizes", "Values of", "Lengths"))]
    assert histograms
    page = render_html(report, result)
    assert "document size (BSON bytes)" in page and ">documents</text>" in page and ">values</text>" in page
    assert "inserts per " in page  # the timeline's axis says what a bar counts


def test_values_are_summarised_and_sentinels_marked(weather_page):
    # The weather sample writes 9999 for an elevation it does not know: marked, and left out of the charts.
    assert "sentinel 9,999 × 400 (100%, the only value: a placeholder)" in weather_page
    assert "sentinel 999.9 ×" in weather_page and "left out" in weather_page
    assert "<h3 id='values-data'>Values</h3>" in weather_page
    assert "1984-03-05 12:00 UTC … 1984-03-13 18:00 UTC" in weather_page  # the dates' first and last
    checker = check(weather_page)
    assert any(svg["label"] == "Values of airTemperature.value" for svg in checker.svgs)


@pytest.mark.parametrize(
    ("share", "shown"), [(0.0003, "<1%"), (0.005, "<1%"), (0.5, "50%"), (0.996, ">99%"), (1.0, "100%"), (0.0, "0%")]
)
def test_presence_never_reads_zero_for_a_field_that_exists(share, shown):
    from mongopat.render.words import percent

    assert percent(share) == shown


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Chromium is not installed (.ci/run installs it)")
def test_the_page_prints_to_pdf(ecommerce, tmp_path):
    report, result = ecommerce
    page = tmp_path / "advice.html"
    page.write_text(render_html(report, result))
    pdf = tmp_path / "advice.pdf"
    run = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", f"--user-data-dir={tmp_path / 'profile'}", "--no-pdf-header-footer",
         f"--print-to-pdf={pdf}", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert pdf.exists(), run.stderr[-2000:]
    data = pdf.read_bytes()
    pages = len(re.findall(rb"/Type\s*/Page[^s]", data))
    assert data.startswith(b"%PDF") and pages >= 3


def test_a_bucket_recommendation_draws_its_readings_over_their_own_time(bucket_page):
    """Readings of a few minutes fall in one hour of the insert timeline: the chart is the time field's
    own histogram, bars a few minutes wide, not one solid bar."""
    check(bucket_page)
    start = bucket_page.index('aria-label="Readings over time by')
    chart = bucket_page[start : bucket_page.index("</svg>", start)]
    assert chart.count("<rect") >= 5  # a bar a period
