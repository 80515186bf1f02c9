"""The ``validator`` migration step on both backends (a database of the ``mongo`` fixture, a dump folder),
``migrate plan --add-validators`` and its warnings, and the Python evaluation of ``$jsonSchema`` (checked
against the server's own on the server lane)."""

from __future__ import annotations

import json
import shutil

import pytest
from bson import Int64, ObjectId, json_util
from typer.testing import CliRunner

from mongopat.cli import app
from mongopat.errors import InputError, OperationFailed
from mongopat.json_schema import satisfies, validator_problem
from mongopat.migrate.dump_folder.runner import DumpRunner
from mongopat.migrate.runner import RunOptions
from mongopat.migrate.script import load_folder
from mongopat.migrate.server.runner import Runner
from tests.support.dumps import files, make_dump
from tests.support.migrations import STEPS, load, snapshot, write

runner = CliRunner()
NO_COLLMOD = "db.command('collMod', ...) and list_collections(): NotImplementedError in mongomock"
ORDERS_SCHEMA = {
    "$jsonSchema": {
        "bsonType": "object",
        "required": ["customerId", "items"],
        "properties": {"items": {"bsonType": "array"}, "total": {"bsonType": ["double", "int"]}},
    }
}
VALIDATOR_STEP = {
    "step": "validator",
    "collection": "orders",
    "validator": ORDERS_SCHEMA,
    "validation_level": "strict",
    "validation_action": "error",
}


def options(db, name: str) -> dict:
    return next(iter(db.list_collections(filter={"name": name})))["options"]


def run(db, folder, **extra):
    return Runner(db, load_folder(folder), RunOptions(lock_timeout=0.3, **extra))


def dump_run(data, folder):
    return DumpRunner(data, load_folder(folder), RunOptions(lock_timeout=0.3))


# -- the step on a database ----------------------------------------------------------------------------


@pytest.mark.diverges("mongomock", NO_COLLMOD)
def test_up_sets_the_validator_and_down_gives_back_the_previous_one(mongo, tmp_path):
    db = mongo.db
    load(db)
    previous = {"$jsonSchema": {"bsonType": "object", "required": ["_id"]}}
    db.command({"collMod": "orders", "validator": previous, "validationLevel": "moderate", "validationAction": "warn"})
    before = snapshot(db)
    folder = write(tmp_path / "m", "0001_validator", STEPS["computed"], VALIDATOR_STEP)
    assert run(db, folder).up()[0]["state"] == "applied"
    now = options(db, "orders")
    assert now["validator"] == ORDERS_SCHEMA and now["validationLevel"] == "strict"
    assert now["validationAction"] == "error"
    assert run(db, folder).verify() == {"0001_validator": []}
    with pytest.raises(Exception, match="failed validation|Document failed"):
        db.orders.insert_one({"_id": "bad", "customerId": 1})  # no items: rejected
    entry = db.mongopat_changelog.find_one({"_id": "0001_validator"})
    assert entry["steps"][1]["stats"]["violations"] == 0
    assert entry["steps"][1]["stats"]["previous"]["validationAction"] == "warn"
    assert run(db, folder).down() == ["0001_validator"]
    restored = options(db, "orders")
    assert restored["validator"] == previous and restored["validationLevel"] == "moderate"
    assert restored["validationAction"] == "warn"
    assert snapshot(db) == before


@pytest.mark.diverges("mongomock", NO_COLLMOD)
def test_down_of_a_first_validator_leaves_the_collection_without_one(mongo, tmp_path):
    db = mongo.db
    load(db)
    folder = write(tmp_path / "m", "0001_validator", VALIDATOR_STEP)
    run(db, folder).up()
    run(db, folder).down()
    assert options(db, "orders").get("validator") in (None, {})
    db.orders.insert_one({"_id": "free"})  # anything goes again


@pytest.mark.diverges("mongomock", NO_COLLMOD)
def test_down_leaves_a_validator_changed_since_up_as_it_is(mongo, tmp_path):
    db = mongo.db
    load(db)
    folder = write(tmp_path / "m", "0001_validator", VALIDATOR_STEP)
    run(db, folder).up()
    theirs = {"$jsonSchema": {"required": ["status"]}}
    db.command({"collMod": "orders", "validator": theirs})
    with pytest.raises(OperationFailed, match="changed since up"):
        run(db, folder).down()
    assert options(db, "orders")["validator"] == theirs


