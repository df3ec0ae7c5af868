"""The cross-process cancel nudge: from the process whose workflow task cancels a call to
the process running it, through the store's server.

Cancellation reaches a call only in the reply to a heartbeat, and calls heartbeat rarely
(`activities.heartbeat`). The workflow task that cancels a call (an abort, a guidance
interrupt) may run in another worker process, or on another host, than the call. So
that process publishes a hint (`publish`, from the workflow runner, which sees the cancel
command leave), every other worker process receives it and hints the call if it runs
there (`HeartbeatPace.hint_cancel`): it heartbeats at once and learns of the cancellation
from the reply. How a hint travels depends on the store (`channel_for`):

- PostgreSQL (several machines): `LISTEN`/`NOTIFY` (`NotifiedCancelHints`). Each worker
  process holds one plain psycopg connection, in autocommit, that listens on `CHANNEL`;
  publishing a hint is one `SELECT pg_notify(...)` on it, whose payload names the call and
  the publishing process (which ignores its own, since it hears its channel too). The
  server pushes the notification to every listener at once.
- SQLite (one machine): the `cancel_hints` table (`PolledCancelHints`). The publisher
  writes a row, and every worker process reads the new rows in one query per `TICK_S`
  while it has calls running. SQLite has nothing like `NOTIFY`, and a primary-key range
  scan of a local file every 50 ms costs one machine next to nothing.

Why `NOTIFY` on PostgreSQL. The table was first chosen for both stores, on the grounds
that `NOTIFY` saves only idle reads and no latency. At fleet scale that was wrong on both
counts: the poll cost every worker process with calls running 20 reads a second (60
statements with `BEGIN` and `COMMIT`), 60,000 a second for 1,000 processes, the store's
biggest steady load after the model calls themselves (docs/SCALING.md); and a hint
waited for the next tick, 25 ms on average. A notification costs nothing until a cancel,
one statement then, no row to write or prune, and arrives in about a round trip. What it
costs instead is one idle connection per worker process, held open for good, straight to
PostgreSQL: a pooler in transaction mode (PgBouncer) hands each transaction to whichever
server session is free and so cannot keep a `LISTEN`, so behind one the connection goes
to `DURAGENT_DATABASE_LISTEN_URL`, the server's own address (default: the store's URL).

Either way no Temporal action is spent (a signal or an activity per cancel would be
one), and a hint is only a nudge: Temporal stays the source of truth. A hint that does
not arrive only makes that cancel as slow as the call's next liveness heartbeat (a third
of its heartbeat timeout); nothing fails for it. That is what happens while the store is
unreachable, and on PostgreSQL while the listening connection is lost (a restart, a
network cut): notifications sent meanwhile are not kept for it. The channel logs one
warning for the outage and connects again by itself, with a back-off, and hints queued
here meanwhile are sent once it is back.

One thread per channel does the work, off the event loop and off the workflow task's
thread (which `publish` never blocks: it only queues).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import select
import socket
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from duragent.activities.heartbeat import PACE, CallKey, HeartbeatPace
from duragent.store import cancel_hints
from duragent.store.db import Database

if TYPE_CHECKING:
    import psycopg

logger = logging.getLogger(__name__)


class CancelHints:
    """The nudge for the calls of a worker process (see the module); `start` and `stop`
    it with the worker. `channel_for` makes the store's kind."""

    def __init__(self, pace: HeartbeatPace = PACE) -> None:
        self._pace = pace
        self.origin = uuid.uuid4().hex
        """This channel's name in the hints it publishes (it takes every other's)."""

    def publish(self, key: CallKey) -> None:
        """Tell the other processes that `key`'s cancellation is on its way (never
        blocks: the channel's thread sends it)."""
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


