"""Tests for ``temporal_dev``: they start and stop the real Temporal dev server.

Each test starts its own server on a free port with a throwaway SQLite file;
a start takes well under a second, so isolation is cheap.
"""

from __future__ import annotations

import os
import socket
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import activity, workflow
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.worker import Worker

# The workflow sandbox re-imports this module; passing the import through makes it reuse
# the package already loaded.
with workflow.unsafe.imports_passed_through():
    from duragent import temporal_dev


SESSION_KEY = SearchAttributeKey.for_keyword("DuragentSessionId")


@activity.defn
async def greet(name: str) -> str:
    return f"hello, {name}"


@workflow.defn
class GreetWorkflow:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            greet, name, start_to_close_timeout=timedelta(seconds=10)
        )


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists but not ours (cannot happen for our child)
        return True
    return True


def _fake_binary(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "fake-temporal"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


async def _run_greeting(client: Client, workflow_id: str) -> str:
    task_queue = f"tq-{uuid.uuid4()}"
    async with Worker(client, task_queue=task_queue, workflows=[GreetWorkflow], activities=[greet]):
        return await client.execute_workflow(
            GreetWorkflow.run,
            "world",
            id=workflow_id,
            task_queue=task_queue,
            search_attributes=TypedSearchAttributes([SearchAttributePair(SESSION_KEY, "s-1")]),
        )


async def test_workflow_runs_and_survives_restart(tmp_path: Path) -> None:
    db_file = tmp_path / "temporal.db"
    workflow_id = f"wf-{uuid.uuid4()}"

    async with temporal_dev.DevServer(db_file) as server:
        assert server.is_running()
        assert server.address == f"127.0.0.1:{server.port}"
        assert server.ui_url is None
        with pytest.raises(temporal_dev.DevServerError, match="already running"):
            await server.astart()
        assert server.is_running()
        client = await Client.connect(server.address)

        attrs = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace="default")
        )
        for name in temporal_dev.SEARCH_ATTRIBUTES:
            assert name in attrs.custom_attributes, name
            assert attrs.custom_attributes[name] == IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD

        assert await _run_greeting(client, workflow_id) == "hello, world"

    assert not server.is_running()
    assert server.log_file == db_file.with_suffix(".log")
    assert server.log_file.exists()

    # A new object (and port) on the same file sees the finished execution.
    async with temporal_dev.DevServer(db_file) as restarted:
        client = await Client.connect(restarted.address)
        handle = client.get_workflow_handle(workflow_id)
        description = await handle.describe()
        assert description.status == WorkflowExecutionStatus.COMPLETED
        assert description.typed_search_attributes.get(SESSION_KEY) == "s-1"
        assert await handle.result() == "hello, world"


async def test_is_reachable_tracks_server_lifetime(tmp_path: Path) -> None:
    # Sync context manager from async code: start() must not nest asyncio.run.
    with temporal_dev.DevServer(tmp_path / "temporal.db") as server:
        assert await temporal_dev.is_reachable(server.address)
        assert not await temporal_dev.is_reachable(server.address, namespace="no-such-ns")
        address = server.address
    assert not await temporal_dev.is_reachable(address)
    server.stop()  # idempotent


async def test_custom_namespace_is_created(tmp_path: Path) -> None:
    server = temporal_dev.DevServer(tmp_path / "temporal.db", namespace="duragent-test")
    await server.astart()
    try:
        assert await temporal_dev.is_reachable(server.address, namespace="duragent-test")
    finally:
        await server.astop()


async def test_kill_leaves_no_process_and_db_recovers(tmp_path: Path) -> None:
    db_file = tmp_path / "temporal.db"
    workflow_id = f"wf-{uuid.uuid4()}"
    server = temporal_dev.DevServer(db_file)
    await server.astart()
    try:
        pid = server.pid
        assert pid is not None
        await _run_greeting(await Client.connect(server.address), workflow_id)
    finally:
        server.kill()

    assert not server.is_running()
    assert server.pid is None
    assert not _group_exists(pid)
    assert not await temporal_dev.is_reachable(server.address)
    server.kill()  # idempotent
    server.stop()

    # The same object restarts on the crashed file and still has the execution.
    async with server:
        client = await Client.connect(server.address)
        description = await client.get_workflow_handle(workflow_id).describe()
        assert description.status == WorkflowExecutionStatus.COMPLETED