@pytest.mark.diverges("mongomock", NO_COLLMOD)
def test_a_run_stopped_after_collmod_keeps_the_first_previous_options(mongo, tmp_path, monkeypatch):
    """A crash between collMod and the step's 'applied' mark: the second run must not take the step's
    own validator for the previous one, or down could never give the original back."""
    db = mongo.db
    load(db)
    folder = write(tmp_path / "m", "0001_validator", VALIDATOR_STEP)
    from mongopat.migrate.operations import validator

    calls = {"n": 0}
    real = validator.Operation.apply

    def crash_after(self, step, catalog):
        real(self, step, catalog)
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyboardInterrupt("killed after collMod")

    monkeypatch.setattr(validator.Operation, "apply", crash_after)
    with pytest.raises(KeyboardInterrupt):
        run(db, folder).up()
    db.mongopat_lock.delete_many({})
    run(db, folder).up()
    run(db, folder).down()
    assert options(db, "orders").get("validator") in (None, {})


@pytest.mark.diverges("mongomock", NO_COLLMOD)
def test_check_counts_documents_the_new_validator_rejects(mongo, tmp_path):
    db = mongo.db
    load(db)
    db.orders.update_many({}, {"$unset": {"customerId": ""}}, upsert=False)
    step = dict(VALIDATOR_STEP, validation_level="moderate")
    folder = write(tmp_path / "m", "0001_validator", step)
    run(db, folder).up()
    entry = db.mongopat_changelog.find_one({"_id": "0001_validator"})
    assert entry["steps"][0]["stats"]["violations"] == db.orders.count_documents({})
    result = runner.invoke(app, ["check", *mongo.cli_args(), "--format", "json"])
    [found] = [f for f in json.loads(result.stdout)["findings"] if f["id"] == "validator-violations"]
    assert found["collection"] == "orders" and found["evidence"]["documents"] == db.orders.count_documents({})


# -- the step on a dump folder ------------------------------------------------------------------------


def test_on_a_dump_folder_the_validator_goes_into_the_metadata_and_down_gives_back_the_bytes(tmp_path):
    data = make_dump(tmp_path)
    meta = data / "orders.metadata.json"
    meta.write_text(json_util.dumps({"options": {"validationLevel": "moderate"}, "indexes": [
        {"v": 2, "key": {"_id": 1}, "name": "_id_"}], "collectionName": "orders"}))  # fmt: skip
    before = files(data)
    folder = write(tmp_path / "m", "0001_validator", STEPS["computed"], VALIDATOR_STEP)
    dump_run(data, folder).up()
    written = json_util.loads(meta.read_text())
    assert written["options"] == {"validator": ORDERS_SCHEMA, "validationLevel": "strict", "validationAction": "error"}
    assert written["collectionName"] == "orders"
    assert dump_run(data, folder).verify() == {"0001_validator": []}
    changelog = json_util.loads((data / "mongopat_changelog.json").read_text().splitlines()[0])
    assert changelog["steps"][1]["stats"]["violations"] == 0
    dump_run(data, folder).down()
    assert json_util.loads(meta.read_text())["options"] == {"validationLevel": "moderate"}
    assert set(files(data)) == set(before)


def test_on_a_dump_folder_without_metadata_down_removes_the_file_it_made(tmp_path):
    data = make_dump(tmp_path)
    before = files(data)
    step = dict(VALIDATOR_STEP, collection="customers")
    folder = write(tmp_path / "m", "0001_validator", step)
    dump_run(data, folder).up()
    assert (data / "customers.metadata.json").exists()
    dump_run(data, folder).down()
    assert files(data) == before


