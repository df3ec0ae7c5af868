"""Engine setup and schema migrations for the store.

SQLite (a file under the state directory) by default; any SQLAlchemy URL by setting.
SQLite runs in WAL mode so the worker, the CLI and the HTTP API can share one file:
readers never block the writer, and a writer waits (busy_timeout) instead of failing.
Within one process, transactions on a SQLite file take turns on a lock of the process's
(`file_turns`; one stuck behind another process's lock holds up the others for at most
`TURN_WAIT_S`): SQLite's busy wait sleeps in steps of up to 100 ms, so under a worker's
load its threads slept far longer than the writes they waited for (with 100 sessions at
once, the lock raised throughput by a tenth and cut the worker's CPU per model call by
as much). Other processes still wait in SQLite.

Every process migrates the store when it opens it, so processes started together on a
fresh database would all create the tables: migrations are serialised by a lock (a file
lock next to a SQLite database, an advisory lock on PostgreSQL), and whoever comes second
finds the schema at head.

On PostgreSQL the store keeps no state in a server session from one transaction to the
next (the migration lock is a transaction's; no SET, LISTEN, temporary table or held
cursor), so it works through a connection pooler in transaction mode such as PgBouncer,
with one exception that a setting turns off: psycopg prepares a statement on the server
once a connection has run it five times (`prepare_threshold`), and a pooler that hands the
connection's next transaction to another server session loses it (PgBouncer before 1.21
in transaction mode). `prepared_statements=False` (`DURAGENT_DATABASE_PREPARED_STATEMENTS`)
keeps every statement unprepared; with it on, the error the pooler causes says so.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from filelock import FileLock
from sqlalchemy import Connection, Engine, ExceptionContext, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 5000
DEFAULT_POOL_SIZE = 10
MIGRATION_LOCK = (0x64757261, 1)
"""PostgreSQL advisory lock ("dura", 1) held while migrating. Two-key locks never collide
with the one-key (bigint) locks the store takes per session."""


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def missing_sqlite_file(url: str) -> Path | None:
    """The SQLite file `url` names, when it does not exist: opening it would make an
    empty store, which a reader must not do as a side effect. None when it exists, or
    the store is in memory or no SQLite file."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    path = Path(parsed.database)
    return None if path.exists() else path


class PreparedStatementsLost(RuntimeError):
    """A server session lacked a prepared statement of this connection's, or had one of
    its name already: a pooler in transaction mode stands between the store and
    PostgreSQL (see the module). The message names the setting that fixes it."""


PREPARED_STATEMENTS_FIX = "DURAGENT_DATABASE_PREPARED_STATEMENTS=false"


def create_store_engine(
    url: str, pool_size: int = DEFAULT_POOL_SIZE, *, prepared_statements: bool = True
) -> Engine:
    """An engine for `url` keeping `pool_size` connections, and as many more under a
    burst (a worker's store steps run in threads, one connection each). Statements'
    parameters never appear in errors or logs (`hide_parameters`): they hold prompts,
    tool output and triggers' secrets, and a failed statement's error is logged.
    `prepared_statements`: whether psycopg may prepare statements on the server (off
    through a pooler in transaction mode; see the module)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        psycopg = parsed.get_driver_name() == "psycopg"
        engine = create_engine(
            url,
            pool_pre_ping=True,
            pool_size=pool_size,
            max_overflow=pool_size,
            hide_parameters=True,
            # None: never prepare (psycopg's own switch; 5 is its default threshold).
            connect_args={"prepare_threshold": None} if psycopg and not prepared_statements else {},
        )
        if psycopg and prepared_statements:
            event.listen(engine, "handle_error", _prepared_statement_lost)
        return engine
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        pooling: dict[str, Any] = {"pool_size": pool_size, "max_overflow": pool_size}
    else:
        pooling = {}  # in memory: one connection, shared (SQLAlchemy's own choice)
    engine = create_engine(
        url,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        hide_parameters=True,
        **pooling,
    )
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


_PREPARED_STATEMENT_ERRORS = frozenset({"26000", "42P05"})
"""SQLSTATEs of a prepared statement that does not exist, and of one that already does."""


def _prepared_statement_lost(context: ExceptionContext) -> BaseException | None:
    """The error a pooler in transaction mode causes, in words naming the fix: the driver's
    own ('prepared statement "_pg3_0" does not exist') points at nothing the user wrote."""
    error = context.original_exception
    state = getattr(error, "sqlstate", None)
    if state not in _PREPARED_STATEMENT_ERRORS or '"_pg3_' not in str(error):
        return None  # not one of psycopg's own statements
    return PreparedStatementsLost(
        f"PostgreSQL: {str(error).strip()} (a statement psycopg prepared): this process "
        "reaches PostgreSQL through a connection pooler in transaction mode, such as "
        "PgBouncer, which gives each transaction whichever server session is free, so a "
        "statement prepared in one session is missing in the next or clashes with another "
        f"connection's; set {PREPARED_STATEMENTS_FIX} for every duragent process on this "
        "store (docs/DEPLOYING.md, 'Connections and PgBouncer')"
    )


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    # NORMAL in WAL mode survives any process crash; only a power cut may lose the
    # last commits, which the Temporal history would then replay.
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's config; migrations run in `connection` (see `store/migrations/env.py`)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def migrate(engine: Engine) -> None:
    """Bring the schema to the latest revision (idempotent; safe to run from several
    processes at once: one migrates, the others wait and then find nothing to do)."""
    with _sqlite_migration_lock(engine), engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            # Held until this transaction, the whole upgrade, commits or rolls back.
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:a, :b)"),
                {"a": MIGRATION_LOCK[0], "b": MIGRATION_LOCK[1]},
            )
        command.upgrade(alembic_config(connection), "head")


@contextlib.contextmanager
def _sqlite_migration_lock(engine: Engine) -> Iterator[None]:
    """A file lock next to a SQLite database file (none for other stores or in memory):
    its driver runs DDL outside transactions, so only a lock around the upgrade serialises it."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        yield
        return
    with FileLock(f"{database}.migrate.lock"):
        yield


