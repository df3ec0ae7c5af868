"""Whether a Temporal frontend serves a namespace: a TCP check, then two cheap RPCs."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from datetime import timedelta
from typing import Final

from temporalio.api.workflowservice.v1 import (
    CountWorkflowExecutionsRequest,
    GetSystemInfoRequest,
)
from temporalio.client import Client

from .ports import split_address

#: Per-RPC deadline while probing readiness, so one hung call cannot eat the
#: whole start timeout.
PROBE_RPC_TIMEOUT: Final = 5.0


async def is_reachable(address: str, namespace: str = "default", timeout: float = 2.0) -> bool:
    """Return whether a Temporal frontend at ``address`` serves ``namespace``.

    A plain TCP check is not enough (a half-started server accepts connections
    before the namespace is usable), so this also connects a client and makes
    two cheap RPCs. Never raises; any failure or exceeding ``timeout`` seconds
    in total yields ``False``.
    """
    try:
        host, port = split_address(address)
        async with asyncio.timeout(timeout):
            # Fail fast on a closed port instead of letting the client's own
            # connect logic spend the whole budget.
            if not await tcp_open(host, port, timeout):
                return False
            await probe(address, namespace, rpc_timeout=timeout)
    except Exception:
        return False
    return True


def tcp_open_sync(host: str, port: int, timeout: float) -> bool:
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=timeout):
            return True
    except OSError:
        return False


async def tcp_open(host: str, port: int, timeout: float) -> bool:
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(host.strip("[]"), port)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


async def probe(address: str, namespace: str, *, rpc_timeout: float) -> None:
    """Raise unless the frontend answers and ``namespace`` is queryable.

    ``get_system_info`` proves the frontend serves RPCs; counting executions
    proves the namespace is registered and visibility (SQLite) answers, which
    a freshly started server briefly does not.
    """
    client = await Client.connect(address, namespace=namespace)
    service = client.workflow_service
    deadline = timedelta(seconds=rpc_timeout)
    await service.get_system_info(GetSystemInfoRequest(), retry=False, timeout=deadline)
    await service.count_workflow_executions(
        CountWorkflowExecutionsRequest(namespace=namespace), retry=False, timeout=deadline
    )
