"""Connections every process makes: Temporal (with the pydantic converter) and the store."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio.api.workflowservice.v1 import (
    CountWorkflowExecutionsRequest,
    GetSystemInfoRequest,
)
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS, ClientConnectConfig
from temporalio.runtime import Runtime

from duragent.settings import Settings
from duragent.store.db import Database
from duragent.telemetry import tracing
from duragent.temporal_dev import is_reachable


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
    return Database(settings.database_url, pool_size=settings.database_pool_size)
