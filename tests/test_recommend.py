"""``mongopat recommend`` end to end: the sample scenarios, the output formats, the errors."""

import json

import pytest
from typer.testing import CliRunner

from mongopat import command
from mongopat.cli import app
from mongopat.sample_data import SCENARIOS, write_scenario
from mongopat.sources import SourceSpec
from tests.support.evidence import findings, healthy_collection, report_of
from tests.support.paths import SAMPLE_CONFIGS

runner = CliRunner()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_each_sample_scenario_gets_the_recommendations_it_calls_for(name):
    scenario = SCENARIOS[name]()
    folder = SAMPLE_CONFIGS / name
    report = command.analyze(SourceSpec(dump=str(folder)))
    result = command.recommend(report, str(folder / "access.yaml"))
    found = {(r["code"], r["collection"]) for r in result["recommendations"]}
    assert set(scenario.expected) <= found, f"missing: {set(scenario.expected) - found}"
    for healthy in scenario.healthy:
        assert not [r for r in result["recommendations"] if r["collection"] == healthy], healthy


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_committed_samples_match_the_generator(name, tmp_path):
    write_scenario(SCENARIOS[name](), tmp_path)
    for generated in sorted(tmp_path.rglob("*.*")):
        committed = SAMPLE_CONFIGS / name / generated.relative_to(tmp_path)
        assert committed.read_bytes() == generated.read_bytes(), f"{committed} is stale: regenerate sample_configs"


def test_healthy_data_gets_no_recommendation_from_any_rule(tmp_path):
    access = (
        "version: 1\ncollections:\n  things:\n    writes: {inserts_per_sec: 0.1}\n    queries:\n"
        "      - {name: by_name, filter: {name: eq}, per_sec: 5}\n"
    )
    assert findings(report_of(tmp_path, {"things": healthy_collection()}), access) == []


def test_every_recommendation_carries_the_documented_keys():
    folder = SAMPLE_CONFIGS / "ecommerce"
    report = command.analyze(SourceSpec(dump=str(folder)))
    result = command.recommend(report, str(folder / "access.yaml"))
    keys = {
        "code",
        "pattern",
        "kind",
        "collection",
        "fields",
        "severity",
        "confidence",
        "title",
        "evidence",
        "rationale",
        "tradeoffs",
        "migration",
        "prediction",
        "index_steps",
    }
    for rec in result["recommendations"]:
        assert set(rec) == keys
        # Every migration carries its prediction, each collection's figures with a basis.
        assert bool(rec["migration"]) == bool(rec["prediction"])
        for predicted in (rec["prediction"] or {}).get("collections", []):
            assert predicted["basis"] and predicted["after"] and predicted["before"]["documents"] >= 0
        assert 0 <= rec["confidence"] <= 1 and rec["severity"] in ("info", "warning", "error")
        assert rec["evidence"] and rec["rationale"]
        if rec["kind"] == "pattern" and rec["collection"]:
            assert rec["migration"] and rec["migration"]["collection"] == rec["collection"]
    severities = [r["severity"] for r in result["recommendations"]]
    order = {"error": 0, "warning": 1, "info": 2}
    assert severities == sorted(severities, key=order.get)


