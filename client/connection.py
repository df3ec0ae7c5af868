"""Connections every process makes: Temporal (with the pydantic converter) and the store."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from temporalio.api.workflowservice.v1 import (
    CountWorkflowExecutionsRequest,
    GetSystemInfoRequest,
)
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS, ClientConnectConfig
from temporalio.runtime import Runtime

from duragent.client.home_temporal import running_home_server
from duragent.settings import Settings
from duragent.store.db import Database
from duragent.telemetry import tracing
from duragent.temporal_dev import is_reachable

T = TypeVar("T")

RETRY_CAP_S = 5.0
"""The longest wait between two tries of a service that is not up yet."""


async def connect_temporal(settings: Settings, *, runtime: Runtime | None = None) -> Client:
    """`runtime`: the Temporal runtime to run on (a worker's may serve metrics); None:
    the SDK's default."""
    return await Client.connect(
        **temporal_connect_config(settings),
        data_converter=pydantic_data_converter,
        runtime=runtime,
        # Traces when the OTEL_* variables ask for them; none at all otherwise.
        interceptors=tracing.client_interceptors(),
    )


def temporal_connect_config(settings: Settings) -> ClientConnectConfig:
    """`Client.connect`'s address, namespace, TLS and API key for `settings`, turned into
    them by Temporal's own client configuration, as its CLI and SDKs would for the same
    variables. The TLS files are read here (they were checked with the settings)."""
    tls = None  # an API key alone: TLS with the system's roots, as for Temporal Cloud
    if settings.temporal_tls is False:
        tls = ClientConfigTLS(disabled=True)
    elif settings.temporal_tls or settings.temporal_tls_given:
        tls = ClientConfigTLS(
            server_name=settings.temporal_tls_server_name,
            server_root_ca_cert=settings.temporal_tls_server_ca,
            client_cert=settings.temporal_tls_client_cert,
            client_private_key=settings.temporal_tls_client_key,
        )
    key = settings.temporal_api_key
    profile = ClientConfigProfile(
        address=settings.temporal_address,
        namespace=settings.temporal_namespace,
        api_key=key.get_secret_value() if key is not None else None,
        tls=tls,
    )
    return profile.to_client_connect_config()


async def temporal_reachable(settings: Settings, timeout: float = 10.0) -> bool:
    """Whether the Temporal of `settings` serves its namespace now. Never raises.

    A plain connection is probed as the dev server's start is (a TCP check first, so a
    closed local port answers at once); a TLS one connects as every process will, with
    its certificates and key, and makes the same two cheap calls.
    """
    if not settings.temporal_tls_on and settings.temporal_api_key is None:
        return await is_reachable(settings.temporal_address, settings.temporal_namespace)
    deadline = timedelta(seconds=timeout)
    try:
        async with asyncio.timeout(timeout):
            service = (await connect_temporal(settings)).workflow_service
            await service.get_system_info(GetSystemInfoRequest(), retry=False, timeout=deadline)
            await service.count_workflow_executions(
                CountWorkflowExecutionsRequest(namespace=settings.temporal_namespace),
                retry=False,
                timeout=deadline,
            )
    except Exception:
        return False
    return True


def open_store(settings: Settings) -> Database:
    return Database(
        settings.database_url,
        pool_size=settings.database_pool_size,
        prepared_statements=settings.database_prepared_statements,
    )


def stderr_notice(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def connect_when_up(
    settings: Settings,
    *,
    runtime: Runtime | None = None,
    notice: Callable[[str], None] = stderr_notice,
) -> tuple[Client, Database, Settings]:
    """Temporal and the store, waiting for each that is not up yet (a worker started
    with or before them, or while one restarts): a long-running process outlives its
    services' restarts rather than exiting. It says once what it waits for, and why.
    Also returns the settings Temporal was reached with: with no `TEMPORAL_ADDRESS`, the
    home's own dev server, wherever its record says it runs (`client.home_temporal`)."""
    reached = settings

    async def temporal() -> Client:
        nonlocal reached
        if settings.home_dev_server:
            running = await running_home_server(settings)
            if running is None:
                raise RuntimeError(
                    "not running (`duragent dev-server`, or any command that needs it, starts it)"
                )
            reached = running
        # A quick look first: the SDK's own connect tries for many seconds before failing.
        elif not await temporal_reachable(settings):
            raise RuntimeError(f"no answer for namespace {settings.temporal_namespace}")
        return await connect_temporal(reached, runtime=runtime)

    what = (
        f"this folder's Temporal dev server (on {settings.dev_server_db})"
        if settings.home_dev_server
        else f"Temporal at {settings.temporal_address}"
    )
    client = await _when_up(what, temporal, (RuntimeError,), notice)
    url = make_url(settings.database_url)
    # A local SQLite file that cannot be opened is a setting to fix, not a server to wait for.
    waits_for = (OperationalError,) if url.get_backend_name() != "sqlite" else ()
    where = f"the database at {url.host}:{url.port or 5432}" if url.host else "the database"
    db = await _when_up(where, lambda: asyncio.to_thread(open_store, settings), waits_for, notice)
    return client, db, reached


async def _when_up(
    what: str,
    attempt: Callable[[], Awaitable[T]],
    waits_for: tuple[type[Exception], ...],
    notice: Callable[[str], None],
) -> T:
    delay, told = 0.25, False
    while True:
        try:
            result = await attempt()
        except waits_for as err:
            if not told:
                reason = " ".join(str(err).split())[:300] or type(err).__name__
                notice(f"{what} is not reachable ({reason}); waiting for it")
                told = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_CAP_S)
            continue
        if told:
            notice(f"{what} is up")
        return result
