import datetime
import os
import pickle
import random

import pytest
from bson import ObjectId

from mongopat.analysis.sketches import DistinctCounter, Distribution


def test_percentiles_use_nearest_rank_on_exact_values():
    dist = Distribution()
    dist.add_many(list(range(1, 101)))  # 1..100
    assert dist.percentile(50) == 50
    assert dist.percentile(95) == 95
    assert dist.percentile(99) == 99
    summary = dist.summary()
    assert summary["min"] == 1 and summary["max"] == 100 and summary["mean"] == 50.5
    assert summary["exact"] is True


def test_percentiles_of_a_skewed_distribution():
    dist = Distribution()
    dist.add_many([3] * 98 + [500, 10_000])
    assert dist.percentile(50) == 3
    assert dist.percentile(99) == 500
    assert dist.summary()["max"] == 10_000


def test_bucketed_mode_stays_within_one_percent():
    rng = random.Random(7)
    values = [rng.randint(1, 5_000_000) for _ in range(50_000)]
    dist = Distribution(exact_limit=1000)
    for start in range(0, len(values), 1000):
        dist.add_many(values[start : start + 1000])
    assert not dist.exact
    ordered = sorted(values)
    for p in (50, 95, 99):
        truth = ordered[int(p / 100 * len(ordered)) - 1]
        assert dist.percentile(p) == pytest.approx(truth, rel=0.02)
    assert len(dist.counts) < 2000  # bounded whatever the number of values


def test_histogram_bins_and_counts_above():
    dist = Distribution()
    dist.add_many([0, 1, 1, 3, 7, 50])
    bins = dist.histogram((0, 1, 5, 10))
    assert bins == [
        {"le": 0, "count": 1},
        {"le": 1, "count": 2},
        {"le": 5, "count": 1},
        {"le": 10, "count": 1},
        {"le": None, "count": 1},
    ]
    assert dist.count_above(5) == 2


def test_merge_matches_single_stream():
    left, right, whole = Distribution(), Distribution(), Distribution()
    left.add_many([1, 2, 3])
    right.add_many([10, 20])
    whole.add_many([1, 2, 3, 10, 20])
    left.merge(right)
    assert left.summary() == whole.summary()


def test_distinct_is_exact_below_the_limit_and_keeps_top_values():
    counter = DistinctCounter(limit=100, top_limit=50)
    counter.add_many(["a", "b", "a", "c", "a", None])
    assert counter.exact and counter.estimate() == 4
    assert counter.top(2) == [("a", 3), ("b", 1)]


def test_distinct_estimate_past_the_limit_is_close():
    counter = DistinctCounter(limit=2000)
    for start in range(0, 200_000, 1000):
        counter.add_many(list(range(start, start + 1000)))
    assert not counter.exact
    assert counter.estimate() == pytest.approx(200_000, rel=0.1)
    assert len(counter.values) <= 2000
    assert counter.top() is None  # too many values for top counts


def test_distinct_membership_is_exact_for_values_passing_the_filter():
    counter = DistinctCounter(limit=500)
    counter.add_many([f"id{i}" for i in range(20_000)])
    decidable = [f"id{i}" for i in range(20_000) if counter.passes_filter(f"id{i}")]
    assert decidable and all(value in counter for value in decidable)
    outsiders = [f"other{i}" for i in range(5000) if counter.passes_filter(f"other{i}")]
    assert not any(value in counter for value in outsiders)


@pytest.mark.parametrize("values", [list(range(-30_000, 30_000)), [random.random() - 0.5 for _ in range(60_000)]])
def test_sample_past_the_limit_is_the_values_whose_unsigned_spread_hash_has_its_top_bits_clear(values):
    """The sample kept at level L: the values whose 1-tuple hash, read as an unsigned 64-bit number, is
    below 2**(64 - L). Negative hashes (top bit set) are never kept."""
    counter = DistinctCounter(limit=1000)
    for start in range(0, len(values), 5000):
        counter.add_many(values[start : start + 5000])
    assert counter.level > 0
    bound = 1 << (64 - counter.level)
    expected = {value for value in values if hash((value,)) % 2**64 < bound}
    assert counter.values == expected
    assert all(counter.passes_filter(value) == (value in expected) for value in values[:2000])


