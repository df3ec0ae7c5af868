"""The client's one rule: every public method of its parts that does I/O (the store or
Temporal) is `async def`; the blocking store reads and writes are `client.sync`'s, each
written once (the async part's method runs the same one in a thread)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, cast

from temporalio.client import Client

from duragent.client.api import DuragentClient
from duragent.client.part import ClientPart, SyncPart
from duragent.settings import Settings
from duragent.store.db import Database

PURE: dict[str, set[str]] = {
    # No I/O: a handle of a started run, the settings' run options.
    "runs": {"handle", "default_options"},
    # Flags the streams to end; no I/O.
    "events": {"end_streams"},
}
"""Public methods of parts that do no I/O, so stay plain functions."""
CLIENT_PURE = {"mcp_servers", "known_tools"}
"""The client's own: they read the settings, the plugins and the MCP config file."""


def stand_in_client(tmp_path: Path) -> DuragentClient:
    """A client of stand-ins: nothing here connects to Temporal or opens the store."""
    settings = Settings(home=tmp_path, _env_file=None)
    return DuragentClient(cast(Client, None), cast(Database, None), settings)


def public_methods(obj: object) -> dict[str, Any]:
    """The public methods of `obj`'s class (properties and data left out)."""
    kind = type(obj)
    found = {}
    for name in dir(kind):
        if name.startswith("_"):
            continue
        value = inspect.getattr_static(kind, name)
        if inspect.isfunction(value) or isinstance(value, (classmethod, staticmethod)):
            found[name] = getattr(kind, name)
    return found


def is_async(method: Any) -> bool:
    return inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method)


def parts(client: DuragentClient) -> dict[str, ClientPart]:
    return {name: part for name, part in vars(client).items() if isinstance(part, ClientPart)}


def test_every_method_of_a_part_that_does_io_is_async(tmp_path: Path) -> None:
    client = stand_in_client(tmp_path)
    found = parts(client)
    assert {"sessions", "runs", "inputs", "tree", "events", "display", "triggers"} <= set(found)
    blocking = [
        f"client.{name}.{method}"
        for name, part in found.items()
        for method, function in public_methods(part).items()
        if not is_async(function) and method not in PURE.get(name, set())
    ]
    assert blocking == [], (
        "these methods block: make them async (store work: `in_thread` of the store "
        "part's method), or list them in PURE if they do no I/O"
    )
    for name, pure in PURE.items():
        for method in pure:
            assert not is_async(getattr(found[name], method)), f"{name}.{method} is async"


def test_the_sync_view_holds_the_blocking_store_work(tmp_path: Path) -> None:
    client = stand_in_client(tmp_path)
    sync_parts = dict(vars(client.sync))
    assert all(isinstance(part, SyncPart) for part in sync_parts.values())
    assert set(sync_parts) <= set(parts(client)), "a store part without its async part"
    for name, sync_part in sync_parts.items():
        methods = public_methods(sync_part)
        coroutines = [method for method, function in methods.items() if is_async(function)]
        assert coroutines == [], f"client.sync.{name}: async methods {coroutines}"


def test_an_async_store_method_runs_the_sync_one(tmp_path: Path) -> None:
    """One implementation of each store operation: an async part's store method wraps
    the method of the same name of its part in `client.sync` (nothing written twice)."""
    client = stand_in_client(tmp_path)
    delegated = 0
    for name, part in parts(client).items():
        for method, function in public_methods(part).items():
            wrapped = getattr(function, "__wrapped__", None)
            if wrapped is None:
                continue
            sync_part = getattr(client.sync, name)
            assert wrapped is getattr(type(sync_part), method), f"client.{name}.{method}"
            delegated += 1
    assert delegated >= 39
    # Reads every caller used synchronously before: each is awaited now, and blocking
    # under client.sync alone.
    for name, method in [
        ("sessions", "get"),
        ("sessions", "create"),
        ("runs", "list"),
        ("tree", "path"),
        ("events", "read"),
        ("inputs", "queue"),
        ("display", "messages"),
        ("triggers", "add"),
    ]:
        assert is_async(getattr(getattr(client, name), method))
        assert not is_async(getattr(getattr(client.sync, name), method))


def test_the_client_itself(tmp_path: Path) -> None:
    client = stand_in_client(tmp_path)
    methods = public_methods(client)
    assert is_async(methods.pop("connect"))
    assert set(methods) == CLIENT_PURE
    assert not any(is_async(function) for function in methods.values())
