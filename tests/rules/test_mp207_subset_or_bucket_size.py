import datetime

from tests.support.evidence import START, bucket_documents, findings, healthy_collection, report_of


def test_subset_too_large(tmp_path):
    access = (
        "version: 1\ncollections:\n  posts:\n    queries:\n      - {name: p, embed: {field: comments, limit: 500}}\n"
    )
    [rec] = findings(report_of(tmp_path, {"posts": healthy_collection()}), access, rule="MP207")
    assert rec.title == "Subset too large"
    assert (
        findings(
            report_of(tmp_path, {"posts": healthy_collection()}),
            access,
            thresholds={"MP207": {"max_subset": 1000}},
            rule="MP207",
        )
        == []
    )


def test_buckets_too_small(tmp_path):
    buckets = [
        {
            "_id": i,
            "sensor": "s",
            "count": 2,
            "readings": [{"t": START + datetime.timedelta(seconds=j), "v": i + j / 10} for j in range(2)],
        }
        for i in range(30)
    ]
    [rec] = findings(report_of(tmp_path, {"buckets": buckets}), rule="MP207")
    assert rec.title == "Buckets too small" and rec.evidence["median_bucket_length"] == 2


def test_silent_on_healthy_collections(tmp_path):
    assert findings(report_of(tmp_path, {"things": healthy_collection()}), rule="MP207") == []


def test_buckets_too_large_in_bytes(tmp_path):

    report = report_of(tmp_path, {"buckets": bucket_documents(n=20, readings=120)})
    assert findings(report, rule="MP207") == []
    [rec] = findings(report, thresholds={"MP207": {"max_bucket_bytes": 2048}}, rule="MP207")
    assert rec.title == "Buckets too large" and "bytes" in rec.rationale


def test_subset_in_place_too_large(tmp_path):
    posts = [{"_id": i, "comments": [{"t": j} for j in range(150)], "commentsCount": 400} for i in range(30)]
    [rec] = findings(report_of(tmp_path, {"posts": posts}), rule="MP207")
    assert rec.title == "Subset too large" and rec.evidence["count_field"] == "commentsCount"


def test_lists_of_people_with_a_date_each_are_not_buckets(tmp_path):
    """A chat's participants and read receipts (a date per element, beside Mongoose's createdAt and
    updatedAt) are lists of people, not readings: no bucket in place, no 'buckets too small'."""
    chats = [
        {
            "_id": i,
            "createdAt": START + datetime.timedelta(hours=i),
            "updatedAt": START + datetime.timedelta(hours=i, minutes=5),
            "count": 3,
            "participants": [
                {"userId": f"u{i + j}", "role": "member", "joinedAt": START + datetime.timedelta(minutes=j)}
                for j in range(3)
            ],
            "readBy": [{"user": f"u{j}", "readAt": START + datetime.timedelta(minutes=j), "n": j} for j in range(2)],
        }
        for i in range(30)
    ]
    report = report_of(tmp_path, {"chats": chats})
    assert [p["pattern"] for p in report["collections"][0]["patterns_in_place"]] == []
    assert findings(report, rule="MP207") == []
    assert findings(report, rule="MP100") == []


def test_buckets_of_one_reading_are_too_small(tmp_path):
    """Bucketing one reading a station per window (the weather sample's cadence) leaves buckets of one:
    their count and window still make them buckets, and MP207 says they are too small."""
    buckets = [
        {
            "_id": {"s": f"st{i}", "w": START, "n": 0},
            "station": f"st{i}",
            "start": START,
            "end": START + datetime.timedelta(hours=1),
            "count": 1,
            "min": {"t": i / 10},
            "max": {"t": i / 10},
            "readings": [{"_id": i, "ts": START + datetime.timedelta(minutes=i % 60), "t": i / 10}],
        }
        for i in range(40)
    ]
    report = report_of(tmp_path, {"data": buckets})
    [rec] = findings(report, rule="MP207")
    assert rec.title == "Buckets too small" and rec.evidence["median_bucket_length"] == 1
