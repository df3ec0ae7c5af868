"""Turn snapshots are content-addressed, so a worker remembers which ones it stored and
skips writing them again; it must only remember a snapshot once it is committed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from duragent.activities.extensions import Extensions
from duragent.activities.snapshots import SnapshotTaker
from duragent.domain.config import SessionConfig
from duragent.domain.context import derive_path_state
from duragent.store import sessions, snapshots
from duragent.store.db import Database


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    store = Database(f"sqlite:///{tmp_path / 'store.db'}")
    yield store
    store.dispose()


class RolledBack(Exception):
    pass


def test_a_snapshot_taken_in_a_rolled_back_transaction_is_written_again(
    tmp_path: Path, db: Database
) -> None:
    config = SessionConfig(model="offline-test-model")
    with db.transaction() as tx:
        session = sessions.create_session(
            tx, session_id="s1", workspace=str(tmp_path), config=config
        )
    taker = SnapshotTaker(Extensions())
    state = derive_path_state([], config)
    # The first turn's transaction fails after the snapshot was written in it (the
    # database went away, the activity was cancelled): nothing of it is stored.
    with pytest.raises(RolledBack), db.transaction() as tx:
        ref = taker.take(tx, session, state)
        raise RolledBack
    with db.transaction() as tx:
        again = taker.take(tx, session, state)
    assert again == ref
    with db.transaction() as tx:
        assert snapshots.get_snapshot(tx, ref.id).model == "offline-test-model"
