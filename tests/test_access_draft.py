"""``mongopat access draft``: logs, top, $queryStats and the profiler, turned into an access file."""

import datetime
import gzip
import json
from pathlib import Path

import pytest
from bson import ObjectId
from pymongo.errors import OperationFailure
from typer.testing import CliRunner

from mongopat import command
from mongopat.access import parse_access_text
from mongopat.cli import app
from mongopat.draft.build import rate_value, round_rate
from mongopat.draft.server import probe_server
from mongopat.draft.shapes import WriteShape, filter_fields, shape_of_command
from mongopat.sources import SourceSpec
from tests.support.paths import SAMPLE_CONFIGS

runner = CliRunner()
START = datetime.datetime(2026, 11, 30, 10, 0, tzinfo=datetime.timezone.utc)


def log_line(seconds: float, attr: dict, msg: str = "Slow query", id_: int = 51803) -> str:
    when = (START + datetime.timedelta(seconds=seconds)).isoformat(timespec="milliseconds")
    entry = {"t": {"$date": when}, "s": "I", "c": "COMMAND", "id": id_, "ctx": "conn7", "msg": msg, "attr": attr}
    return json.dumps(entry)


def find_attr(customer: str, examined=20, plan="IXSCAN { customerId: 1, createdAt: -1 }", millis=112):
    return {
        "type": "command",
        "ns": "shop.orders",
        "appName": "shop-api",
        "command": {
            "find": "orders",
            "filter": {"customerId": {"$oid": customer}, "createdAt": {"$gte": {"$date": "2026-01-01T00:00:00Z"}}},
            "sort": {"createdAt": -1},
            "limit": 20,
            "projection": {"createdAt": 1, "total": 1},
            "lsid": {"id": "x"},
            "$db": "shop",
        },
        "planSummary": plan,
        "keysExamined": examined,
        "docsExamined": examined,
        "cursorExhausted": True,
        "nreturned": 20,
        "reslen": 4012,
        "protocol": "op_msg",
        "durationMillis": millis,
    }


def write_log(path: Path, lines: list[str], compress=False) -> Path:
    data = "\n".join(lines) + "\n"
    if compress:
        with gzip.open(path, "wt") as handle:
            handle.write(data)
    else:
        path.write_text(data)
    return path


def shop_log(tmp_path, compress=False) -> Path:
    lines = []
    for i in range(120):  # 120 finds over 60 s: 2/s
        lines.append(log_line(i / 2, find_attr(str(ObjectId()), millis=100 + i)))
    for i in range(30):  # a collection scan continued by getMore
        lines.append(
            log_line(
                i * 2,
                {
                    "type": "command",
                    "ns": "shop.orders",
                    "command": {"getMore": {"$numberLong": "88"}, "collection": "orders", "$db": "shop"},
                    "originatingCommand": {"find": "orders", "filter": {"status": "new"}, "$db": "shop"},
                    "planSummary": "COLLSCAN",
                    "docsExamined": 50000,
                    "nreturned": 101,
                    "durationMillis": 400,
                },
            )
        )
    for i in range(60):
        lines.append(
            log_line(
                i,
                {
                    "type": "update",
                    "ns": "shop.orders",
                    "command": {"q": {"_id": 1}, "u": {"$set": {"s": 1}}},
                    "planSummary": "IDHACK",
                    "docsExamined": 1,
                    "nreturned": 0,
                    "durationMillis": 120,
                },
            )
        )
    lines.append(
        log_line(
            1,
            {
                "type": "command",
                "ns": "shop.orders",
                "command": {"insert": "orders", "$db": "shop"},
                "ninserted": 1,
                "durationMillis": 150,
            },
        )
    )
    lines.append(log_line(2, {"remote": "10.1.1.1:5000"}, msg="Connection accepted", id_=22943))
    lines.append(
        '{"t":{"$date":"2026-11-30T10:00:03.000+00:00"},"s":"I","c":"COMMAND","id":51803,"attr":{"ns":"shop.or'
    )
    lines.append("not json at all")
    return write_log(tmp_path / ("mongod.log.gz" if compress else "mongod.log"), lines, compress)


# -- shapes ---------------------------------------------------------------------------------------


