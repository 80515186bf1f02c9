"""The access-pattern file: the documented shape parses, every mistake gets file:line:column."""

import contextlib
import json
from importlib import resources

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mongopat.access import AccessFileError, load_access_file, parse_access_text, parse_rate
from mongopat.errors import InputError
from tests.support.paths import SAMPLE_CONFIGS

ISSUE_EXAMPLE = """\
version: 1
database: shop
collections:
  orders:
    writes: {inserts_per_sec: 10, updates_per_sec: 1}
    queries:
      - name: order_list
        filter: {customerId: eq, createdAt: range}
        sort: {createdAt: -1}
        limit: 20
        fields: [createdAt, total]
        derive: {total: "sum(items.price * items.qty)"}
        per_sec: 300
      - name: with_company
        lookup: {from: companies, local: companyId, foreign: _id, fields: [name, logo]}
        per_sec: 400
      - name: dashboard
        filter: {_id: eq}
        aggregate: {from: deals, local: _id, foreign: accountId,
                    compute: {total: {sum: amount}, open: {count: {status: open}}}}
        per_sec: 200
      - name: post_page
        filter: {_id: eq}
        embed: {field: comments, sort: {createdAt: -1}, limit: 10}
        per_sec: 800
    counters:
      - {field: likes, increments_per_sec: 3000, exact: false}
    history: {keep_versions: true, restore: true}
"""

SCHEMA = json.loads(resources.files("mongopat.access").joinpath("access-file.schema.json").read_text())


def parse(text, known=("companies", "deals")):
    return parse_access_text(text, "access.yaml", known)


def problems(text, known=("companies", "deals")):
    with pytest.raises(AccessFileError) as info:
        parse(text, known)
    return info.value.problems


def test_the_documented_example_parses():
    access = parse(ISSUE_EXAMPLE)
    orders = access.collection("orders")
    assert orders.writes.inserts_per_sec == 10
    names = [q.name for q in orders.queries]
    assert names == ["order_list", "with_company", "dashboard", "post_page"]
    order_list = orders.queries[0]
    assert order_list.filter == {"customerId": "eq", "createdAt": "range"}
    assert order_list.derive["total"].paths() == ["items.price", "items.qty"]
    assert orders.queries[1].lookup.source == "companies" and orders.queries[1].lookup.fields == ["name", "logo"]
    assert orders.queries[2].aggregate.compute == {"total": {"sum": "amount"}, "open": {"count": {"status": "open"}}}
    assert orders.queries[3].embed.limit == 10
    assert orders.counters[0].exact is False and orders.history.restore is True


def test_the_example_and_every_sample_validate_against_the_json_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.validate(yaml.safe_load(ISSUE_EXAMPLE), SCHEMA)
    # From the repository, not the working directory: run from elsewhere, the loop must still see them.
    samples = sorted((SAMPLE_CONFIGS).glob("*/access.yaml"))
    assert len(samples) >= 7, samples
    for path in samples:
        jsonschema.validate(yaml.safe_load(path.read_text()), SCHEMA)
        load_access_file(path, known_collections=[p.stem for p in path.parent.glob("*/*.json")])


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        (300, 300),
        (2.5, 2.5),
        ("300/s", 300),
        ("5/min", 5 / 60),
        ("2k/h", 2000 / 3600),
        ("1.5M/day", 1.5e6 / 86400),
        ("3 / hr", 3 / 3600),
    ],
)
def test_rates(text, rate):
    assert parse_rate(text) == pytest.approx(rate)


@pytest.mark.parametrize("bad", [-1, "-5/s", "fast", "5/week", True, None, [1]])
def test_bad_rates(bad):
    with pytest.raises(ValueError):
        parse_rate(bad)


def test_unknown_key_with_did_you_mean_and_position():
    found = problems("version: 1\ncollections:\n  orders:\n    queries:\n      - name: q\n        filtr: {a: eq}\n")
    assert found == ["access.yaml:6:9: collections.orders.queries.q.filtr: unknown key (did you mean 'filter'?)"]


def test_wrong_type_negative_rate_and_bad_operator_are_all_reported():
    text = (
        "version: 1\ncollections:\n  orders:\n    writes: {inserts_per_sec: -3}\n    queries:\n"
        "      - name: q\n        limit: many\n        filter: {a: equals}\n"
    )
    found = problems(text)
    assert any("4:31" in p and "cannot be negative" in p for p in found)
    assert any("7:16" in p and "limit" in p and "whole number" in p for p in found)
    assert any("8:21" in p and "unknown operator 'equals'" in p and "one of: eq" in p for p in found)


def test_lookup_target_must_exist_in_the_file_or_the_data():
    text = "version: 1\ncollections:\n  orders:\n    queries:\n      - name: j\n        lookup: {from: companys, local: c}\n"
    found = problems(text, known=("companies",))
    assert "neither in the file nor in the data (did you mean 'companies'?)" in found[0]
    assert found[0].startswith("access.yaml:5:9")