def test_cli_json_from_a_saved_report(tmp_path):
    report_path = tmp_path / "report.json"
    dump = str(SAMPLE_CONFIGS / "iot")
    assert runner.invoke(app, ["analyze", "--dump", dump, "-o", str(report_path), "-q"]).exit_code == 0
    result = runner.invoke(
        app,
        ["recommend", "--report", str(report_path), "--access", str(SAMPLE_CONFIGS / "iot/access.yaml"), "-f", "json"],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["recommendations_version"] == 2 and data["summary"]["total"] == len(data["recommendations"])
    assert data["recommendations"][0]["pattern"] == "time_series_collection"


def test_cli_table_and_markdown(tmp_path):
    args = ["recommend", "--dump", str(SAMPLE_CONFIGS / "blog"), "--access", str(SAMPLE_CONFIGS / "blog/access.yaml")]
    table = runner.invoke(app, args)
    assert table.exit_code == 0 and "MP103" in table.output and "subset" in table.output
    markdown = runner.invoke(app, [*args, "-f", "markdown"])
    assert markdown.exit_code == 0
    assert markdown.stdout.startswith("## mongopat:") and "| severity | code |" in markdown.stdout
    assert "```yaml" in markdown.stdout


def test_cli_without_access_file_reports_data_evident_patterns_only():
    result = runner.invoke(app, ["recommend", "--dump", str(SAMPLE_CONFIGS / "iot"), "-f", "json"])
    codes = {r["code"] for r in json.loads(result.stdout)["recommendations"]}
    assert codes == {"MP113"}


def test_cli_threshold_override_and_rule_filter():
    args = ["recommend", "--dump", str(SAMPLE_CONFIGS / "iot"), "-f", "json"]
    assert (
        json.loads(runner.invoke(app, [*args, "-t", "time_series_collection.min_documents=100000"]).stdout)[
            "recommendations"
        ]
        == []
    )
    only = json.loads(runner.invoke(app, [*args, "--rule", "MP201"]).stdout)
    assert only["recommendations"] == []


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["-t", "MP999.x=1"], "unknown rule"),
        (["-t", "MP201.nope=1"], "has no threshold 'nope'"),
        (["-t", "MP201.warn_length=lots"], "is not a number"),
        (["--rule", "nosuch"], "unknown rule nosuch"),
        (["--access", "/no/such.yaml"], "not found"),
        (["-f", "html"], "is not one of"),
    ],
)
def test_cli_input_errors_exit_2(extra, message):
    result = runner.invoke(app, ["recommend", "--dump", str(SAMPLE_CONFIGS / "iot"), *extra])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_cli_invalid_access_file_lists_every_problem(tmp_path):
    bad = tmp_path / "access.yaml"
    bad.write_text("version: 1\ncollections:\n  readings:\n    writes: {inserts_per_sec: -1}\n    querys: []\n")
    result = runner.invoke(app, ["recommend", "--dump", str(SAMPLE_CONFIGS / "iot"), "--access", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}:4:31" in result.output and "did you mean 'queries'" in result.output


def test_access_file_for_another_database_is_noted(tmp_path):
    """Staging and production copies differ in name: noted, and used. Its collections must be in the data."""
    other = tmp_path / "access.yaml"
    other.write_text(
        (SAMPLE_CONFIGS / "wiki/access.yaml").read_text().replace("database: wiki", "database: wiki_staging")
    )
    args = ["recommend", "--dump", str(SAMPLE_CONFIGS / "wiki"), "--access", str(other), "-f", "json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert any("describes database 'wiki_staging'" in note for note in json.loads(result.stdout)["notes"])


def test_an_access_file_of_other_collections_is_an_input_error():
    args = [
        "recommend",
        "--dump",
        str(SAMPLE_CONFIGS / "wiki"),
        "--access",
        str(SAMPLE_CONFIGS / "blog/access.yaml"),
        "-f",
        "json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "collections.posts: not in the data" in result.output


def test_rules_listing():
    result = runner.invoke(app, ["rules", "-f", "json"])
    rules = json.loads(result.stdout)["rules"]
    assert [r["name"] for r in rules if r["kind"] == "in-place"] == ["in_place"]
    assert len(rules) == 25 and {r["name"] for r in rules if r["kind"] == "pattern"} == {
        "bucket",
        "outlier",
        "subset",
        "computed",
        "pre_aggregation",
        "extended_reference",
        "attribute",
        "polymorphic",
        "schema_versioning",
        "document_versioning",
        "tree",
        "approximation",
        "time_series_collection",
    }
    assert all(r["description"] for r in rules)


def test_one_rule_in_full_by_code_or_name():
    listed = runner.invoke(app, ["rules"], env={"COLUMNS": "80"})
    assert listed.exit_code == 0 and "MP210" in listed.output and "mongopat rules MP101" in listed.output
    assert max(len(line) for line in listed.output.splitlines()) <= 80
    for name in ("MP210", "missing_index", "mp210"):
        one = runner.invoke(app, ["rules", name], env={"COLUMNS": "80"})
        assert one.exit_code == 0 and one.output.startswith("MP210 missing_index"), one.output
        assert "threshold min_ratio = 10" in one.output and "``" not in one.output
    as_json = json.loads(runner.invoke(app, ["rules", "MP211", "-f", "json"]).stdout)["rules"]
    assert [r["code"] for r in as_json] == ["MP211"]
    unknown = runner.invoke(app, ["rules", "MP999"])
    assert unknown.exit_code == 2 and "did you mean" in unknown.output
