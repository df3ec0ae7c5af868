"""What a database error says about the store, from real SQLite errors: a full database
(its disk) is told apart from a busy or unreachable one, for the log and the API."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from duragent.store.errors import disk_refuses, store_trouble


def test_a_full_database_is_its_disk(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'full.db'}")
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE t (x TEXT)"))
    with pytest.raises(OperationalError) as full, engine.begin() as connection:
        connection.execute(text("PRAGMA max_page_count = 3"))
        for _ in range(10):
            connection.execute(text("INSERT INTO t VALUES (:x)"), {"x": "x" * 4000})
    assert disk_refuses(full.value)
    assert store_trouble(full.value) == "store's disk is full"


def test_an_unreachable_database_is_not_its_disk(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'missing' / 'store.db'}")
    with pytest.raises(OperationalError) as unreachable:
        engine.connect()
    assert not disk_refuses(unreachable.value)
    assert store_trouble(unreachable.value) == "store unavailable"
