"""What every command shares: how it runs and how it ends over a client error, the
arguments many of them take, and the store-only lookups done before services start."""

from __future__ import annotations

import contextlib
from collections.abc import Coroutine, Iterator
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from sqlalchemy.engine import make_url

from duragent.client import lifecycle
from duragent.client.api import DuragentClient
from duragent.client.cli.views import announce, print_error
from duragent.client.errors import DuragentError, SessionNotFound
from duragent.settings import Settings

T = TypeVar("T")

SessionArg = Annotated[str, typer.Argument(help="Session id.")]
MessageArg = Annotated[str, typer.Argument(help="The message.")]
EntryPrefixArg = Annotated[str, typer.Argument(help="Entry id (or a unique prefix).")]
PluginOption = Annotated[
    list[str] | None,
    typer.Option(
        "--plugin",
        metavar="MODULE:ATTR",
        help="A duragent.Plugin to load (repeatable), beside DURAGENT_PLUGINS and the "
        "installed ones (entry points `duragent.plugins`).",
    ),
]


def fail(message: str) -> NoReturn:
    """End the command over a client error: one line naming what was wrong, exit 2."""
    print_error(message)
    raise typer.Exit(2)


@contextlib.contextmanager
def client_errors(settings: Settings | None = None) -> Iterator[None]:
    """A client error (`DuragentError`) inside ends the command as `fail` does: its message
    names what was wrong (and, for a session it does not hold, the store of `settings`
    that was looked in)."""
    try:
        yield
    except SessionNotFound as error:
        fail(f"{error} in {store_name(settings)}" if settings else str(error))
    except DuragentError as error:
        fail(str(error))


def store_name(settings: Settings) -> str:
    """The store the settings name, as a person finds it: a SQLite file's path, else the
    database URL without its password."""
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite" and url.database:
        return f"the store at {url.database}"
    return f"the store at {url.render_as_string(hide_password=True)}"


def missing_store(settings: Settings) -> str | None:
    """Why there is nothing to read when the settings name a SQLite file that does not
    exist (no session was made with this home); None when a store is there."""
    from duragent.store.db import missing_sqlite_file

    path = missing_sqlite_file(settings.database_url)
    if path is None:
        return None
    return (
        f"no duragent store at {path}: no session was made with this folder's state "
        "directory (a session lives in the store of the folder it was made in: run the "
        "command there, or set DURAGENT_HOME or DURAGENT_DATABASE_URL to its store)"
    )


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine: Ctrl-C, SIGTERM and SIGHUP stop what it started, then
    end the process by that signal (`client.lifecycle`)."""
    with client_errors():
        return lifecycle.run(coro, notice=announce)


def with_plugins(settings: Settings, paths: list[str] | None) -> Settings:
    """`settings` with the `--plugin` paths added, every plugin loaded once to check it:
    one that cannot be loaded ends the command with a line naming it (exit 2)."""
    from duragent.client.plugins import load_plugins

    if paths:
        settings = settings.model_copy(update={"plugins": [*settings.plugins, *paths]})
    with client_errors():
        load_plugins(settings)
    return settings


def store_client(settings: Settings, *, create: bool = False) -> DuragentClient:
    """A client for store-only commands: they work without Temporal. Unless `create`
    (a command that stores something new), a store that does not exist is not made as
    a side effect: the command ends naming where it looked."""
    from duragent.client.connection import open_store

    if not create and (missing := missing_store(settings)) is not None:
        fail(missing)
    return DuragentClient(None, open_store(settings), settings)  # type: ignore[arg-type]


def require_session(client: DuragentClient, session: str) -> None:
    """Refuse an unknown session before starting services for it."""
    with client_errors(client.settings):
        client.sync.sessions.get(session)


def entry_id(client: DuragentClient, session: str, prefix: str) -> str:
    """The entry `prefix` names (ids are long; `tree` shows their first 12 characters).
    Anything else ends the command with one line: no such session, no such entry, or a
    prefix that names several."""
    with client_errors(client.settings):
        matches = [e.id for e in client.sync.tree.entries(session) if e.id.startswith(prefix)]
    if not prefix or not matches:
        fail(f"no entry of session {session} has an id starting {prefix!r} (see duragent tree)")
    if len(matches) > 1:
        fail(f"{len(matches)} entries of session {session} start with {prefix!r}: give more")
    return matches[0]