def test_unhashable_values_are_skipped_not_fatal():
    counter = DistinctCounter()
    counter.add_many([1, {"a": 1}, 2])
    assert counter.estimate() == 2 and counter.unhashable == 1


def test_distinct_limit_below_the_top_values_limit_keeps_a_true_sample():
    """With --distinct-limit under 200 the counts outlive the exact set: when they are dropped, only values
    of the current sample join it."""
    from mongopat.analysis.sketches import DistinctCounter

    counter = DistinctCounter(limit=100, top_limit=200)
    for start in range(0, 5000, 50):
        counter.add_many(list(range(start, start + 50)))
    assert counter.level > 0 and all(counter.passes_filter(v) for v in counter.values)
    assert 5000 * 0.6 < counter.estimate() < 5000 * 1.4


@pytest.mark.parametrize("step", [1, 2, 1000])
def test_consecutive_integers_are_sampled_uniformly(step):
    """Counters and sequence numbers: their estimate keeps the standard error of random values."""
    from mongopat.analysis.sketches import DistinctCounter

    counter = DistinctCounter(limit=1000)
    values = list(range(0, 50_000 * step, step))
    for start in range(0, len(values), 1000):
        counter.add_many(values[start : start + 1000])
    assert abs(counter.estimate() - 50_000) < 0.15 * 50_000  # about three standard errors


def test_counters_of_ids_and_dates_pickle_to_the_same_values():
    start = datetime.datetime(1969, 12, 31, 23, 59, 59, 999_999)
    columns = [
        [ObjectId(os.urandom(12)) for _ in range(15_000)],  # past the limit: sampled
        [start + datetime.timedelta(microseconds=k * 7_654_321) for k in range(3_000)],
        [datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(hours=k) for k in range(300)],
        [f"s{k}" for k in range(300)],
    ]
    for values in columns:
        counter = DistinctCounter(limit=10_000)
        counter.add_many(values)
        copy = pickle.loads(pickle.dumps(counter, protocol=pickle.HIGHEST_PROTOCOL))
        assert copy.values == counter.values and copy.level == counter.level
        assert copy.estimate() == counter.estimate()


def test_the_same_file_gives_the_same_report_in_any_process(tmp_path):
    """Python salts the hashes of strings, bytes, ObjectIds and dates per process; the distinct sampling
    must not follow them: estimates past the limit, references and every other figure are the same bytes
    from processes of different hash seeds (timestamps aside)."""
    import json
    import subprocess
    import sys

    from tests.support.dumps import write_export

    rng = random.Random(3)
    start = datetime.datetime(2026, 1, 1)
    documents = [
        {"_id": ObjectId(), "name": f"user-{rng.randint(0, 50_000)}", "at": start + datetime.timedelta(seconds=i),
         "tag": rng.choice([None, True, 1, 2.5, "x"]), "ref": f"id{rng.randint(0, 3000)}"}
        for i in range(6000)
    ]  # fmt: skip
    write_export(tmp_path / "data", "users", documents)
    write_export(tmp_path / "data", "things", [{"_id": f"id{i}"} for i in range(3000)])
    runs = []
    for seed in ("1", "2"):
        result = subprocess.run(
            [sys.executable, "-m", "mongopat", "analyze", "--dump", str(tmp_path / "data"), "-f", "json",
             "--distinct-limit", "1000"],
            capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": seed}, timeout=120,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        report.pop("generated_at")
        runs.append(json.dumps(report, sort_keys=True))
    assert runs[0] == runs[1]
    users = json.loads(runs[0])["collections"][1]
    assert users["name"] == "users"
    name = next(f for f in users["fields"] if f["path"] == "name")
    assert name["cardinality"]["exact"] is False  # past the limit: an estimate, the same in both
    assert [(r["field"], r["target"]) for r in users["references"]] == [("ref", "things")]