def test_from_report_reads_the_file_analyze_wrote_and_counts_in_the_checksum(tmp_path):
    data = make_dump(tmp_path)
    folder = tmp_path / "m"
    folder.mkdir()
    result = runner.invoke(
        app, ["analyze", "--dump", str(data), "--json-schema", str(folder / "schemas.json"), "-q", "-o", str(tmp_path / "r.json")]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    step = {"step": "validator", "collection": "orders", "from_report": "schemas.json"}
    write(folder, "0001_validator", step)
    [migration] = load_folder(folder)
    expected = json.loads((folder / "schemas.json").read_text())["collections"]["orders"]["validator"]
    assert migration.steps[0].loaded["validator"] == expected
    dump_run(data, folder).up()
    options_now = json_util.loads((data / "orders.metadata.json").read_text())["options"]
    assert options_now["validator"] == expected and options_now["validationLevel"] == "moderate"
    changelog = json_util.loads((data / "mongopat_changelog.json").read_text().splitlines()[0])
    assert changelog["steps"][0]["stats"]["violations"] == 0  # every analysed document satisfies it
    schemas = json.loads((folder / "schemas.json").read_text())
    schemas["collections"]["orders"]["validator"]["$jsonSchema"]["required"] = ["_id"]
    (folder / "schemas.json").write_text(json.dumps(schemas))
    status = runner.invoke(app, ["migrate", "status", "--dump", str(data), "--dir", str(folder), "-f", "json"])
    assert json.loads(status.stdout)["migrations"][0]["edited"] is True


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ({"validator": ORDERS_SCHEMA, "from_report": "x.json"}, "not both"),
        ({}, "not neither"),
        ({"validator": ORDERS_SCHEMA, "validation_level": "off"}, "validation_level is one of moderate, strict"),
        ({"validator": ORDERS_SCHEMA, "validation_action": "log"}, "validation_action is one of error, warn"),
        ({"from_report": "missing.json"}, "missing.json not found"),
    ],
)
def test_a_wrong_validator_step_is_an_input_error_with_file_and_line(tmp_path, step, message):
    folder = write(tmp_path / "m", "0001_validator", {"step": "validator", "collection": "orders", **step})
    with pytest.raises(InputError, match=message) as error:
        load_folder(folder)
    assert "0001_validator.yaml:" in str(error.value)


def test_the_cli_gives_exit_2_for_a_wrong_step(tmp_path):
    data = make_dump(tmp_path)
    folder = write(tmp_path / "m", "0001_validator", {"step": "validator", "collection": "orders"})
    result = runner.invoke(app, ["migrate", "up", "--dump", str(data), "--dir", str(folder), "--yes"])
    assert result.exit_code == 2 and "Traceback" not in result.output


# -- migrate plan ---------------------------------------------------------------------------------------


def recommendations(tmp_path, *specs) -> str:
    path = tmp_path / "recs.json"
    recs = [
        {"code": "MP107", "pattern": "schema versioning", "collection": s["collection"], "migration": s} for s in specs
    ]
    path.write_text(json.dumps({"recommendations": recs}))
    return str(path)


SCHEMA_VERSIONING = STEPS["schema_versioning"]


def test_plan_adds_a_validator_of_the_new_shape_after_a_shape_change(mongo, tmp_path):
    load(mongo.db)
    recs = recommendations(tmp_path, SCHEMA_VERSIONING)
    folder = tmp_path / "m"
    result = runner.invoke(
        app, ["migrate", "plan", "--from", recs, *mongo.cli_args(), "--dir", str(folder), "--add-validators", "--yes"]
    )
    assert result.exit_code == 0, result.output
    [migration] = load_folder(folder)
    assert [s.name for s in migration.steps] == ["schema_versioning", "validator"]
    added = migration.steps[1]
    assert added.params["validation_level"] == "moderate" and added.params["validation_action"] == "warn"
    schema = added.params["validator"]["$jsonSchema"]
    assert "schemaVersion" in schema["required"] and schema["properties"]["schemaVersion"] == {"bsonType": "int"}
    # Every document as the step leaves it passes the planned validator.
    assert all(
        satisfies(doc, added.params["validator"])
        for doc in Runner(mongo.db, []).transformed_sample(migration.steps[0], 500)
    )


def test_plan_add_validators_needs_a_target(tmp_path):
    recs = recommendations(tmp_path, SCHEMA_VERSIONING)
    result = runner.invoke(app, ["migrate", "plan", "--from", recs, "--dir", str(tmp_path / "m"), "--add-validators"])
    assert result.exit_code == 2 and "--uri" in result.output