TURN_WAIT_S = 0.2
"""How long a transaction waits for its turn: past it, one ahead is waiting on another
process (SQLite's busy wait, up to its timeout), and this one goes on without its turn,
waiting in SQLite as it would without the lock."""

_FILE_TURNS: dict[str, threading.RLock] = {}
_FILE_TURNS_GUARD = threading.Lock()


def file_turns(engine: Engine) -> threading.RLock | None:
    """This process's lock for the engine's SQLite file (one per file, shared by every
    engine on it; re-entrant, for a transaction a thread opens inside another), or None
    for another store (see the module)."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        return None
    with _FILE_TURNS_GUARD:
        return _FILE_TURNS.setdefault(str(Path(database).resolve()), threading.RLock())


@contextlib.contextmanager
def _turn(lock: threading.RLock | None) -> Iterator[None]:
    """The transaction's turn on `lock`, waited for at most `TURN_WAIT_S`."""
    held = lock is not None and lock.acquire(timeout=TURN_WAIT_S)
    try:
        yield
    finally:
        if held and lock is not None:
            lock.release()


class Database:
    """An engine and its session factory; `transaction()` is the unit of work."""

    def __init__(
        self,
        url: str,
        *,
        run_migrations: bool = True,
        pool_size: int = DEFAULT_POOL_SIZE,
        prepared_statements: bool = True,
    ) -> None:
        self.url = url
        self.prepared_statements = prepared_statements
        """Whether psycopg may prepare statements on the server (see the module): another
        `Database` on the same store (a smaller pool of its own) takes it over."""
        self.engine = create_store_engine(url, pool_size, prepared_statements=prepared_statements)
        if run_migrations:
            migrate(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._turns = file_turns(self.engine)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Session]:
        with _turn(self._turns), self._sessions.begin() as session:
            yield session

    @contextlib.contextmanager
    def statements(self) -> Iterator[Connection]:
        """A transaction on an engine connection, for work that only runs statements
        (`store.statements`; no ORM objects): the hot paths of a turn."""
        with _turn(self._turns), self.engine.begin() as connection:
            yield connection

    @contextlib.contextmanager
    def one_statement(self) -> Iterator[Connection]:
        """A connection for work that is a single statement: on PostgreSQL it commits on
        its own, sparing the store a `BEGIN` and a `COMMIT` (a streamed reply's flushes
        are many a second); elsewhere a transaction as `statements()`."""
        if self.engine.dialect.name != "postgresql":
            with self.statements() as connection:
                yield connection
            return
        with self.engine.connect() as connection:
            yield connection.execution_options(isolation_level="AUTOCOMMIT")

    def dispose(self) -> None:
        self.engine.dispose()