def test_values_are_stripped_and_operators_kept():
    assert filter_fields(
        {
            "a": 5,
            "b": {"$gte": 1, "$lt": 9},
            "c": {"$in": [1, 2]},
            "d": {"$regex": "^x"},
            "$or": [{"e": 1}, {"f": {"$exists": True}}],
            "$text": {"$search": "x"},
            "g": {"x": 1},
        }
    ) == {"a": "eq", "b": "range", "c": "in", "d": "regex", "e": "eq", "f": "exists", "$text": "text", "g": "eq"}
    one = shape_of_command({"find": "o", "filter": {"a": 1, "b": {"$gt": 2}}, "sort": {"b": -1}, "limit": 5})
    two = shape_of_command({"find": "o", "filter": {"b": {"$gt": 99}, "a": 7}, "sort": {"b": -1}, "limit": 5})
    assert one == two and one.filter_dict() == {"a": "eq", "b": "range"}


def test_aggregate_shapes_keep_lookups_and_groups():
    shape = shape_of_command(
        {
            "aggregate": "deals",
            "pipeline": [
                {"$match": {"accountId": 1}},
                {"$group": {"_id": "$accountId", "total": {"$sum": "$amount"}, "n": {"$sum": 1}}},
            ],
        }
    )
    assert shape.group.key == "accountId" and shape.group.compute == (("total", "sum", "amount"), ("n", "count", True))
    joined = shape_of_command(
        {
            "aggregate": "c",
            "pipeline": [{"$lookup": {"from": "x", "localField": "xId", "foreignField": "_id", "as": "x"}}],
        }
    )
    assert joined.lookups[0].source == "x" and joined.lookups[0].local == "xId"
    assert shape_of_command({"insert": "o"}) == WriteShape("insert", "o")
    assert shape_of_command({"q": {}, "u": {}}, "o") == WriteShape("update", "o")
    assert shape_of_command({"ping": 1}) is None


def test_rates_are_rounded_sensibly():
    assert round_rate(1234.5) == 1200 and round_rate(0.01234) == 0.012 and round_rate(2.04) == 2.0
    assert rate_value(300.4) == 300 and rate_value(0.5) == "30/min" and rate_value(0.001) == "3.6/h"
    assert rate_value(1e-6) == "0.086/day"


# -- logs -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("compress", [False, True])
def test_log_draft_groups_by_shape_and_computes_rates(tmp_path, compress):
    draft = command.draft_access(SourceSpec(), [str(shop_log(tmp_path, compress))])
    orders = draft.collections["orders"]
    by_filter = {tuple(sorted(q.spec.get("filter", {}))): q for q in orders.queries}
    history = by_filter[("createdAt", "customerId")]
    assert (
        history.spec["sort"] == {"createdAt": -1}
        and history.spec["limit"] == 20
        and history.spec["fields"] == ["createdAt", "total"]
    )
    assert history.per_sec == pytest.approx(120 / 60.5, rel=0.02)
    assert "120 executions over 60 s in log" in history.comment and "p95 2" in history.comment
    scan = by_filter[("status",)]
    assert any("COLLSCAN" in f for f in scan.flags) and any("examines" in f for f in scan.flags)
    assert orders.writes["updates_per_sec"] == pytest.approx(60 / 60.5, rel=0.02)
    assert "lower bound" in orders.writes_comment
    log_status = draft.statuses[0]
    assert log_status.name == "log" and "2 malformed lines skipped" in log_status.detail


def test_drafted_yaml_is_a_valid_access_file(tmp_path):
    draft = command.draft_access(SourceSpec(), [str(shop_log(tmp_path))])
    from mongopat.draft.render import to_yaml

    text = to_yaml(draft)
    access = parse_access_text(text, "draft.yaml")
    assert access.database == "shop" and access.collection("orders").queries
    assert "# FLAG: collection scan (COLLSCAN)" in text


def test_logs_of_several_databases_need_db(tmp_path):
    log = shop_log(tmp_path)
    other = find_attr(str(ObjectId()))
    other["ns"] = "crm.orders"
    with log.open("a") as handle:
        handle.write(log_line(5, other) + "\n")
    with pytest.raises(Exception, match="several databases"):
        command.draft_access(SourceSpec(), [str(log)])
    assert command.draft_access(SourceSpec(db="crm"), [str(log)]).database == "crm"