@pytest.mark.diverges("mongomock", NO_COLLMOD)
def test_plan_warns_when_a_step_would_leave_documents_failing_the_validator(mongo, tmp_path):
    db = mongo.db
    load(db)
    closed = {"$jsonSchema": {"bsonType": "object", "properties": {"total": {"bsonType": "string"}}}}
    db.command({"collMod": "orders", "validator": closed, "validationLevel": "moderate"})
    recs = recommendations(tmp_path, STEPS["computed"])  # writes total as a number
    result = runner.invoke(
        app, ["migrate", "plan", "--from", recs, *mongo.cli_args(), "--dir", str(tmp_path / "m"), "--dry-run", "-f", "json"]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    [warning] = json.loads(result.stdout)["warnings"]
    assert "would fail the collection's validator" in warning and "total is double, not string" in warning


# -- $jsonSchema in Python ------------------------------------------------------------------------------

CASES = [
    ({"a": 1}, {"bsonType": "object", "required": ["a"]}, True),
    ({"b": 1}, {"required": ["a"]}, False),
    ({"a": Int64(1)}, {"properties": {"a": {"bsonType": "int"}}}, False),
    ({"a": Int64(1)}, {"properties": {"a": {"bsonType": "long"}}}, True),
    ({"a": 2**40}, {"properties": {"a": {"bsonType": "long"}}}, True),
    ({"a": 1.5}, {"properties": {"a": {"bsonType": "number"}}}, True),
    ({"a": True}, {"properties": {"a": {"type": "number"}}}, False),
    ({"a": None}, {"properties": {"a": {"bsonType": ["null", "string"]}}}, True),
    ({"a": ObjectId()}, {"properties": {"a": {"bsonType": "objectId"}}}, True),
    ({"a": [1, "x"]}, {"properties": {"a": {"items": {"bsonType": "int"}}}}, False),
    ({"a": [1, 2]}, {"properties": {"a": {"bsonType": "array", "minItems": 3}}}, False),
    ({"a": {"b": "x"}}, {"properties": {"a": {"properties": {"b": {"maxLength": 2}}}}}, True),
    ({"a": {"b": "xyz"}}, {"properties": {"a": {"properties": {"b": {"maxLength": 2}}}}}, False),
    ({"a": 1, "z": 2}, {"properties": {"a": {}}, "additionalProperties": False}, False),
    ({"a": 5}, {"properties": {"a": {"minimum": 5, "exclusiveMinimum": True}}}, False),
    ({"a": "red"}, {"properties": {"a": {"enum": ["red", "blue"]}}}, True),
    ({"a": "x9"}, {"properties": {"a": {"pattern": "^x[0-9]$"}}}, True),
    ({"a": 1}, {"anyOf": [{"required": ["b"]}, {"required": ["a"]}]}, True),
    ({"a": 1}, {"not": {"required": ["a"]}}, False),
    ({"a": 1}, {"dependencies": {"a": ["b"]}}, False),
]


@pytest.mark.parametrize(("document", "schema", "passes"), CASES)
def test_json_schema_in_python(document, schema, passes):
    assert satisfies(document, {"$jsonSchema": schema}) is passes


def test_a_failure_says_where_and_why():
    problem = validator_problem(
        {"a": {"b": 3}}, {"$jsonSchema": {"properties": {"a": {"properties": {"b": {"bsonType": "string"}}}}}}
    )
    assert problem == "a.b is int, not string"


def test_query_operators_beside_json_schema_go_to_the_embedded_engine():
    validator = {"$jsonSchema": {"required": ["status"]}, "status": {"$in": ["open", "paid"]}}
    assert satisfies({"status": "open"}, validator) and not satisfies({"status": "lost"}, validator)


def test_an_unknown_keyword_is_not_guessed():
    with pytest.raises(NotImplementedError, match="keyword 'if'"):
        satisfies({}, {"$jsonSchema": {"if": {}}})


@pytest.mark.server_only("the server's own $jsonSchema is the reference")
def test_python_and_the_server_agree_on_every_case(mongo):
    db = mongo.db
    for position, (document, schema, passes) in enumerate(CASES):
        db.cases.drop()
        db.cases.insert_one({"_id": position, **document})
        server = db.cases.count_documents({"$jsonSchema": schema}) == 1
        assert server is passes, (document, schema)


def test_cli_copy_of_a_dump_keeps_the_bytes(tmp_path):
    """copy_collection through the dump catalog copies the file as it is."""
    data = make_dump(tmp_path)
    folder = write(tmp_path / "m", "0001_copy", STEPS["copy_collection"])
    dump_run(data, folder).up()
    assert (data / "customers_copy.json").read_bytes() == (data / "customers.json").read_bytes()
    shutil.rmtree(folder)


def test_a_dry_run_says_what_a_collection_step_would_do_and_changes_nothing(tmp_path):
    data = make_dump(tmp_path)
    before = files(data)
    step = dict(VALIDATOR_STEP, validator={"$jsonSchema": {"required": ["cpu"]}})
    folder = write(tmp_path / "m", "0001_validator", step, STEPS["create_index"])
    result = runner.invoke(app, ["migrate", "up", "--dump", str(data), "--dir", str(folder), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "would replace the validator of orders (level strict, action error)" in result.output
    failing = sum(1 for line in (data / "orders.json").read_text().splitlines() if '"cpu"' not in line)
    assert f"{failing} document(s) of orders fail the new validator today" in result.output
    assert "would create an index" in result.output and "documents to read" not in result.output
    assert files(data) == before