def channel_for(
    db: Database, listen_url: str | None = None, pace: HeartbeatPace = PACE
) -> CancelHints:
    """The nudge for the store `db`: on PostgreSQL `LISTEN`/`NOTIFY` at `listen_url`
    (default: `db`'s own URL; the server's direct address when `db`'s goes through a
    pooler), elsewhere the `cancel_hints` table.

    Raises:
        ValueError: `listen_url` is no PostgreSQL URL libpq takes (the message says why).
    """
    if db.engine.dialect.name != "postgresql":
        return PolledCancelHints(db, pace)
    try:
        import psycopg  # noqa: F401  (the PostgreSQL extra's driver, imported only here)
    except ImportError:  # another driver for the store: the table still works
        logger.warning("cancel hints: psycopg is not installed, so they poll the store")
        return PolledCancelHints(db, pace)
    try:
        return NotifiedCancelHints(listen_url or db.url, pace)
    except ValueError as err:
        setting = "DURAGENT_DATABASE_LISTEN_URL" if listen_url else "DURAGENT_DATABASE_URL"
        raise ValueError(f"{setting}: {err}") from None


# SQLite: rows in the store, polled.

TICK_S = 0.05
"""How often a process with running calls reads new hints (SQLite): the cross-process
nudge's latency, on top of the heartbeat round trip."""

KEEP_S = 60.0
"""Hints older than this are pruned (a cancel they were for has long arrived)."""

PRUNE_EVERY_S = 10.0