# -- server sources (a client shaped like the documented outputs) -------------------------------


class FakeAdmin:
    def __init__(self, refuse=False):
        self.readings = [
            {
                "totals": {
                    "note": "all times in microseconds",
                    "shop.orders": {
                        "queries": {"count": 100},
                        "insert": {"count": 10},
                        "update": {"count": 5},
                        "remove": {"count": 0},
                        "commands": {"count": 3},
                    },
                    "shop.system.profile": {},
                },
                "ok": 1,
            },
            {
                "totals": {
                    "shop.orders": {
                        "queries": {"count": 400},
                        "insert": {"count": 110},
                        "update": {"count": 15},
                        "remove": {"count": 0},
                        "commands": {"count": 3},
                    },
                    "other.x": {"queries": {"count": 9}},
                },
                "ok": 1,
            },
        ]
        self.refuse = refuse

    def command(self, name, *args, **kwargs):
        if self.refuse:
            raise OperationFailure("not authorized on admin to execute command { top: 1 }", code=13)
        return self.readings.pop(0)

    def aggregate(self, pipeline, **kwargs):
        if self.refuse:
            raise OperationFailure("Unrecognized pipeline stage name: '$queryStats'", code=40324)
        first = datetime.datetime(2026, 11, 30, 9, 0)
        return [
            {
                "key": {
                    "queryShape": {
                        "cmdNs": {"db": "shop", "coll": "customers"},
                        "command": "find",
                        "filter": {"email": {"$eq": "?string"}},
                    }
                },
                "metrics": {
                    "execCount": 3600,
                    "totalExecMicros": {"sum": 3600 * 2000, "max": 90000},
                    "docsExamined": {"sum": 3600},
                    "docsReturned": {"sum": 3600},
                    "firstSeenTimestamp": first,
                    "latestSeenTimestamp": first + datetime.timedelta(hours=1),
                },
            },
            {"key": {"queryShape": {"cmdNs": {"db": "other", "coll": "x"}, "command": "find"}}, "metrics": {}},
        ]


class FakeDatabase:
    def __init__(self, level=1):
        self.level = level

    def command(self, name, value):
        return {"was": self.level, "slowms": 100}

    def __getitem__(self, name):
        return self

    def find(self, *args, **kwargs):
        if not self.level:
            return []
        ts = datetime.datetime(2026, 11, 30, 9, 0)
        entries = [
            {
                "op": "query",
                "ns": "shop.orders",
                "command": {"find": "orders", "filter": {"status": "new"}},
                "docsExamined": 9000,
                "nreturned": 3,
                "millis": 250,
                "planSummary": "COLLSCAN",
                "ts": ts + datetime.timedelta(seconds=i),
            }
            for i in range(61)
        ]
        entries.append({"op": "insert", "ns": "shop.orders", "command": {"insert": "orders"}, "ts": ts, "millis": 120})
        return entries


class FakeClient:
    def __init__(self, refuse=False, level=1):
        self.admin = FakeAdmin(refuse)
        self.database = FakeDatabase(level)

    def __getitem__(self, name):
        return self.database


def test_server_sources_give_rates_and_shapes():
    evidence = probe_server(FakeClient(), "shop", interval=10, sleep=lambda s: None)
    assert [s.name for s in evidence.statuses] == ["top", "$queryStats", "system.profile"]
    assert all(s.used for s in evidence.statuses)
    rates = evidence.rates["orders"]
    assert (
        rates.inserts_per_sec == pytest.approx(10)
        and rates.reads_per_sec == pytest.approx(30)
        and "system.profile" not in evidence.rates
    )
    shapes = {(o.source, o.shape.collection) for o, _ in evidence.observations}
    assert ("$queryStats", "customers") in shapes and ("system.profile", "orders") in shapes
    stats = next(o for o, span in evidence.observations if o.source == "$queryStats")
    assert stats.count == 3600 and stats.durations_ms == [2.0, 90.0]


