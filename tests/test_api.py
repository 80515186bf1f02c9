"""The Python API (mongopat.api): what an application calls at deploy time, on any Database-like object."""

import pytest

from mongopat import api
from mongopat.errors import InputError
from mongopat.migrate.script import render


def folder_with(tmp_path, *steps):
    folder = tmp_path / "migrations"
    folder.mkdir()
    (folder / "0001_total.yaml").write_text(render("0001_total", "total", list(steps), "test"))
    return folder


class DatabaseLike:
    """Not a pymongo Database: only the same interface (duck typing, no isinstance checks)."""

    def __init__(self, db):
        self._db = db

    def __getitem__(self, name):
        return self._db[name]

    def __getattr__(self, name):
        if name == "with_options":
            raise AttributeError(name)
        return getattr(self._db, name)


def test_up_status_verify_down_on_a_database_like_object(mongo, tmp_path):
    db = DatabaseLike(mongo.db)
    mongo.db.orders.insert_many([{"_id": i, "items": [{"price": i, "qty": 2}]} for i in range(30)])
    folder = folder_with(
        tmp_path,
        {"step": "computed", "collection": "orders", "field": "total", "expression": "sum(items.price * items.qty)"},
    )
    assert [row["state"] for row in api.status(db, folder)] == ["pending"]
    [result] = api.up(db, folder, batch_size=7, max_docs_per_sec=100_000, write_concern="majority")
    assert result["state"] == "applied" and mongo.db.orders.find_one({"_id": 3})["total"] == 6
    assert api.verify(db, folder) == {"0001_total": []}
    assert api.status(db, folder)[0]["pending_documents"] == 0
    assert api.down(db, folder, to="base") == ["0001_total"]
    assert "total" not in mongo.db.orders.find_one({"_id": 3})


def test_unknown_options_and_bad_files_are_input_errors(mongo, tmp_path):
    folder = folder_with(tmp_path, {"step": "unset_field", "collection": "orders", "field": "x"})
    with pytest.raises(InputError, match="unknown option.*batchsize"):
        api.up(mongo.db, folder, batchsize=10)
    with pytest.raises(InputError, match="write_concern"):
        api.up(mongo.db, folder, write_concern="most")
    (folder / "0002_bad.yaml").write_text("id: 0002_bad\nsteps: []\n")
    with pytest.raises(InputError, match="0002_bad.yaml:2"):
        api.status(mongo.db, folder)


def test_the_same_functions_migrate_a_dump_folder(tmp_path):
    """A dump folder is a target like a database: up, status, verify and down through the same functions,
    with the migrations as a folder or as what ``load`` returned."""
    data = tmp_path / "export"
    data.mkdir()
    original = "".join(f'{{"_id": {i}, "items": [{{"price": {i}, "qty": 2}}]}}\n' for i in range(5))
    (data / "orders.json").write_text(original)
    folder = folder_with(
        tmp_path,
        {"step": "computed", "collection": "orders", "field": "total", "expression": "sum(items.price * items.qty)"},
    )
    target = api.dump_folder(data)
    migrations = api.load(folder)
    assert [row["state"] for row in api.status(target, migrations)] == ["pending"]
    [result] = api.up(target, migrations, batch_size=2)
    assert (
        result["state"] == "applied"
        and '"_id":3,"items":[{"price":3,"qty":2}],"total":6' in (data / "orders.json").read_text()
    )
    assert api.verify(target, folder) == {"0001_total": []}
    assert api.down(target, folder, to="base") == ["0001_total"]
    assert (data / "orders.json").read_text() == original
    with pytest.raises(InputError, match="write_concern"):
        api.up(target, folder, write_concern="most")