class PolledCancelHints(CancelHints):
    """Hints as rows of `db`'s `cancel_hints` table, read every `TICK_S` while calls run."""

    def __init__(self, db: Database, pace: HeartbeatPace = PACE) -> None:
        super().__init__(pace)
        self._db = db
        self._outgoing: queue.SimpleQueue[CallKey | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._after: int | None = None
        self._pruned_at = 0.0

    def publish(self, key: CallKey) -> None:
        self._outgoing.put(key)

    def start(self) -> None:
        """Read hints from now on, in a thread of the channel's own (once the store
        answers: hints written before this are not for this process's calls)."""
        try:
            self._mark_start()
        except Exception as err:
            logger.warning("cancel hints: the store did not answer: %s", err)
        if self._thread is None:
            self._stopping.clear()
            self._thread = threading.Thread(target=self._run, name="cancel-hints", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stopping.set()
            self._outgoing.put(None)  # wakes it
            thread.join(timeout=5)

    def _run(self) -> None:
        next_read = time.monotonic()
        while not self._stopping.is_set():
            timeout = max(0.0, next_read - time.monotonic())
            written = self._take(timeout)
            try:
                if written:
                    self._write(written)
                if time.monotonic() >= next_read:
                    next_read = time.monotonic() + TICK_S
                    self._read()
            except Exception as err:  # the store is down: cancels wait for a heartbeat
                logger.warning("cancel hints: the store did not answer: %s", err)
                self._stopping.wait(1.0)

    def _take(self, timeout: float) -> list[CallKey]:
        """The hints to write: the first one waited for up to `timeout`, then all queued."""
        keys: list[CallKey] = []
        try:
            item = (
                self._outgoing.get(timeout=timeout) if timeout > 0 else self._outgoing.get_nowait()
            )
            while True:
                if item is not None:
                    keys.append(item)
                item = self._next()
        except queue.Empty:
            return keys

    def _next(self) -> CallKey | None:
        return self._outgoing.get_nowait()

    def _write(self, keys: list[CallKey]) -> None:
        now = time.time()
        with self._db.transaction() as db:
            cancel_hints.add_hints(db, keys, self.origin, int(now * 1000))
            if now - self._pruned_at > PRUNE_EVERY_S:
                cancel_hints.prune(db, int((now - KEEP_S) * 1000))
                self._pruned_at = now

    def _mark_start(self) -> None:
        with self._db.transaction() as db:
            self._after = cancel_hints.last_seq(db)

    def _read(self) -> None:
        if self._after is None:  # the store did not answer at the start
            self._mark_start()
            return
        if not self._pace.running():
            return  # nothing to hint: no query (hints since are read once calls run)
        with self._db.transaction() as db:
            hints = cancel_hints.hints_after(db, self._after, self.origin)
        for seq, workflow_id, run_id, activity_id in hints:
            self._after = seq
            self._pace.hint_cancel((workflow_id, run_id, activity_id))


# PostgreSQL: LISTEN/NOTIFY on a connection of the channel's own.

CHANNEL = "duragent_cancel"
"""The notification channel (PostgreSQL scopes it to the database: deployments on other
databases of the same server never hear each other)."""

LISTEN = f"LISTEN {CHANNEL}"

APPLICATION_NAME = "duragent-cancel-hints"
"""The listening connection's name in `pg_stat_activity`, unless its URL names one."""

LISTEN_DEFAULTS = {
    "application_name": APPLICATION_NAME,
    "connect_timeout": "10",
    # The connection is idle for hours: keepalives notice a peer that vanished without
    # closing it (a failed-over host, a dropped NAT entry), and a publish that no one
    # acknowledges gives up after 10 s instead of TCP's minutes.
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
}
"""libpq options the listening connection gets unless its URL sets them."""

PSYCOPG_ONLY = frozenset({"prepare_threshold", "autocommit"})
"""Options of a URL that are psycopg's (SQLAlchemy hands them to `psycopg.connect`), not
libpq's: a listening connection has no use for them."""

RETRY_FIRST_S = 0.5
RETRY_CAP_S = 5.0
"""A lost listening connection is retried after `RETRY_FIRST_S`, doubling up to
`RETRY_CAP_S`: back within a few seconds of a PostgreSQL restart, and one attempt per
process every 5 s through a long outage."""

STALE_S = 60.0
"""Hints queued while disconnected are sent once connected again, unless this old."""


class _Hint(BaseModel):
    """A notification's payload: the call (`w`orkflow id, `r`un id, `a`ctivity id) and
    the `o`rigin that published it. Short keys: a payload holds at most 8,000 bytes."""

    w: str
    r: str
    a: str
    o: str


def listen_conninfo(url: str) -> str:
    """The libpq connection string for SQLAlchemy URL `url` (`postgresql+psycopg://...`),
    read as SQLAlchemy's psycopg dialect reads it (user and password unquoted, several
    hosts, query options), with `LISTEN_DEFAULTS` where the URL is silent.

    Raises:
        ValueError: `url` is not a PostgreSQL URL, or names an option libpq does not know
            (the message says which).
    """
    from psycopg import ProgrammingError
    from psycopg.conninfo import make_conninfo
    from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as err:
        raise ValueError(f"not a PostgreSQL URL ({err})") from None
    if parsed.get_backend_name() != "postgresql":
        raise ValueError(f"not a PostgreSQL URL (its backend is {parsed.get_backend_name()!r})")
    # The store's own reading of its URL (the dialect is untyped).
    dialect = PGDialect_psycopg()  # type: ignore[no-untyped-call]
    _, params = dialect.create_connect_args(parsed)  # type: ignore[no-untyped-call]
    options = {**LISTEN_DEFAULTS}
    options.update({k: str(v) for k, v in params.items() if k not in PSYCOPG_ONLY})
    try:
        return make_conninfo(**options)
    except ProgrammingError as err:
        raise ValueError(f"not a PostgreSQL URL libpq takes ({err})") from None


class NotifiedCancelHints(CancelHints):
    """Hints as PostgreSQL notifications on `CHANNEL`, through one connection to
    `listen_url` that the channel's thread holds: it sends this process's hints and
    receives the others' (see the module)."""

    def __init__(self, listen_url: str, pace: HeartbeatPace = PACE) -> None:
        super().__init__(pace)
        self.conninfo = listen_conninfo(listen_url)
        """Where it listens (libpq's form of `listen_url`)."""
        self._outgoing: queue.SimpleQueue[tuple[float, CallKey]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._wakes: tuple[socket.socket, socket.socket] | None = None
        """Wakes the thread from its wait on the connection (a hint to send, or stop):
        the end it waits on, the end `publish` writes to; while started."""
        self.listening = threading.Event()
        """Set while the connection listens (cleared while it is down)."""

    def publish(self, key: CallKey) -> None:
        self._outgoing.put((time.monotonic(), key))
        self._wake()

    def start(self) -> None:
        """Listen from now on, in a thread of the channel's own (it connects there: a
        store that does not answer delays nothing else)."""
        if self._thread is None:
            self._stopping.clear()
            wakes = self._wakes = socket.socketpair()
            for end in wakes:
                end.setblocking(False)
            self._thread = threading.Thread(
                target=self._run, args=(wakes[0],), name="cancel-hints", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stopping.set()
            self._wake()
            thread.join(timeout=5)
            wakes, self._wakes = self._wakes, None
            for end in wakes or ():
                end.close()

    def _wake(self) -> None:
        wakes = self._wakes
        # Full: it is woken already; closed: stopped, nothing to wake.
        with contextlib.suppress(BlockingIOError, OSError):
            if wakes is not None:
                wakes[1].send(b"\0")

    def _run(self, woken: socket.socket) -> None:
        import psycopg  # the PostgreSQL extra's driver, imported only where it is used

        delay = RETRY_FIRST_S
        down = False  # the outage's warning was logged
        while not self._stopping.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True) as conn:
                    conn.execute(LISTEN)
                    self.listening.set()
                    if down:
                        logger.info("cancel hints: listening to PostgreSQL again")
                    down, delay = False, RETRY_FIRST_S
                    self._serve(conn, woken)
            except Exception as err:  # a restart, a network cut: cancels wait for heartbeats
                self.listening.clear()
                if not down:
                    down = True
                    logger.warning(
                        "cancel hints: the listening connection to PostgreSQL is down (%s); "
                        "retrying every few seconds, and cancels reach this process's calls "
                        "at their next heartbeat meanwhile",
                        " ".join(str(err).split()),  # one line: libpq's run over several
                    )
                self._stopping.wait(delay)
                delay = min(delay * 2, RETRY_CAP_S)
        self.listening.clear()

    def _serve(self, conn: psycopg.Connection[Any], woken: socket.socket) -> None:
        """Send and receive until stopped (returns) or the connection fails (raises)."""
        conn.add_notify_handler(self._received)  # those that come with a statement's reply
        pgconn = conn.pgconn
        while not self._stopping.is_set():
            self._send(conn)
            # Notifications already read off the socket with a reply are in libpq's hands
            # (`notifies`); the socket is waited on only once there are none left.
            pgconn.consume_input()
            while (note := pgconn.notifies()) is not None:
                self._received_payload(note.extra.decode(errors="replace"))
            ready, _, _ = select.select([pgconn.socket, woken.fileno()], [], [])
            if woken.fileno() in ready:
                with contextlib.suppress(BlockingIOError):
                    while woken.recv(4096):
                        pass

    def _send(self, conn: psycopg.Connection[Any]) -> None:
        """The queued hints, in one statement (one `NOTIFY` each), dropping stale ones."""
        payloads: list[str] = []
        with contextlib.suppress(queue.Empty):
            while True:
                queued_at, (workflow_id, run_id, activity_id) = self._outgoing.get_nowait()
                if time.monotonic() - queued_at < STALE_S:
                    hint = _Hint(w=workflow_id, r=run_id, a=activity_id, o=self.origin)
                    payloads.append(hint.model_dump_json())
        if len(payloads) == 1:
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payloads[0]))
        elif payloads:
            conn.execute(
                "SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p", (CHANNEL, payloads)
            )

    def _received(self, note: psycopg.Notify) -> None:
        self._received_payload(note.payload)

    def _received_payload(self, payload: str) -> None:
        try:
            hint = _Hint.model_validate_json(payload)
        except ValidationError:
            logger.debug("cancel hints: ignored a notification that is not a hint: %r", payload)
            return
        if hint.o != self.origin:
            self._pace.hint_cancel((hint.w, hint.r, hint.a))