def test_malformed_yaml_names_line_and_column():
    found = problems("version: 1\ncollections:\n  orders: {writes: [\n")
    assert found[0].startswith("access.yaml:4:1: not valid YAML")


def test_version_and_required_keys():
    assert "unsupported version 2" in problems("version: 2\ncollections: {}\n")[0]
    assert "missing required key 'collections'" in problems("version: 1\n")[0]
    assert "the file is empty" in problems("")[0]
    assert "expected a mapping" in problems("- a\n- b\n")[0]


def test_bad_expression_and_duplicate_query_names():
    text = (
        "version: 1\ncollections:\n  c:\n    queries:\n      - {name: a, derive: {t: 'total(items.x)'}}\n"
        "      - {name: a}\n"
    )
    found = problems(text)
    assert any("unknown function 'total'" in p for p in found)
    assert any("duplicate query name 'a'" in p for p in found)


def test_yaml_tags_that_build_objects_are_refused():
    found = problems("version: !!python/object/apply:os.system ['echo pwned']\ncollections: {}\n")
    assert found == [
        "access.yaml:1:10: (tag): unsupported YAML tag 'tag:yaml.org,2002:python/object/apply:os.system': "
        "only plain YAML values are read"
    ]


def test_thresholds_section_is_validated():
    access = parse(
        "version: 1\ncollections: {}\nthresholds:\n  MP201: {warn_length: 50}\n  outlier: {tail_factor: 4}\n"
    )
    assert access.thresholds == {"MP201": {"warn_length": 50.0}, "MP102": {"tail_factor": 4.0}}
    assert "unknown rule" in problems("version: 1\ncollections: {}\nthresholds:\n  MP999: {x: 1}\n")[0]
    assert (
        "did you mean 'warn_length'"
        in problems("version: 1\ncollections: {}\nthresholds:\n  MP201: {warn_lenght: 1}\n")[0]
    )


def test_missing_file():
    with pytest.raises(InputError, match="not found"):
        load_access_file("/no/such/access.yaml")


KEYS = st.sampled_from(
    [
        "version",
        "collections",
        "orders",
        "queries",
        "name",
        "filter",
        "per_sec",
        "lookup",
        "from",
        "embed",
        "limit",
        "writes",
        "inserts_per_sec",
        "counters",
        "history",
        "derive",
        "aggregate",
        "compute",
        "x",
        "eq",
        "-1",
        "1",
    ]
)
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True), st.text(max_size=8), KEYS)
TREES = st.recursive(
    LEAVES,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(KEYS, children, max_size=4)),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TREES)
def test_any_malformed_structure_gives_a_clean_error(tree):
    text = yaml.safe_dump({"version": 1, "collections": {"orders": tree}}, default_flow_style=True)
    with contextlib.suppress(InputError):
        parse(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_gives_a_clean_error(text):
    with contextlib.suppress(InputError):
        parse(text)


def test_the_access_file_is_checked_against_the_data(tmp_path):
    """A collection the data lacks is an input error naming the nearest one (exit 2), unless the file
    says a migration creates it; a field no document holds is a warning naming the nearest path."""
    from typer.testing import CliRunner

    from mongopat.cli import app
    from tests.support.dumps import write_export

    data = tmp_path / "shop"
    write_export(data, "orders", [{"_id": i, "customerId": i % 7, "items": [{"sku": "a"}]} for i in range(20)])
    typo = tmp_path / "typo.yaml"
    typo.write_text("version: 1\ncollections:\n  order:\n    queries:\n      - {name: q, filter: {_id: eq}}\n")
    result = CliRunner().invoke(app, ["recommend", "--dump", str(data), "--access", str(typo)])
    assert result.exit_code == 2
    assert "collections.order: not in the data (did you mean 'orders'?)" in result.output
    assert f"{typo}:" in result.output  # file and line
    created = tmp_path / "created.yaml"
    created.write_text(
        "version: 1\ncollections:\n  order_totals:\n    created_by_migration: true\n  orders:\n    queries:\n"
        "      - {name: q, filter: {customerID: eq, items.sku: eq, items.qty: eq}, per_sec: 3}\n"
    )
    result = CliRunner().invoke(app, ["recommend", "--dump", str(data), "--access", str(created), "-f", "json"])
    assert result.exit_code == 0, result.output
    notes = json.loads(result.stdout)["notes"]
    assert any(
        "field 'customerID' of orders is in no document" in n and "did you mean 'customerId'" in n for n in notes
    )
    assert any("field 'items.qty'" in n for n in notes)
    assert not any("items.sku" in n for n in notes)  # a path through an array, held by the data
