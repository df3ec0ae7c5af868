"""Prometheus metrics: a worker's endpoint (Temporal's SDK metrics and duragent's own) and
the API's `/metrics`, scraped over real HTTP while a run goes on; both off by default."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import httpx
import pytest
from approval_support import ASK_BASH, bash_call, calls_then_text, waiting_calls
from processes import WORKER_ARGS, spawn_python, stack_env
from prometheus_client.parser import text_string_to_metric_families
from support import BOTH_STORES, ApiServer, Stack, eventually

from duragent.api.app import MAX_BODY_BYTES
from duragent.client.api import DuragentClient
from duragent.client.connection import connect_temporal
from duragent.client.errors import DuragentError
from duragent.domain.compaction import CompactionSettings
from duragent.domain.entries import CompactionEntry
from duragent.settings import SettingError, Settings
from duragent.telemetry.metrics import worker_runtime
from duragent.worker import build_worker

SCRIPT = calls_then_text([bash_call("echo ran", "call_echo")], "All done.")
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples named `name` whose labels include `labels` (0: none)."""
    wanted = set(labels.items())
    return sum(v for (n, have), v in samples.items() if n == name and wanted <= have)


async def scrape(url: str) -> Samples:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(url)
    response.raise_for_status()
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


def spawn_worker(stack: Stack, **env: str) -> None:
    log = open(stack.settings.home / "worker.log", "wb")  # noqa: SIM115
    process = spawn_python(WORKER_ARGS, stack_env(stack.settings, stack.model.base_url, **env), log)
    stack.processes.append(process)  # killed when the stack closes


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on (Linux: its socket inodes in /proc/net)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


@BOTH_STORES  # the API's figures are SQL of their own
@pytest.mark.script(SCRIPT)
async def test_worker_and_api_metrics_move_as_a_run_does(stack: Stack) -> None:
    port = free_port()
    worker = f"http://127.0.0.1:{port}/metrics"
    spawn_worker(stack, DURAGENT_WORKER_METRICS=f"127.0.0.1:{port}")
    stack.client = DuragentClient(
        stack.temporal, stack.db, stack.settings.model_copy(update={"api_metrics": True})
    )
    api = ApiServer(stack)
    await api.start()
    try:
        api_url = f"http://127.0.0.1:{api.port}/metrics"
        session = await stack.client.sessions.create(owner="alice")  # the API's test user
        await stack.client.approvals.set_policy(session.id, ASK_BASH)
        run = await stack.client.runs.prompt(session.id, "echo it")
        await waiting_calls(stack, session.id)

        # Mid-run: one turn done, its call waiting for a person, nothing finished.
        during = await scrape(worker)
        assert value(during, "duragent_runs_started_total", kind="prompt") == 1
        assert value(during, "duragent_turns_total") == 1
        assert value(during, "duragent_model_tokens_total", kind="output") > 0
        assert value(during, "duragent_tool_call_duration_seconds_count") == 0
        assert value(during, "duragent_runs_finished_total") == 0
        # The SDK's own metrics come from the same endpoint.
        assert value(during, "temporal_workflow_task_execution_latency_count") > 0
        assert value(during, "temporal_activity_execution_latency_count") > 0
        shown = await scrape(api_url)
        assert value(shown, "duragent_approvals_waiting") == 1
        assert value(shown, "duragent_runs_in_progress", phase="awaiting_approval") == 1
        assert value(shown, "duragent_sessions") == 1

        await stack.client.approvals.approve(session.id, "call_echo")
        result = await asyncio.wait_for(run.result(), timeout=60)
        assert result.status == "completed", result.error

        async def finished_counted() -> bool:
            return value(await scrape(worker), "duragent_runs_finished_total") == 1

        await eventually(finished_counted)  # finish_run's count is taken as it returns
        after = await scrape(worker)
        assert value(after, "duragent_runs_finished_total", status="completed") == 1
        model = stack.settings.model
        assert value(after, "duragent_turns_total", model=model) == 2
        tokens = value(after, "duragent_model_tokens_total", model=model)
        assert tokens == result.usage.input_tokens + result.usage.output_tokens + (
            result.usage.cache_read_tokens + result.usage.cache_write_tokens
        )
        assert value(after, "duragent_model_call_cost_usd_count", model=model) == 2
        assert value(after, "duragent_model_call_cost_usd_sum", model=model) > 0
        assert (
            value(after, "duragent_tool_call_duration_seconds_count", tool="bash", outcome="ok")
            == 1
        )
        async with api.client() as http:
            assert (await http.get(f"/api/sessions/{session.id}/state")).status_code == 200
            assert (await http.get(f"/no/such/{session.id}")).status_code == 404
            too_large = b"x" * (MAX_BODY_BYTES + 1)
            refused = await http.post(f"/api/sessions/{session.id}/input", content=too_large)
            assert refused.status_code == 413
        shown = await scrape(api_url)
        assert value(shown, "duragent_approvals_waiting") == 0
        assert value(shown, "duragent_runs_in_progress") == 0
        # The API counts what it answered (this scrape once it has) by route template,
        # never by a path with ids in it.
        assert value(shown, "duragent_api_requests_total", route="/metrics", code="200") == 1
        state = "/api/sessions/{session_id}/state"
        assert value(shown, "duragent_api_requests_total", route=state, code="200") == 1
        assert value(shown, "duragent_api_requests_total", route="unmatched", code="404") == 1
        # Refused before routing (too large), but counted under the route it was for.
        sent = "/api/sessions/{session_id}/input"
        assert value(shown, "duragent_api_requests_total", route=sent, code="413") == 1
        assert not any(session.id in str(labels) for _, labels in shown)
    finally:
        await api.stop()


