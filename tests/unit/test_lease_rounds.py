"""Worker leases (`activities.leases`), one round at a time on a clock the test moves:
a lease that stops changing is taken once, by one watcher; a watcher that lost the store
judges nobody until each lease has had a whole lease time again; a round reads only the
lapsed leases."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from postgres_server import new_database
from sqlalchemy.exc import OperationalError

from duragent.activities import leases as leases_module
from duragent.activities.leases import WorkerLease
from duragent.store import leases as store_leases
from duragent.store.db import Database

pytestmark = pytest.mark.fast

LEASE_S = 1.5


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The watchers' clock and the store's, moved together."""
    clock = Clock()
    monkeypatch.setattr(f"{leases_module.__name__}.time.monotonic", clock)
    monkeypatch.setattr(store_leases, "clock", lambda _: str(int(clock.now * 1000)))
    return clock


@pytest.fixture
def db(tmp_path: Path) -> Database:
    return Database(f"sqlite:///{tmp_path / 'store.db'}")


def lease(db: Database) -> WorkerLease:
    return WorkerLease(db, client=None, lease_s=LEASE_S)  # type: ignore[arg-type]


def watch(watchers: list[WorkerLease], clock: Clock, seconds: float) -> list[Any]:
    """Every watcher ticks every 0.1 s for `seconds`; what they took."""
    taken: list[Any] = []
    for _ in range(round(seconds / 0.1)):
        clock.now += 0.1
        for watcher in watchers:
            taken += watcher.tick()
    return taken


def test_a_lapsed_lease_is_taken_once_with_its_calls(db: Database, clock: Clock) -> None:
    lost, a, b = lease(db), lease(db), lease(db)
    lost.call_started(b"token-1", "turn-1-model-1")
    for watcher in (lost, a, b):
        assert watcher.tick() == []
    assert watch([a, b], clock, LEASE_S - 0.1) == []  # not yet
    taken = watch([a, b], clock, 0.3)
    assert [(worker, [c[1:] for c in calls]) for worker, calls in taken] == [
        (lost.worker_id, [(b"token-1", "turn-1-model-1")])
    ]


def test_a_renewing_lease_is_never_taken(db: Database, clock: Clock) -> None:
    assert watch([lease(db), lease(db)], clock, 10 * LEASE_S) == []


def test_a_watcher_held_up_judges_nobody_on_what_it_saw_before(db: Database, clock: Clock) -> None:
    """Its own reads came late (a store slow for every worker, no CPU): the other's
    renewals were likely held up alike."""
    other, watcher = lease(db), lease(db)
    other.tick()
    watcher.tick()
    clock.now += 3 * LEASE_S
    assert watcher.tick() == []
    assert watch([watcher], clock, LEASE_S - 0.1) == []


