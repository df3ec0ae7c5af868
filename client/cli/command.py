"""What every command shares: how it runs and how it ends over a client error, the
arguments many of them take, and the store-only lookups done before services start."""

from __future__ import annotations

import contextlib
from collections.abc import Coroutine, Iterator
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from duragent.client import lifecycle
from duragent.client.api import DuragentClient
from duragent.client.cli.views import announce, print_error
from duragent.client.errors import DuragentError
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
def client_errors() -> Iterator[None]:
    """A client error (`DuragentError`) inside ends the command as `fail` does: its message
    names what was wrong."""
    try:
        yield
    except DuragentError as error:
        fail(str(error))


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


def store_client(settings: Settings) -> DuragentClient:
    """A client for store-only commands: they work without Temporal."""
    from duragent.client.connection import open_store

    return DuragentClient(None, open_store(settings), settings)  # type: ignore[arg-type]


def require_session(client: DuragentClient, session: str) -> None:
    """Refuse an unknown session before starting services for it."""
    with client_errors():
        client.sessions.get(session)


def entry_id(client: DuragentClient, session: str, prefix: str) -> str:
    """The entry `prefix` names (ids are long; `tree` shows their first 12 characters).
    Anything else ends the command with one line: no such session, no such entry, or a
    prefix that names several."""
    with client_errors():
        matches = [e.id for e in client.tree.entries(session) if e.id.startswith(prefix)]
    if not prefix or not matches:
        fail(f"no entry of session {session} has an id starting {prefix!r} (see duragent tree)")
    if len(matches) > 1:
        fail(f"{len(matches)} entries of session {session} start with {prefix!r}: give more")
    return matches[0]
