"""Fixtures: one real Temporal dev server per test session, a fresh stack per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from support import ApiServer, Stack, open_stack
from temporal_dev import DevServer
from temporalio.client import Client

from client.connection import connect_temporal
from settings import Settings


@pytest.fixture(scope="session")
async def dev_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    folder = tmp_path_factory.mktemp("temporal")
    server = DevServer(folder / "temporal.db")
    await server.astart()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
async def temporal(dev_server: DevServer) -> Client:
    settings = Settings.from_env(home=Path("/tmp"), temporal_address=dev_server.address)
    return await connect_temporal(settings)


StackFactory = Callable[[Any], Any]


@pytest.fixture
async def stack_factory(
    tmp_path: Path, temporal: Client, dev_server: DevServer
) -> AsyncIterator[Callable[..., Any]]:
    """`async with stack_factory(script) as stack:` — several per test are fine."""
    count = 0

    def make(script: Any) -> Any:
        nonlocal count
        count += 1
        home = tmp_path / f"stack{count}"
        home.mkdir()
        return open_stack(home, temporal, dev_server.address, script)

    yield make


@pytest.fixture
async def stack(
    request: pytest.FixtureRequest, stack_factory: Callable[..., Any]
) -> AsyncIterator[Stack]:
    """A stack whose offline model plays the test's `@pytest.mark.script(...)`."""
    marker = request.node.get_closest_marker("script")
    script = marker.args[0] if marker else {"conversations": {"*": []}}
    async with stack_factory(script) as built:
        yield built


@pytest.fixture
async def api(stack: Stack) -> AsyncIterator[ApiServer]:
    """The HTTP API over the test's stack (users alice and bob, see `ApiServer`)."""
    server = ApiServer(stack)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
