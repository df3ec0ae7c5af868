"""The deliveries a trigger remembers (`store.triggers`): a delivery seen is told apart
as delivered or not yet, an id or a signature reused for another delivery is told too,
another trigger's are not, and what is older than the memory is pruned away; a
trigger's record never carries its secret."""

from __future__ import annotations

from pathlib import Path

import pytest

from duragent.store import triggers
from duragent.store.db import Database


@pytest.fixture
def db(tmp_path: Path) -> Database:
    store = Database(f"sqlite:///{tmp_path / 'store.db'}")
    with store.transaction() as session:
        for trigger_id in ("t1", "t2"):
            triggers.add_trigger(
                session,
                trigger_id=trigger_id,
                owner=None,
                name=trigger_id,
                secret="s3cret-" + trigger_id,
                session_id=None,
                template="{a}",
                at_ms=0,
            )
    return store


def test_replays_are_told_by_id_or_signature_per_trigger(db: Database) -> None:
    with db.transaction() as s:
        assert triggers.remember_delivery(s, "t1", "d1", "sig1", 1000)
        assert not triggers.remember_delivery(s, "t1", "d1", "sig2", 1001)
        assert not triggers.remember_delivery(s, "t1", "d2", "sig1", 1001)
        assert triggers.seen_delivery(s, "t1", "d1", "sig1") == "undelivered"
        triggers.mark_delivered(s, "t1", "d1")
        assert triggers.seen_delivery(s, "t1", "d1", "sig1") == "delivered"
        assert triggers.seen_delivery(s, "t1", "d1", "other") == "other"
        assert triggers.seen_delivery(s, "t1", "d9", "sig1") == "signature"
        assert triggers.seen_delivery(s, "t2", "d1", "sig1") is None
        assert triggers.remember_delivery(s, "t2", "d1", "sig1", 1001)


def test_old_deliveries_are_pruned_and_a_deleted_trigger_forgets_its_own(db: Database) -> None:
    with db.transaction() as s:
        triggers.remember_delivery(s, "t1", "old", "sig-old", 1000)
        triggers.remember_delivery(s, "t1", "new", "sig-new", 5000)
        triggers.remember_delivery(s, "t2", "other", "sig-other", 5000)
        assert triggers.prune_deliveries(s, 2000) == 1
        assert triggers.seen_delivery(s, "t1", "old", "sig-old") is None
        assert triggers.seen_delivery(s, "t1", "new", "x") == "other"
        assert triggers.delete_trigger(s, "t1")
        assert triggers.seen_delivery(s, "t1", "new", "x") is None
        assert triggers.seen_delivery(s, "t2", "other", "sig-other") == "undelivered"


def test_records_carry_no_secret(db: Database) -> None:
    with db.transaction() as s:
        listed = triggers.list_triggers(s, every=True)
        assert [t.id for t in listed] == ["t1", "t2"]
        assert all("s3cret" not in t.model_dump_json() for t in listed)
        assert triggers.secret_of(s, "t1") == "s3cret-t1"
        assert triggers.set_secret(s, "t1", "new", 10)
        assert triggers.secret_of(s, "t1") == "new"
        assert not triggers.set_secret(s, "nope", "new", 10)
