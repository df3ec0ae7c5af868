"""One part of the client (`client.runs`, `client.inputs`, ...): it reaches the core and
the other parts through the `DuragentClient` it was given (`self._client.db`,
`await self._client.sessions.get(...)`), never through a base class.

The rule: every public method of a part that does I/O (the store or Temporal) is
`async def`, and no store call runs on the event loop. A part's store work is written
once, synchronously, in its store part (`SyncPart`: what `client.sync.<part>` is, for
code with no event loop or in a thread); the async part's methods for it are
`in_thread(SyncX.method)`: the same method, run in a worker thread and awaited. Store
parts reach each other through `self._client.sync`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar

if TYPE_CHECKING:
    from duragent.client.api import DuragentClient

P = ParamSpec("P")
R = TypeVar("R")


class ClientPart:
    """One part of a `DuragentClient`."""

    def __init__(self, client: DuragentClient) -> None:
        self._client = client


class SyncPart:
    """The store work of one part, synchronous (`client.sync.<part>`): it blocks, so
    async code awaits the async part's method instead (run in a thread)."""

    def __init__(self, client: DuragentClient) -> None:
        self._client = client


SyncT = TypeVar("SyncT", bound=SyncPart)


class StoreBackedPart(ClientPart, Generic[SyncT]):
    """An async part whose store work is its store part's (`self._store`)."""

    def __init__(self, client: DuragentClient, store: SyncT) -> None:
        super().__init__(client)
        self._store = store


def in_thread(
    method: Callable[Concatenate[SyncT, P], R],
) -> Callable[Concatenate[StoreBackedPart[SyncT], P], Coroutine[Any, Any, R]]:
    """An async method that runs the store part's `method` in a worker thread: the one
    implementation, its signature and docstring, awaited off the event loop."""

    @functools.wraps(method)
    async def run(part: StoreBackedPart[SyncT], /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, part._store, *args, **kwargs)

    return run
