"""One kept-open connection to one MCP server, shared by every call this worker makes.

The SDK's client must be entered and left in one task, and a transport that fails takes
down whatever runs inside its task group. So the connection lives in a task of its own on
the worker's event loop (the holder), and each request runs as a child task in the
holder's task group: a caller waits for its answer without being exposed to the
transport's failures, and a failure ends the holder, which answers the requests still in
flight with what happened. The next request opens a new connection.

Opening is lazy (the first request, or the tool listing of the first turn that uses the
server), one at a time. After a failed attempt the server gets a pause before the next
one (0.5 s, doubling to 30 s): a listing in the pause fails at once with the last error
(a turn is not held up by a server that is down), a call waits for the next attempt, and
requests that waited while an attempt was made share its outcome (a batch of calls to a
server that is down makes one attempt, not one each). A connection that worked and then
broke is reopened by the next request without a pause.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
import mcp.types
from mcp import Client, MCPError, StdioServerParameters
from mcp.client import Transport
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from duragent.activities.mcp.config import HttpServer, ServerConfig, StdioServer

logger = logging.getLogger(__name__)

T = TypeVar("T")

FIRST_PAUSE_S = 0.5
MAX_PAUSE_S = 30.0
LIST_PAGES_MAX = 100
CLOSE_TIMEOUT_S = 5.0
HTTP_READ_TIMEOUT_S = 300.0


class ServerUnavailable(Exception):
    """The server could not be reached, or the connection broke during a request. The
    message names the server and what happened, and holds no secret."""


@dataclass
class _Open:
    client: Client
    group: anyio.abc.TaskGroup
    done: anyio.Event
    """Set when the connection must end: the server closed it, or the worker stops."""
    pending: set[asyncio.Future[Any]] = field(default_factory=set)
    ending: str | None = None
    """Why the connection ended, once it has."""


class ServerConnection:
    """The connection to the server `name`, opened on first use and reopened after a failure."""

    def __init__(self, name: str, config: ServerConfig, log: Path | None = None) -> None:
        self.name = name
        self.config = config
        self.log = log
        """Where a stdio server's stderr goes (appended); None: the worker's stderr."""
        self.opened_count = 0
        """Connections opened so far (a test and the benchmark read it)."""
        self._open: _Open | None = None
        self._holder: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._failures = 0
        self._retry_at = 0.0
        self._failed_at = -1.0
        self._last_error = ""
        self._secrets = _secrets(config)

    async def list_tools(self) -> list[mcp.types.Tool]:
        """Every tool the server lists (all pages), asked anew."""

        async def listing(client: Client) -> list[mcp.types.Tool]:
            tools: list[mcp.types.Tool] = []
            cursor: str | None = None
            for _ in range(LIST_PAGES_MAX):
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            return tools

        return await self._request(
            listing, self.config.connect_timeout_s, "listing its tools", patient=False
        )

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> mcp.types.CallToolResult:
        """Call `tool`; cancelling the caller cancels the request on the server too."""
        timeout = self.config.call_timeout_s

        async def call(client: Client) -> mcp.types.CallToolResult:
            return await client.call_tool(tool, arguments, read_timeout_seconds=timeout)

        return await self._request(call, timeout, f"calling `{tool}`", patient=True)

    async def close(self) -> None:
        """End the connection (stopping a stdio server's process). A later request would
        open a new one: close when nothing calls any more (the worker has stopped)."""
        opened, holder = self._open, self._holder
        if opened is not None:
            opened.ending = opened.ending or "the worker is stopping"
            opened.done.set()
        if holder is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(asyncio.shield(holder), CLOSE_TIMEOUT_S)
            if not holder.done():
                holder.cancel()

    # --- requests ----------------------------------------------------------------------

    async def _request(
        self,
        operation: Callable[[Client], Awaitable[T]],
        timeout: float | None,
        what: str,
        *,
        patient: bool,
    ) -> T:
        opened = await self._connected(patient=patient)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[T] = loop.create_future()
        scopes: list[anyio.CancelScope] = []

        async def run() -> None:
            if answer.done():  # the caller gave up before this started
                return
            with anyio.CancelScope() as scope:
                scopes.append(scope)
                try:
                    result = await operation(opened.client)
                except Exception as exc:
                    if not answer.done():
                        answer.set_exception(exc)
                else:
                    if not answer.done():
                        answer.set_result(result)

        opened.pending.add(answer)
        opened.group.start_soon(run)
        try:
            return await answer
        except asyncio.CancelledError:
            # The caller is cancelled (abort, guidance): so is the request, and the SDK
            # tells the server. The caller does not wait for the server to stop.
            for scope in scopes:
                scope.cancel()
            raise
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._drop(opened, "the server closed the connection")
                raise self._unavailable(
                    f"the connection closed while {what} (the server exited or dropped it), "
                    "so whether it finished is unknown"
                ) from None
            if exc.code == REQUEST_TIMEOUT:
                raise self._unavailable(f"no answer within {timeout:g} s while {what}") from None
            raise self._unavailable(f"it answered with an error while {what}: {exc}") from None
        except ServerUnavailable:
            raise
        except Exception as exc:
            raise self._unavailable(f"{what} failed: {self._describe(exc)}") from None
        finally:
            opened.pending.discard(answer)

    def _unavailable(self, text: str) -> ServerUnavailable:
        return ServerUnavailable(self._redact(f"MCP server '{self.name}': {text}"))

    def _drop(self, opened: _Open, why: str) -> None:
        opened.ending = opened.ending or why
        opened.done.set()
        if self._open is opened:
            self._open = None

    # --- the connection ----------------------------------------------------------------

    async def _connected(self, *, patient: bool) -> _Open:
        """The open connection, or a new one. In the pause after a failed attempt a
        `patient` request (a call) waits for the next attempt; others (a listing, which
        must not hold up a turn) fail at once. Requests that arrived while an attempt was
        made share its outcome."""
        loop = asyncio.get_running_loop()
        arrived = loop.time()
        async with self._lock:
            opened = self._open
            if opened is not None and not opened.done.is_set():
                return opened
            if self._failed_at >= arrived:
                raise self._unavailable(self._last_error)
            wait = self._retry_at - loop.time()
            if wait > 0 and not patient:
                raise self._unavailable(
                    f"unavailable ({self._last_error}); the next try is in {wait:.1f} s"
                )
            if wait > 0:
                await asyncio.sleep(wait)
            ready: asyncio.Future[_Open] = loop.create_future()
            # A context of its own: the holder outlives the activity that opened it, and
            # must not carry that activity's context (its info, its log fields) along.
            holder = asyncio.create_task(
                self._hold(ready), name=f"MCP server {self.name}", context=contextvars.Context()
            )
            timeout = self.config.connect_timeout_s
            try:
                opened = await asyncio.wait_for(asyncio.shield(ready), timeout)
            except asyncio.CancelledError:
                holder.cancel()
                raise
            except Exception as exc:
                holder.cancel()
                if isinstance(exc, TimeoutError):
                    error = f"no answer within {timeout:g} s"
                else:
                    error = self._describe(exc)
                self._failures += 1
                pause = min(FIRST_PAUSE_S * 2 ** (self._failures - 1), MAX_PAUSE_S)
                self._failed_at = loop.time()
                self._retry_at = self._failed_at + pause
                self._last_error = f"could not connect: {error}"
                logger.warning("MCP server %s: %s", self.name, self._redact(self._last_error))
                raise self._unavailable(self._last_error) from None
            self._failures = 0
            self._open, self._holder = opened, holder
            self.opened_count += 1
            return opened

    async def _hold(self, ready: asyncio.Future[_Open]) -> None:
        """Open the connection, hand it over, keep it until it must end, then close it and
        answer what is still pending."""
        done = anyio.Event()
        opened: _Open | None = None
        try:
            async with (
                Client(_watched(self._transport(), done), cache=None) as client,
                anyio.create_task_group() as group,
            ):
                opened = _Open(client, group, done)
                ready.set_result(opened)
                await done.wait()
                opened.ending = opened.ending or "the server closed the connection"
                group.cancel_scope.cancel()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            elif opened is not None:
                opened.ending = f"the connection failed: {self._describe(exc)}"
                logger.warning("MCP server %s: %s", self.name, self._redact(opened.ending))
        finally:
            if opened is not None:
                if self._open is opened:
                    self._open = None
                why = opened.ending or "the connection ended"
                lost = f"{why.rstrip('.')} while a request was in flight"
                lost += ", so whether it finished is unknown"
                for answer in opened.pending:
                    if not answer.done():
                        answer.set_exception(self._unavailable(lost))

    def _transport(self) -> Transport:
        config = self.config
        if isinstance(config, StdioServer):
            params = StdioServerParameters(
                command=config.command,
                args=config.args,
                env={k: v.get_secret_value() for k, v in config.env.items()} or None,
                cwd=config.cwd,
            )
            return _stdio_transport(params, self.log)
        return _http_transport(config)

    def _describe(self, exc: BaseException) -> str:
        leaf = _first_leaf(exc)
        text = str(leaf) or "no details"
        return self._redact(f"{type(leaf).__name__}: {text}")

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


@contextlib.asynccontextmanager
async def _stdio_transport(params: StdioServerParameters, log: Path | None) -> AsyncIterator[Any]:
    if log is None:
        async with stdio_client(params) as streams:
            yield streams
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams


@contextlib.asynccontextmanager
async def _http_transport(config: HttpServer) -> AsyncIterator[Any]:
    headers = {k: v.get_secret_value() for k, v in config.headers.items()}
    timeout = httpx2.Timeout(config.connect_timeout_s, read=HTTP_READ_TIMEOUT_S)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(config.url, http_client=http) as streams,
    ):
        yield streams


@contextlib.asynccontextmanager
async def _watched(transport: Transport, ended: anyio.Event) -> AsyncIterator[Any]:
    """The transport's streams, with `ended` set when the server's side ends (a stdio
    server exits): the connection then closes before the next request is sent on it."""
    async with transport as (read, write):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def pump() -> None:
            try:
                async with send:
                    async for item in read:
                        await send.send(item)
            finally:
                ended.set()

        async with anyio.create_task_group() as group:
            group.start_soon(pump)
            try:
                yield receive, write
            finally:
                group.cancel_scope.cancel()


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _secrets(config: ServerConfig) -> list[str]:
    """Header and environment values, and their words (a token after `Bearer`), longest
    first, so an error message can be cleaned of them."""
    values = config.headers.values() if isinstance(config, HttpServer) else config.env.values()
    found: set[str] = set()
    for value in values:
        secret = value.get_secret_value()
        found.update(word for word in [secret, *secret.split()] if len(word) >= 4)
    return sorted(found, key=len, reverse=True)
