"""``analyze --json-schema``: validators every analysed document satisfies; ``check``: documents that violate
a collection's current validator (finding ``validator-violations``)."""

from __future__ import annotations

import json

import pytest
from bson import ObjectId
from typer.testing import CliRunner

from mongopat.cli import app
from mongopat.validators import collection_schema
from tests.support.dumps import write_export
from tests.support.migrations import dataset, load

runner = CliRunner()
NO_JSON_SCHEMA = "count_documents({$nor: [{$jsonSchema: {...}}]}): NotImplementedError (no $jsonSchema)"


def schemas(args: list[str], tmp_path) -> dict:
    target = tmp_path / "validators.json"
    result = runner.invoke(app, ["analyze", *args, "--json-schema", str(target), "-q", "-o", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    document = json.loads(target.read_text())
    assert document["json_schema_version"] == 1
    return document["collections"]


def test_the_schema_of_a_collection_types_requires_and_describes_array_items(mongo, tmp_path):
    load(mongo.db)
    orders = schemas(mongo.cli_args(), tmp_path)["orders"]
    assert orders["collMod"] == "orders" and orders["validationLevel"] == "moderate"
    schema = orders["validator"]["$jsonSchema"]
    assert schema["bsonType"] == "object"
    assert set(schema["required"]) == {"_id", "customerId", "createdAt", "status", "items"}
    properties = schema["properties"]
    assert properties["_id"] == {"bsonType": "objectId"} and properties["createdAt"] == {"bsonType": "date"}
    assert "ram" in properties and "ram" not in schema["required"]  # present in a third of the orders
    items = properties["items"]["items"]
    assert items["bsonType"] == "object" and set(items["required"]) == {"price", "qty"}
    assert items["properties"]["qty"] == {"bsonType": "int"}  # a server keeps int and long apart


def test_an_integer_of_a_json_export_may_be_an_int_or_a_long(tmp_path):
    write_export(tmp_path / "export", "things", [{"_id": i, "n": i, "x": 1.5} for i in range(5)])
    schema = schemas(["--dump", str(tmp_path / "export")], tmp_path)["things"]["validator"]["$jsonSchema"]
    assert schema["properties"]["n"] == {"bsonType": ["int", "long"]}
    assert schema["properties"]["x"] == {"bsonType": "double"}


def test_a_map_of_ids_is_an_object_of_any_fields():
    collection = {
        "count": 2,
        "sampling": {"documents": 2},
        "fields": [
            {"path": "_id", "count": 2, "types": [{"type": "int", "count": 2}]},
            {"path": "scores", "count": 2, "types": [{"type": "object", "count": 2}], "map": {"keys": 40}},
            {"path": "scores.65a1", "count": 1, "types": [{"type": "int", "count": 1}]},
        ],
    }
    schema = collection_schema(collection, exact_ints=True)
    assert schema["properties"]["scores"] == {"bsonType": "object"}


@pytest.mark.diverges("mongomock", NO_JSON_SCHEMA)
def test_every_analysed_document_satisfies_the_validator_written(mongo, tmp_path):
    load(mongo.db)
    for name, command in schemas([*mongo.cli_args(), "--full-scan"], tmp_path).items():
        validator = command["validator"]
        assert mongo.db[name].count_documents({"$nor": [validator]}) == 0, name
        assert mongo.db[name].count_documents(validator) == len(dataset()[name])


@pytest.mark.diverges("mongomock", NO_JSON_SCHEMA)
def test_check_reports_documents_that_violate_the_current_validator(mongo, tmp_path):
    db = mongo.db
    db.create_collection(
        "people",
        validator={"$jsonSchema": {"bsonType": "object", "required": ["name"]}},
        validationLevel="moderate",
    )
    db.people.insert_many([{"_id": ObjectId(), "name": f"p{i}"} for i in range(5)])
    db.command({"collMod": "people", "validationAction": "warn"})
    db.people.insert_many([{"_id": ObjectId(), "nick": "x"} for _ in range(3)])  # accepted with a warning
    result = runner.invoke(app, ["check", *mongo.cli_args(), "--fail-on", "warning", "-f", "json"])
    found = [f for f in json.loads(result.stdout)["findings"] if f["id"] == "validator-violations"]
    assert result.exit_code == 1 and len(found) == 1
    assert found[0]["collection"] == "people" and found[0]["evidence"]["documents"] == 3
    assert found[0]["evidence"]["action"] == "warn"
    checks = json.loads(result.stdout)["checks"]
    assert checks["validators"]["ran"]


def test_check_says_validators_need_a_server(tmp_path):
    write_export(tmp_path / "export", "things", [{"_id": i} for i in range(3)])
    result = runner.invoke(app, ["check", "--dump", str(tmp_path / "export"), "-f", "json"])
    checks = json.loads(result.stdout)["checks"]
    assert not checks["validators"]["ran"] and "server" in checks["validators"]["note"]


def test_the_validators_file_is_not_taken_for_a_collection(tmp_path):
    write_export(tmp_path / "export", "things", [{"_id": i} for i in range(3)])
    schemas(["--dump", str(tmp_path / "export")], tmp_path)
    (tmp_path / "export" / "validators.json").write_text((tmp_path / "validators.json").read_text())
    result = runner.invoke(app, ["analyze", "--dump", str(tmp_path / "export"), "-f", "json", "-q"])
    assert [c["name"] for c in json.loads(result.stdout)["collections"]] == ["things"]
