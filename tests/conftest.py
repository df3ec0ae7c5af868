"""Fixtures: one real Temporal dev server per test session, a fresh stack per test."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from postgres_server import PostgresServer, find_binaries, new_database
from support import POSTGRES_ENV, PROTOCOL_MODELS, ApiServer, Stack, open_stack
from temporalio.client import Client

from duragent.client.connection import connect_temporal
from duragent.domain.models import PROVIDERS
from duragent.settings import Settings
from duragent.temporal_dev import DevServer

SUITE_CONTROLS = (
    "DURAGENT_TEST_",
    "DURAGENT_REQUIRE_",
    "DURAGENT_CHROMIUM",
    "DURAGENT_TEMPORAL_BIN",
    "DURAGENT_SOAK_SEED",
    "DURAGENT_SCREENSHOTS",
)
"""The variables that steer the suite itself (what it requires, where it finds servers and
binaries); every other duragent, Temporal, model-provider or tracing variable of the shell
is cleared, so that no test depends on the caller's environment (a task queue, an address
or a real API key set there)."""
CLEARED = ("DURAGENT_", "TEMPORAL_", "ANTHROPIC_", "OTEL_")
PROVIDER_VARIABLES = frozenset(
    name
    for provider in PROVIDERS.values()
    for name in (provider.key_env, provider.base_url_env)
    if name is not None
)
"""Every provider's key and address (`OPENAI_API_KEY`, `OLLAMA_BASE_URL`, ...): cleared
too, so that a caller's key never reaches a test."""


def clear_callers_environment() -> None:
    for name in list(os.environ):
        cleared = name.startswith(CLEARED) or name in PROVIDER_VARIABLES
        if cleared and not name.startswith(SUITE_CONTROLS):
            del os.environ[name]


def pytest_configure(config: pytest.Config) -> None:
    clear_callers_environment()
    # The CLI tests press Ctrl-C as a terminal does for its foreground job. A suite started
    # as a shell's background job (`make test &`) has SIGINT ignored, its children inherit
    # that, and the CLI rightly keeps a signal its parent ignores: the commands the tests
    # start get SIGINT as a foreground job would (a Python handler is reset at exec).
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL server: `DURAGENT_TEST_POSTGRES`, or a throwaway one
    started here. Without PostgreSQL installed the test is skipped, unless
    `DURAGENT_REQUIRE_POSTGRES` is set (CI sets it): then it fails."""
    if os.environ.get(POSTGRES_ENV):
        yield os.environ[POSTGRES_ENV]
        return
    server = PostgresServer(_postgres_binaries()).start()
    try:
        yield server.url
    finally:
        server.stop()


def _postgres_binaries() -> Any:
    """The machine's PostgreSQL binaries; without them the test is skipped, unless
    `DURAGENT_REQUIRE_POSTGRES` is set (CI sets it): then it fails."""
    binaries = find_binaries()
    if binaries is None:
        reason = "PostgreSQL is not installed (Debian: apt-get install postgresql)"
        if os.environ.get("DURAGENT_REQUIRE_POSTGRES"):
            pytest.fail(reason)
        pytest.skip(reason)
    return binaries


@pytest.fixture
def own_postgres() -> PostgresServer:
    """A PostgreSQL server of the test's own, not started: the test stops and starts it
    again mid-test."""
    return PostgresServer(_postgres_binaries())


@pytest.fixture
def database(request: pytest.FixtureRequest) -> str:
    """The store's kind: `sqlite` unless a test parametrizes it (`indirect=True`)."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture
def protocol(request: pytest.FixtureRequest) -> str:
    """The wire API the stack's model speaks: `anthropic` unless a test parametrizes it
    (`support.BOTH_PROTOCOLS`); the stack's default model is the protocol's (`MODELS`)."""
    return str(getattr(request, "param", "anthropic"))


StackFactory = Callable[[Any], Any]


@pytest.fixture
async def stack_factory(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    temporal: Client,
    dev_server: DevServer,
    database: str,
    protocol: str,
) -> AsyncIterator[Callable[..., Any]]:
    """`async with stack_factory(script) as stack:` — several per test are fine."""
    count = 0
    server = request.getfixturevalue("postgres_server") if database == "postgresql" else None
    in_process = request.node.get_closest_marker("in_process_model") is not None

    def make(script: Any) -> Any:
        nonlocal count
        count += 1
        home = tmp_path / f"stack{count}"
        home.mkdir()
        url = new_database(server) if server else None
        return open_stack(
            home,
            temporal,
            dev_server.address,
            script,
            database_url=url,
            default_model=PROTOCOL_MODELS[protocol],
            in_process_model=in_process,
        )

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