def test_refused_sources_name_the_privilege_and_the_others_continue():
    evidence = probe_server(FakeClient(refuse=True, level=0), "shop", interval=1, sleep=lambda s: None)
    top, stats, profile = evidence.statuses
    assert not top.used and "clusterMonitor" in top.detail
    assert not stats.used and "7.1+" in stats.detail
    assert not profile.used and "setProfilingLevel(1)" in profile.detail


def test_server_draft_merges_top_rates_with_shapes():
    from mongopat.draft.build import build_draft

    evidence = probe_server(FakeClient(), "shop", interval=10, sleep=lambda s: None)
    draft = build_draft("shop", evidence, None, {}, evidence.statuses)
    orders = draft.collections["orders"]
    assert orders.writes["inserts_per_sec"] == pytest.approx(10) and orders.writes_comment.startswith("top")
    customers = draft.collections["customers"].queries[0]
    assert customers.per_sec == pytest.approx(1.0) and "3,600 executions over 1 h in $queryStats" in customers.comment


# -- CLI and the round trip -----------------------------------------------------------------------


def crm_log(tmp_path) -> Path:
    lines = []
    for i in range(600):  # 10/s over a minute: contacts with their company
        lines.append(
            log_line(
                i / 10,
                {
                    "type": "command",
                    "ns": "crm.contacts",
                    "command": {
                        "aggregate": "contacts",
                        "pipeline": [
                            {"$match": {"_id": {"$oid": str(ObjectId())}}},
                            {
                                "$lookup": {
                                    "from": "companies",
                                    "localField": "companyId",
                                    "foreignField": "_id",
                                    "as": "company",
                                }
                            },
                            {"$project": {"name": 1, "company.name": 1, "company.logo": 1}},
                        ],
                        "$db": "crm",
                    },
                    "planSummary": "IXSCAN { _id: 1 }",
                    "docsExamined": 2,
                    "nreturned": 1,
                    "durationMillis": 101,
                },
            )
        )
        lines.append(
            log_line(
                i / 10,
                {
                    "type": "command",
                    "ns": "crm.deals",
                    "command": {
                        "aggregate": "deals",
                        "pipeline": [
                            {"$match": {"accountId": {"$oid": str(ObjectId())}}},
                            {"$group": {"_id": "$accountId", "total": {"$sum": "$amount"}, "deals": {"$sum": 1}}},
                        ],
                        "$db": "crm",
                    },
                    "planSummary": "IXSCAN { accountId: 1 }",
                    "docsExamined": 15,
                    "nreturned": 1,
                    "durationMillis": 130,
                },
            )
        )
    return write_log(tmp_path / "crm.log", lines)


def test_round_trip_draft_then_recommend(tmp_path):
    target = tmp_path / "access.yaml"
    result = runner.invoke(
        app,
        [
            "access",
            "draft",
            "--dump",
            str(SAMPLE_CONFIGS / "crm"),
            "--log",
            str(crm_log(tmp_path)),
            "-o",
            str(target),
            "-q",
        ],
    )
    assert result.exit_code == 0, result.output
    text = target.read_text()
    assert "lookup: {from: companies, local: companyId, foreign: _id, fields: [logo, name], as: company}" in text
    assert "aggregate: {from: deals, local: _id, foreign: accountId" in text
    advice = runner.invoke(
        app, ["recommend", "--dump", str(SAMPLE_CONFIGS / "crm"), "--access", str(target), "-f", "json"]
    )
    assert advice.exit_code == 0, advice.output
    found = {(r["code"], r["collection"]) for r in json.loads(advice.stdout)["recommendations"]}
    assert {("MP105", "accounts"), ("MP106", "contacts")} <= found


