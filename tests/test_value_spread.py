"""Fields' value distributions: quantiles and round histograms of numbers and dates, exact while a field
holds few distinct values, the same however the stream is split, in bounded memory, sentinels left out."""

from __future__ import annotations

import datetime
import random

import pytest

from mongopat.analysis.values import LIMIT, ValueSample, _nice_bins, date_spread, number_spread
from mongopat.command import analyze
from mongopat.sources import SourceSpec
from tests.support.dumps import write_export


def sample_of(values, parts=1):
    """The sample of ``values`` fed in ``parts`` pieces, each to its own sample, merged in order."""
    size = -(-len(values) // parts)
    samples = []
    for start in range(0, len(values), size):
        sample = ValueSample()
        for at in range(start, min(start + size, len(values)), 97):
            sample.add_many(values[at : min(at + 97, start + size, len(values))])
        samples.append(sample)
    whole = samples[0]
    for other in samples[1:]:
        whole.merge(other)
    return whole


@pytest.mark.parametrize(
    ("low", "high", "whole", "expected"),
    [
        (-32.3, 36, False, (-40, 10, 8)),  # round edges around the data
        (955.6, 1046, False, (950, 10, 10)),
        (10, 360, True, (0, 50, 8)),
        (0, 5, True, (0, 1, 6)),  # one bin a value
        (3, 93, True, (0, 10, 10)),
        (7, 7, True, (7, 1, 1)),  # one value
    ],
)
def test_bins_are_round_and_at_most_twelve(low, high, whole, expected):
    assert _nice_bins(low, high, whole, dates=False) == expected


def test_date_bins_are_clock_periods():
    start = datetime.datetime(2026, 3, 5, 12, tzinfo=datetime.timezone.utc).timestamp()
    edge, width, bins = _nice_bins(start, start + 8 * 86400, False, dates=True)
    assert width == 86400 and edge % 86400 == 0 and bins <= 12  # days from midnight UTC


def test_small_fields_are_exact():
    values = [1, 2, 2, 3, 3, 3, 4, 4, 4, 4] * 10
    sample = sample_of(values)
    found = number_spread(sample, {}, 1, 4)
    assert found["exact"] and found["quantiles"] == {"p05": 1, "p25": 2, "p50": 3, "p75": 4, "p95": 4}
    assert [(b["low"], b["count"]) for b in found["histogram"]] == [(1, 10), (2, 20), (3, 30), (4, 40)]
    assert found["range"] == {"min": 1, "max": 4}


def test_many_values_stay_bounded_and_close():
    rng = random.Random(3)
    values = [rng.gauss(50, 10) for _ in range(60_000)]
    sample = sample_of(values)
    assert not sample.exact and len(sample.counts) <= LIMIT
    found = number_spread(sample, {}, min(values), max(values))
    ordered = sorted(values)
    for key, p in (("p05", 5), ("p50", 50), ("p95", 95)):
        assert abs(found["quantiles"][key] - ordered[int(p / 100 * len(values))]) < 1.5  # 0.15 sd
    assert abs(sum(b["count"] for b in found["histogram"]) - len(values)) <= len(found["histogram"])


@pytest.mark.parametrize("parts", [2, 3, 7])
def test_the_sample_does_not_depend_on_how_the_stream_was_split(parts):
    rng = random.Random(8)
    values = [round(rng.uniform(0, 1000), 3) for _ in range(20_000)]
    one, split = sample_of(values), sample_of(values, parts)
    assert one.level == split.level > 0 and one.counts == split.counts and one.seen == split.seen


def test_sentinels_are_left_out_of_the_spread(tmp_path):
    docs = [{"_id": i, "t": (999.9 if i % 10 == 0 else 10 + i % 20)} for i in range(400)]
    write_export(tmp_path, "obs", docs)
    [field] = [f for f in analyze(SourceSpec(dump=str(tmp_path)))["collections"][0]["fields"] if f["path"] == "t"]
    numbers = field["numbers"]
    assert [s["value"] for s in numbers["sentinels"]] == [999.9] and numbers["max"] == 999.9
    assert numbers["range"] == {"min": 11, "max": 29} and numbers["quantiles"]["p95"] <= 29
    assert sum(b["count"] for b in numbers["histogram"]) == 360  # the 40 sentinels left out


def test_dates_and_string_lengths_are_summarised(tmp_path):
    start = datetime.datetime(2026, 1, 1)
    docs = [{"_id": i, "at": start + datetime.timedelta(hours=i), "name": "x" * (1 + i % 9)} for i in range(240)]
    write_export(tmp_path, "events", docs)
    fields = {f["path"]: f for f in analyze(SourceSpec(dump=str(tmp_path)))["collections"][0]["fields"]}
    dates = fields["at"]["dates"]
    assert dates["min"] == "2026-01-01T00:00:00Z" and dates["max"] == "2026-01-10T23:00:00Z" and dates["exact"]
    assert dates["histogram"][0]["low"] == "2026-01-01T00:00:00Z" and sum(b["count"] for b in dates["histogram"]) == 240
    strings = fields["name"]["strings"]
    assert (strings["min_length"], strings["p50_length"], strings["max_length"]) == (1, 5, 9)


def test_a_field_of_dates_from_before_1970_and_after_2038():
    sample = ValueSample()
    sample.add_many([datetime.datetime(1901, 1, 1), datetime.datetime(2100, 1, 1)])
    found = date_spread(sample)
    assert found["min"] == "1901-01-01T00:00:00Z" and found["max"] == "2100-01-01T00:00:00Z"