def test_no_judgment_across_a_store_gap(
    db: Database, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    other, watcher = lease(db), lease(db)
    other.tick()
    watcher.tick()

    def unreachable(*_: Any, **__: Any) -> Any:
        raise OperationalError("SELECT 1", {}, Exception("the store is down"))

    with monkeypatch.context() as patch:
        patch.setattr(db, "transaction", unreachable)
        clock.now += 10 * LEASE_S  # no renewal gets through meanwhile
        assert watcher.tick() == []
    assert watcher.tick() == []  # back: the lease gets a whole lease time again
    assert watch([watcher], clock, LEASE_S - 0.1) == []


def test_a_call_begun_in_a_round_the_store_refused_is_recorded_the_next(
    db: Database, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A busy store fails a round: the calls it was to record wait for the next, so a
    worker lost later is taken with them (not with none, its calls left to their
    heartbeat timeout)."""
    lost, watcher = lease(db), lease(db)
    lost.tick()
    watcher.tick()
    lost.call_started(b"token-1", "turn-1-model-1")

    def unreachable(*_: Any, **__: Any) -> Any:
        raise OperationalError("SELECT 1", {}, Exception("database is locked"))

    with monkeypatch.context() as patch:
        patch.setattr(lost._db, "transaction", unreachable)
        assert lost.tick() == []
    assert lost.tick() == []  # recorded now; then the worker is lost
    taken = watch([watcher], clock, LEASE_S + 0.2)
    assert [(worker, [c[1:] for c in calls]) for worker, calls in taken] == [
        (lost.worker_id, [(b"token-1", "turn-1-model-1")])
    ]


def test_a_round_reads_only_the_lapsed_leases(
    db: Database, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fleet's live leases are not read at each round (that grows with the square of
    the fleet): a watcher's rounds return none of the 50 live workers' rows."""
    fleet = [lease(db) for _ in range(50)]
    watcher = lease(db)
    read: list[int] = []
    real = store_leases.lapsed

    def counted(*args: Any) -> Any:
        found = real(*args)
        read.append(len(found))
        return found

    monkeypatch.setattr(store_leases, "lapsed", counted)
    assert watch([*fleet, watcher], clock, 3 * LEASE_S) == []
    assert read and max(read) == 0


def test_an_idle_round_on_postgresql_renews_and_finds_the_lapsed(postgres_server: str) -> None:
    """PostgreSQL's one-statement round (outside a transaction): it renews its own lease
    and returns only the others' lapsed on the store's clock."""
    db = Database(new_database(postgres_server))
    live, gone = WorkerLease(db, None, 0.4), WorkerLease(db, None, 0.4)  # type: ignore[arg-type]
    live.tick()
    gone.tick()
    assert live._idle_round(400) == []
    deadline = time.monotonic() + 10
    while (found := live._idle_round(400)) == [] and time.monotonic() < deadline:
        time.sleep(0.05)  # the store's clock moves past the lease time
    assert found == [(gone.worker_id, 0)]
    assert gone._idle_round(400) is not None  # its own lease is still there: renewed


def test_a_call_is_recorded_as_it_begins_so_a_worker_lost_before_its_next_round_gives_it_up(
    db: Database, clock: Clock
) -> None:
    """Killed right after a call began, before any round: the call is its row."""
    lost, watcher = lease(db), lease(db)
    lost.tick()
    watcher.tick()
    lost.record(lost.call_started(b"token-1", "turn-1-model-1"))  # then killed: no round
    taken = watch([watcher], clock, LEASE_S + 0.2)
    assert [(worker, [c[1:] for c in calls]) for worker, calls in taken] == [
        (lost.worker_id, [(b"token-1", "turn-1-model-1")])
    ]


def test_a_call_recorded_as_it_began_is_dropped_by_the_round_after_it_ends(
    db: Database, clock: Clock
) -> None:
    worker, watcher = lease(db), lease(db)
    worker.tick()
    watcher.tick()
    key = worker.call_started(b"token-1", "turn-1-model-1")
    worker.record(key)
    worker.tick()  # a round while it runs: nothing recorded twice, nothing dropped
    with db.transaction() as tx:
        assert store_leases.claim_lost(tx, "nobody", 0) is None
    worker.call_ended(key)
    worker.tick()
    clock.now += 10 * LEASE_S  # then the worker is lost: it ran nothing any more
    watcher.tick()
    taken = watch([watcher], clock, LEASE_S + 0.2)
    assert [(w, calls) for w, calls in taken] == [(worker.worker_id, [])]


def test_a_call_the_store_did_not_take_as_it_began_is_recorded_by_the_next_round(
    db: Database, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    lost, watcher = lease(db), lease(db)
    lost.tick()
    watcher.tick()
    key = lost.call_started(b"token-1", "turn-1-model-1")

    def unreachable(*_: Any, **__: Any) -> Any:
        raise OperationalError("INSERT", {}, Exception("the store is down"))

    with monkeypatch.context() as patch:
        patch.setattr(db, "one_statement", unreachable)
        lost.record(key)
    lost.tick()  # the round records it; then the worker is lost
    taken = watch([watcher], clock, LEASE_S + 0.2)
    assert [(worker, [c[1:] for c in calls]) for worker, calls in taken] == [
        (lost.worker_id, [(b"token-1", "turn-1-model-1")])
    ]