async def test_missing_binary_override_fails_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bogus = tmp_path / "does-not-exist"
    monkeypatch.setenv(temporal_dev.BINARY_ENV_VAR, str(bogus))
    with pytest.raises(temporal_dev.DevServerError, match="DURAGENT_TEMPORAL_BIN"):
        temporal_dev.find_temporal_binary()
    server = temporal_dev.DevServer(tmp_path / "temporal.db")
    with pytest.raises(temporal_dev.DevServerError, match=str(bogus)):
        await server.astart()
    assert not server.is_running()


async def test_binary_that_exits_reports_code_and_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _fake_binary(tmp_path, 'echo "fake temporal: unknown command $1" >&2\nexit 3')
    monkeypatch.setenv(temporal_dev.BINARY_ENV_VAR, str(fake))
    server = temporal_dev.DevServer(tmp_path / "temporal.db")
    with pytest.raises(temporal_dev.DevServerError) as excinfo:
        await server.astart(timeout=10)
    message = str(excinfo.value)
    assert "exited with code 3" in message
    assert "fake temporal: unknown command server" in message
    assert not server.is_running()


async def test_start_timeout_stops_the_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _fake_binary(tmp_path, "echo starting up\nexec sleep 60")
    monkeypatch.setenv(temporal_dev.BINARY_ENV_VAR, str(fake))
    server = temporal_dev.DevServer(tmp_path / "temporal.db")
    with pytest.raises(temporal_dev.DevServerError, match=r"not ready after 0\.5s") as excinfo:
        await server.astart(timeout=0.5)
    assert "starting up" in str(excinfo.value)
    assert not server.is_running()


async def test_port_in_use_is_refused(tmp_path: Path) -> None:
    async with temporal_dev.DevServer(tmp_path / "a.db") as first:
        second = temporal_dev.DevServer(tmp_path / "b.db", port=first.port)
        with pytest.raises(temporal_dev.DevServerError, match="already in use"):
            await second.astart()
        assert first.is_running()


async def test_taken_auto_port_is_repicked_on_first_start(tmp_path: Path) -> None:
    server = temporal_dev.DevServer(tmp_path / "temporal.db")
    taken = server.port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        async with server:
            assert server.port != taken
            assert await temporal_dev.is_reachable(server.address)


def test_default_binary_and_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(temporal_dev.BINARY_ENV_VAR, raising=False)
    binary = temporal_dev.find_temporal_binary()
    assert binary.name == "temporal"
    assert os.access(binary, os.X_OK)

    server = temporal_dev.DevServer(
        tmp_path / "t.db", port=17999, headless=False, ui_port=18999, namespace="ns"
    )
    argv = server.command(binary)
    assert argv[:3] == [str(binary), "server", "start-dev"]
    joined = " ".join(argv)
    assert f"--db-filename {tmp_path / 't.db'}" in joined
    assert "--port 17999 --ip 127.0.0.1 --namespace ns" in joined
    assert "--search-attribute DuragentSessionId=Keyword" in joined
    assert "--dynamic-config-value history.transferProcessorMaxPollRPS=10000" in joined
    assert "--sqlite-pragma journal_mode=wal" in joined
    assert "--ui-port 18999" in joined and "--headless" not in joined
    assert server.ui_url == "http://127.0.0.1:18999"
    assert "--namespace" not in temporal_dev.DevServer(tmp_path / "t.db").command(binary)


async def test_opentelemetry_variables_are_not_the_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Set for duragent's own traces; the server refuses an exporter it lacks.
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    async with temporal_dev.DevServer(tmp_path / "temporal.db") as server:
        assert await temporal_dev.is_reachable(server.address)