DELEGATES = {"tool_use": {"name": "delegate", "input": {"prompt": "Child: say hi"}}}


@pytest.mark.script({"conversations": {"*": [{"match": "^Child", "reply": [{"text": "hi"}]}]}})
async def test_a_delegate_call_counts_as_a_tool_call_of_its_whole_duration(stack: Stack) -> None:
    # The worker in this process, as `duragent run` starts one: its client on the runtime.
    settings = stack.settings.model_copy(update={"worker_metrics": f"127.0.0.1:{free_port()}"})
    client = await connect_temporal(settings, runtime=worker_runtime(settings))
    session = await stack.client.sessions.create()
    stack.model.add_steps(
        session.id, [{"reply": [DELEGATES]}, {"reply": [{"text": "Done."}]}], replace=True
    )
    async with build_worker(client, stack.db, settings):
        result = await asyncio.wait_for(
            (await stack.client.runs.prompt(session.id, "go")).result(), 60
        )
    assert result.status == "completed", result.error
    samples = await scrape(f"http://{settings.worker_metrics}/metrics")
    delegated = "duragent_tool_call_duration_seconds_count"
    assert value(samples, delegated, tool="delegate", outcome="ok") == 1
    # The child's run and turn count as well: it is a run on this worker like the parent.
    assert value(samples, "duragent_runs_finished_total", status="completed") == 2
    assert value(samples, "duragent_turns_total") == 3


@pytest.mark.script({"conversations": {"*": [{"reply": [{"text": "Hi."}]}]}})
async def test_metrics_are_off_by_default(stack: Stack, api: ApiServer) -> None:
    spawn_worker(stack)
    session = await stack.client.sessions.create()
    result = await asyncio.wait_for((await stack.client.runs.prompt(session.id, "hi")).result(), 60)
    assert result.status == "completed", result.error
    [worker] = stack.processes
    assert listening_ports(worker.pid) == set()  # no metrics port, nor any other
    async with api.client() as http:
        assert (await http.get("/metrics")).status_code == 404
        assert (await http.get("/api/sessions")).status_code == 200


def test_a_bad_metrics_address_is_refused_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(SettingError, match=r"DURAGENT_WORKER_METRICS: 'nine' is not host:port"):
        Settings.from_env(home=tmp_path, worker_metrics="nine")
    with pytest.raises(SettingError, match="port from 1 to 65535"):
        Settings.from_env(home=tmp_path, worker_metrics="127.0.0.1:70000")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(DuragentError, match=f"DURAGENT_WORKER_METRICS={address}: cannot"):
            worker_runtime(Settings.from_env(home=tmp_path, worker_metrics=address))


SUMMARY_USAGE = {"input_tokens": 30_000, "output_tokens": 700}
READS_THEN_SUMMARY = {
    "conversations": {
        "*": [
            {"reply": [{"tool_use": {"name": "read", "input": {"path": "part.txt"}}}]},
            {"reply": [{"text": "read it"}]},
            {
                "match": "You are compacting",
                "reply": [{"text": "## Goal\nRead."}],
                "usage": SUMMARY_USAGE,
            },
        ]
    }
}


@pytest.mark.script(READS_THEN_SUMMARY)
async def test_a_compaction_summary_counts_in_tokens_and_cost_not_turns(stack: Stack) -> None:
    settings = stack.settings.model_copy(update={"worker_metrics": f"127.0.0.1:{free_port()}"})
    client = await connect_temporal(settings, runtime=worker_runtime(settings))
    session = await stack.client.sessions.create()
    (Path(session.workspace) / "part.txt").write_text("0123456789 " * 400)
    url = f"http://{settings.worker_metrics}/metrics"
    model = stack.settings.model
    async with build_worker(client, stack.db, settings):
        await asyncio.wait_for((await stack.client.runs.prompt(session.id, "read it")).result(), 60)
        before = await scrape(url)
        await stack.client.tree.compact(
            session.id, settings=CompactionSettings(keep_recent_tokens=100)
        )
        after = await scrape(url)
    assert value(after, "duragent_turns_total") == value(before, "duragent_turns_total") == 2
    [compaction] = [
        e for e in await stack.client.tree.entries(session.id) if isinstance(e, CompactionEntry)
    ]
    assert compaction.usage is not None and compaction.usage.input_tokens >= 30_000
    summary = compaction.usage
    for kind, count in (("input", summary.input_tokens), ("output", summary.output_tokens)):
        added = value(after, "duragent_model_tokens_total", model=model, kind=kind) - value(
            before, "duragent_model_tokens_total", model=model, kind=kind
        )
        assert added == count
    assert value(after, "duragent_model_call_cost_usd_count", model=model) == 3  # turns and summary
