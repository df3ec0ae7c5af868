"""`duragent setup-temporal` on a namespace that has none of duragent's search attributes
(a cluster's, unlike the dev server's default one): it adds them, says so, changes nothing
when run again, and the namespace then runs sessions."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from google.protobuf.duration_pb2 import Duration
from processes import REPO
from support import eventually
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.api.workflowservice.v1 import (
    CountWorkflowExecutionsRequest,
    RegisterNamespaceRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError

from duragent.temporal_dev import SEARCH_ATTRIBUTES, DevServer


def duragent(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "DURAGENT_"))}
    return subprocess.run(
        [sys.executable, "-m", "duragent.client.cli", *args],
        cwd=cwd,
        env={**env, "PYTHONPATH": str(REPO), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )


async def new_namespace(temporal: Client) -> str:
    namespace = f"setup-{uuid.uuid4().hex[:8]}"
    await temporal.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=namespace, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )

    async def usable() -> bool:  # the frontend learns of a new namespace within seconds
        try:
            request = CountWorkflowExecutionsRequest(namespace=namespace)
            await temporal.workflow_service.count_workflow_executions(request, retry=False)
        except RPCError:
            return False
        return True

    await eventually(usable, timeout=30)
    return namespace


async def custom_attributes(temporal: Client, namespace: str) -> dict[str, int]:
    listed = await temporal.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    return dict(listed.custom_attributes)


async def test_setup_adds_the_search_attributes_once_and_the_namespace_runs_sessions(
    dev_server: DevServer, temporal: Client, tmp_path: Path
) -> None:
    namespace = await new_namespace(temporal)
    assert not set(SEARCH_ATTRIBUTES) & set(await custom_attributes(temporal, namespace))
    flags = [f"--temporal-address={dev_server.address}", f"--namespace={namespace}"]

    first = duragent(tmp_path, *flags, "setup-temporal")
    assert first.returncode == 0, first.stderr
    names = ", ".join(SEARCH_ATTRIBUTES)
    assert first.stdout.splitlines() == [f"Namespace {namespace}: added search attributes {names}"]
    assert set(SEARCH_ATTRIBUTES) <= set(await custom_attributes(temporal, namespace))

    again = duragent(tmp_path, *flags, "setup-temporal")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [f"Namespace {namespace}: already has {names}"]

    ran = duragent(tmp_path, *flags, "run", "Write a hello script and run it")
    assert ran.returncode == 0, ran.stderr
    assert "run completed after 4 turn(s)" in ran.stdout
    assert "Started a Temporal dev server" not in ran.stderr


async def test_a_namespace_without_the_search_attributes_is_named_with_the_fix(
    dev_server: DevServer, temporal: Client, tmp_path: Path
) -> None:
    namespace = await new_namespace(temporal)
    flags = [f"--temporal-address={dev_server.address}", f"--namespace={namespace}"]
    ran = duragent(tmp_path, *flags, "run", "Write a hello script and run it")
    assert ran.returncode == 2, (ran.stdout, ran.stderr)
    assert "Traceback" not in ran.stderr
    said = [line for line in ran.stderr.splitlines() if "search attributes" in line]
    assert len(said) == 1, ran.stderr
    assert f"Temporal namespace {namespace} lacks duragent's search attributes" in said[0]
    assert "duragent setup-temporal" in said[0]