def test_cli_json_and_flags(tmp_path):
    result = runner.invoke(app, ["access", "draft", "--log", str(shop_log(tmp_path)), "-f", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["database"] == "shop" and data["sources"][0]["name"] == "log"
    assert any(f["flag"].startswith("collection scan") for f in data["flags"])
    assert data["access_yaml"].startswith("# Drafted by mongopat")


def test_cli_exits_1_when_no_source_gives_evidence(tmp_path):
    empty = write_log(tmp_path / "quiet.log", [log_line(0, {"remote": "x"}, msg="Connection accepted", id_=22943)])
    result = runner.invoke(app, ["access", "draft", "--log", str(empty), "--db", "shop"])
    assert result.exit_code == 1 and "setProfilingLevel(1)" in result.output


def test_cli_missing_log_and_no_source():
    assert runner.invoke(app, ["access", "draft", "--log", "/no/such.log", "--db", "x"]).exit_code == 2
    result = runner.invoke(app, ["access", "draft"])
    assert result.exit_code == 2 and "nothing to draft from" in result.output


def test_draft_on_a_live_source_never_writes(mongo):
    mongo.db.orders.insert_many([{"_id": ObjectId(), "x": i} for i in range(5)])
    before = {name: list(mongo.db[name].find()) for name in mongo.db.list_collection_names()}
    result = runner.invoke(app, ["access", "draft", *mongo.cli_args(), "--top-interval", "0.1", "-f", "json"])
    assert result.exit_code in (0, 1), result.output
    after = {name: list(mongo.db[name].find()) for name in mongo.db.list_collection_names()}
    assert before == after


def deals_only_log(tmp_path) -> Path:
    """A third of the log is a $match + $group over deals by accountId; no query names the accounts."""
    lines = []
    for i in range(90):
        command_ = (
            {
                "aggregate": "deals",
                "pipeline": [
                    {"$match": {"accountId": {"$oid": str(ObjectId())}}},
                    {"$group": {"_id": "$accountId", "total": {"$sum": "$amount"}, "deals": {"$sum": 1}}},
                ],
                "$db": "crm",
            }
            if i % 3 == 0
            else {"find": "contacts", "filter": {"email": f"x{i}@y"}, "$db": "crm"}
        )
        attr = {"type": "command", "ns": f"crm.{command_.get('aggregate') or command_['find']}", "command": command_,
                "planSummary": "IXSCAN { x: 1 }", "docsExamined": 5, "nreturned": 1, "durationMillis": 120}  # fmt: skip
        lines.append(log_line(i / 10, attr))  # 90 slow queries in 9 s: groups at about 3/s
    return write_log(tmp_path / "deals.log", lines)


def test_a_group_with_no_known_parent_stays_under_the_collection_it_reads(tmp_path):
    draft = command.draft_access(SourceSpec(), [str(deals_only_log(tmp_path))])
    [grouped] = draft.collections["deals"].queries
    assert grouped.spec["filter"] == {"accountId": "eq"} and grouped.spec["fields"] == ["accountId", "amount"]
    assert "$group by accountId computing total = sum(amount), deals = count" in grouped.comment
    from mongopat.draft.render import to_yaml

    parse_access_text(to_yaml(draft), "draft.yaml")  # still a valid access file


def test_a_group_is_attached_by_the_measured_reference_not_by_name(tmp_path):
    import shutil

    crm = tmp_path / "crm"
    shutil.copytree(SAMPLE_CONFIGS / "crm" / "crm", crm)
    (crm / "accounts.json").rename(crm / "crm_accounts.json")
    # A collection named like the key that the key does not refer to.
    (crm / "accounts.json").write_text("".join(f'{{"_id": "a{i}", "name": "other"}}\n' for i in range(5)))
    draft = command.draft_access(SourceSpec(dump=str(crm)), [str(deals_only_log(tmp_path))])
    [grouped] = draft.collections["crm_accounts"].queries
    assert grouped.spec["aggregate"]["from"] == "deals" and grouped.spec["aggregate"]["foreign"] == "accountId"
    assert "attached to crm_accounts by the measured reference" in grouped.comment
    assert not draft.collections.get("accounts") or not draft.collections["accounts"].queries
    # Round trip: the drafted file is read back by recommend on the same data.
    target = tmp_path / "access.yaml"
    args = ["access", "draft", "--dump", str(crm), "--log", str(deals_only_log(tmp_path)), "-o", str(target), "-q"]
    assert runner.invoke(app, args).exit_code == 0
    advice = runner.invoke(app, ["recommend", "--dump", str(crm), "--access", str(target), "-f", "json"])
    assert advice.exit_code == 0, advice.output
    found = {(r["code"], r["collection"]) for r in json.loads(advice.stdout)["recommendations"]}
    assert ("MP105", "crm_accounts") in found
