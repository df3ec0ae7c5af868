"""OpenTelemetry traces: one trace per run, from the client call through the workflow to
every activity, a GenAI span per model call and a span per tool call; none duplicated
when a worker dies and another replays the run; off by default, and then no cost."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from support import REPO, Stack, eventually, open_stack
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from duragent.activities.models.anthropic_model import AnthropicModel
from duragent.activities.models.clients import ModelClients
from duragent.domain.entries import MessageEntry
from duragent.domain.messages import AssistantMessage
from duragent.domain.runs import session_workflow_id
from duragent.offline_model import Script
from duragent.store import events
from duragent.telemetry import tracing
from duragent.telemetry.call_spans import CallContext
from duragent.temporal_dev import DevServer
from duragent.worker import model_clients


@dataclass(frozen=True)
class Span:
    """A finished span, whichever process exported it."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    attributes: dict[str, Any]
    error: bool
    service: str
    start_ns: int
    end_ns: int

    @classmethod
    def of(cls, span: ReadableSpan) -> Span:
        context, parent = span.get_span_context(), span.parent
        assert context is not None
        return cls(
            name=span.name,
            trace_id=f"{context.trace_id:032x}",
            span_id=f"{context.span_id:016x}",
            parent_id=f"{parent.span_id:016x}" if parent else None,
            attributes=dict(span.attributes or {}),
            error=span.status.status_code == StatusCode.ERROR,
            service=str(span.resource.attributes.get("service.name")),
            start_ns=span.start_time or 0,
            end_ns=span.end_time or 0,
        )


class Receiver:
    """A small OTLP/HTTP trace receiver: what worker processes export, decoded."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                receiver._add(request, self.path, self.headers.get("Content-Type"))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _add(self, request: ExportTraceServiceRequest, path: str, kind: str | None) -> None:
        assert path == "/v1/traces" and kind == "application/x-protobuf", (path, kind)
        found = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(
                        Span(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex() or None,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            error=span.status.code == 2,  # STATUS_CODE_ERROR
                            service=str(resource.get("service.name")),
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                        )
                    )
        with self._lock:
            self.spans += found

    def named(self, name: str) -> list[Span]:
        with self._lock:
            return [s for s in self.spans if s.name == name]

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


@dataclass
class Traced:
    """A stack whose client traces into `exporter` (the test process's spans)."""

    stack: Stack
    exporter: InMemorySpanExporter
    provider: TracerProvider

    @contextlib.asynccontextmanager
    async def worker(self) -> AsyncIterator[Worker]:
        """An in-process worker on the traced client, its model client tracing too."""
        made = model_clients(self.stack.settings)
        claude = made.for_model(self.stack.settings.model)
        assert isinstance(claude, AnthropicModel)
        model = claude.with_options(
            open_telemetry={**claude.sdk.open_telemetry, "tracer_provider": self.provider}
        )
        models = ModelClients(given={"anthropic": model})
        try:
            async with self.stack.worker(models=models) as worker:
                yield worker
        finally:
            await made.aclose()  # the worker closes only model clients it made

    def client_spans(self) -> list[Span]:
        return [Span.of(s) for s in self.exporter.get_finished_spans()]


@pytest.fixture
async def traced(tmp_path: Path, dev_server: DevServer) -> AsyncIterator[Any]:
    """`async with traced(script) as t:` a stack whose Temporal client traces (and so do
    the in-process workers built on it), into an in-memory exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(CallContext())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    temporal = await Client.connect(
        dev_server.address,
        data_converter=pydantic_data_converter,
        interceptors=tracing.client_interceptors(provider),
    )

    @contextlib.asynccontextmanager
    async def make(script: dict[str, Any]) -> AsyncIterator[Traced]:
        home = tmp_path / "stack"
        home.mkdir()
        played = Script.model_validate(script)
        async with open_stack(home, temporal, dev_server.address, played) as built:
            yield Traced(built, exporter, provider)

    yield make
    provider.shutdown()


def children(spans: list[Span], parent: Span) -> list[Span]:
    return [s for s in spans if s.parent_id == parent.span_id]


def by_id(spans: list[Span]) -> dict[str, Span]:
    return {s.span_id: s for s in spans}


def assistant_messages(stack: Stack, session_id: str) -> list[AssistantMessage]:
    path = stack.client.sync.tree.path(session_id)
    return [
        e.message
        for e in path
        if isinstance(e, MessageEntry) and isinstance(e.message, AssistantMessage)
    ]


TWO_TOOLS_AFTER_A_RETRY = {
    "conversations": {
        "*": [
            {"error": {"status": 529}},  # the provider is overloaded: the run retries
            {
                "reply": [
                    {"text": "Looking around."},
                    {"tool_use": {"name": "ls", "input": {}}},
                    {"tool_use": {"name": "bash", "input": {"command": "echo hi"}}},
                ],
                "usage": {"input_tokens": 120, "output_tokens": 30, "cache_read_input_tokens": 7},
            },
            {"reply": [{"text": "Done."}]},
        ]
    }
}


async def test_a_run_is_one_trace_with_a_span_per_model_and_tool_call(traced: Any) -> None:
    async with traced(TWO_TOOLS_AFTER_A_RETRY) as t:
        stack = t.stack
        session = await stack.client.sessions.create()
        options = stack.client.runs.default_options().model_copy(update={"provider_backoff_s": 0.2})
        async with t.worker():
            run = await stack.client.runs.prompt(session.id, "look around", options=options)
            result = await asyncio.wait_for(run.result(), timeout=30)
        assert result.status == "completed", result.error
        spans = t.client_spans()

    # One trace, rooted at the client call that started the run.
    (root,) = [s for s in spans if s.name == "StartWorkflow:SessionRun"]
    assert root.parent_id is None
    assert root.attributes["temporalWorkflowID"] == session_workflow_id(session.id)
    run_spans = [s for s in spans if s.trace_id == root.trace_id]
    assert [s.name for s in children(run_spans, root)].count("RunWorkflow:SessionRun") == 1
    parents = by_id(run_spans)

    # Each model call: the Anthropic SDK's GenAI span inside its activity's span, with
    # the session, run, turn and attempt added; the failed call's too.
    chats = [s for s in run_spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert [s.name for s in chats] == ["anthropic.messages.create"] * 3
    for chat in chats:
        activity = parents[str(chat.parent_id)]
        assert activity.name == "RunActivity:take_turn"
        assert parents[str(activity.parent_id)].name == "StartActivity:take_turn"
        assert chat.attributes["gen_ai.provider.name"] == "anthropic"
        assert chat.attributes["gen_ai.request.model"] == stack.settings.model
        assert chat.attributes["gen_ai.conversation.id"] == session.id
        assert chat.attributes["duragent.run.id"] == run.run_id
        assert chat.attributes["duragent.attempt"] == 1
    failed, answered, final = chats
    assert [c.attributes["duragent.turn"] for c in chats] == [1, 1, 2]
    assert [parents[str(c.parent_id)].attributes["temporalActivityID"] for c in chats] == [
        "turn-1-1",  # the provider was overloaded: the run retried the call
        "turn-1-2",
        "turn-2-1",
    ]
    assert failed.error and failed.attributes["error.type"] == "overloaded_error"
    assert failed.attributes["http.response.status_code"] == 529
    assert "gen_ai.usage.output_tokens" not in failed.attributes
    assert not answered.error and not final.error
    assert answered.attributes["anthropic.message.stop_reason"] == "tool_use"
    assert final.attributes["anthropic.message.stop_reason"] == "end_turn"
    first, last = assistant_messages(stack, session.id)
    assert answered.attributes["gen_ai.usage.input_tokens"] == 127  # cache reads included
    assert answered.attributes["gen_ai.usage.cache_read.input_tokens"] == 7
    assert answered.attributes["gen_ai.usage.cache_write.input_tokens"] == 0
    assert answered.attributes["gen_ai.usage.output_tokens"] == first.usage.output_tokens == 30
    assert final.attributes["gen_ai.usage.output_tokens"] == last.usage.output_tokens
    for chat in (answered, final):
        assert 0 < chat.attributes["gen_ai.response.time_to_first_chunk"] < 10

    # Each tool call: a span inside its turn's activity span, with its outcome and attempt.
    tools = [s for s in run_spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert sorted(s.name for s in tools) == ["execute_tool bash", "execute_tool ls"]
    for tool in tools:
        assert parents[str(tool.parent_id)].name == "RunActivity:take_turn"
        assert tool.attributes["duragent.tool.outcome"] == "ok"
        assert tool.attributes["duragent.attempt"] == 1
        assert tool.attributes["duragent.tool.duration_ms"] >= 0
        assert tool.attributes["gen_ai.tool.call.id"].startswith("toolu_")
        assert not tool.error


SLOW_TEXT = "A long answer, streamed slowly so the worker dies half-way through it. " * 8
KILLED_IN_TURN_TWO = {
    "conversations": {
        "*": [
            {"reply": [{"tool_use": {"name": "ls", "input": {}}}]},  # no text
            # Turn 2 streams for ~6 s; the worker is killed during it.
            {"chunk_delay_ms": 100, "reply": [{"text": SLOW_TEXT}]},
            {"reply": [{"text": "Listing."}, {"tool_use": {"name": "ls", "input": {}}}]},
            {"reply": [{"text": "Done."}]},
        ]
    }
}


def spawn_traced_worker(stack: Stack, receiver: Receiver, name: str) -> subprocess.Popen[bytes]:
    """A worker process that exports its spans over OTLP/HTTP to `receiver`, quickly."""
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_SERVICE_NAME": "duragent-test-worker",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }
    return stack.spawn_worker(env, name)


def stored_events(stack: Stack, session_id: str, event_type: str) -> list[dict[str, Any]]:
    with stack.db.transaction() as db:
        found = events.read_events(db, session_id, after=0, limit=10_000)
    return [e.payload for e in found if e.type == event_type]


async def scheduled_activities(stack: Stack, session_id: str) -> list[str]:
    """The activity types the run's workflow history scheduled, in order."""
    handle = stack.temporal.get_workflow_handle(session_workflow_id(session_id))
    history = await handle.fetch_history()
    scheduled = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == scheduled
    ]


async def test_a_worker_killed_mid_run_leaves_one_span_per_model_call(traced: Any) -> None:
    """Worker processes export over OTLP/HTTP to a receiver the test runs. The first is
    SIGKILLed while turn 2 streams; the second replays the run and finishes it. The trace
    has one span per model call that ended (the killed one never did), and no workflow
    span twice."""
    with Receiver() as receiver:
        async with traced(KILLED_IN_TURN_TWO) as t:
            stack = t.stack
            session = await stack.client.sessions.create()
            first = spawn_traced_worker(stack, receiver, "worker-1")
            run = await stack.client.runs.prompt(session.id, "talk")
            await eventually(
                lambda: any(
                    p["kind"] == "text" for p in stored_events(stack, session.id, "message_update")
                ),
                timeout=30,
            )
            # Turn 2 is streaming: wait until what the worker ended before is exported.
            await eventually(
                lambda: (
                    len(receiver.named("StartActivity:take_turn")) == 2
                    and len(receiver.named("anthropic.messages.create")) == 1
                    and len(receiver.named("execute_tool ls")) == 1
                )
            )
            stack.kill(first)
            second = spawn_traced_worker(stack, receiver, "worker-2")
            result = await asyncio.wait_for(run.result(), timeout=60)
            assert result.status == "completed", result.error
            await eventually(lambda: bool(receiver.named("CompleteWorkflow:SessionRun")))
            stack.kill(second)
            root = next(s for s in t.client_spans() if s.name == "StartWorkflow:SessionRun")
            scheduled = await scheduled_activities(stack, session.id)
            requests = [r for r in stack.model.requests_for(session.id) if r.path == "/v1/messages"]
        spans = list(receiver.spans)

    assert len(requests) == 4  # turn 1, turn 2 cut off by the kill, turn 2 again, turn 3
    assert {s.service for s in spans} == {"duragent-test-worker"}
    assert {s.trace_id for s in spans} == {root.trace_id}  # one trace, from the client call
    names = [s.name for s in spans]
    # The second worker replayed the run's history: it made no workflow span again.
    assert names.count("RunWorkflow:SessionRun") == 1
    assert names.count("CompleteWorkflow:SessionRun") == 1
    # A turn is one activity, its tool calls spans inside it.
    assert names.count("StartActivity:take_turn") == scheduled.count("take_turn") == 3
    assert scheduled.count("model_turn") == scheduled.count("run_tool") == 0
    # One span per model call that ended: the killed attempt's never did.
    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    calls = sorted((c.attributes["duragent.turn"], c.attributes["duragent.attempt"]) for c in chats)
    assert calls == [(1, 1), (2, 2), (3, 1)]
    assert not any(c.error for c in chats)
    tools = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert sorted(s.attributes["duragent.turn"] for s in tools) == [1, 2]
    # Every span's parent is in the trace: the client's span or one a worker exported.
    known = {s.span_id for s in spans} | {root.span_id}
    assert all(s.parent_id in known for s in spans), [
        s.name for s in spans if s.parent_id not in known
    ]


# ----------------------------------------------------------------------------- off


CHECK_OFF = """
import asyncio, json, sys
from duragent.client.connection import connect_temporal
from duragent.settings import Settings
from duragent.worker import build_worker
from duragent.store.db import Database

async def main():
    settings = Settings.from_env()
    client = await connect_temporal(settings)
    worker = build_worker(client, Database(settings.database_url), settings)
    print(json.dumps({
        "client": [type(i).__name__ for i in client.config()["interceptors"]],
        "worker": [type(i).__name__ for i in worker.config()["interceptors"]],
        "sdk": "opentelemetry.sdk" in sys.modules,
        "contrib": "temporalio.contrib.opentelemetry" in sys.modules,
    }))

asyncio.run(main())
"""


def test_tracing_is_off_without_the_otel_variables(tmp_path: Path, dev_server: DevServer) -> None:
    """No `OTEL_*` variable: no tracing interceptor on the client or the worker (the
    worker's one records its calls under its lease), and nothing of OpenTelemetry's SDK or
    Temporal's tracing loaded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env |= {
        "DURAGENT_HOME": str(tmp_path),
        "TEMPORAL_ADDRESS": dev_server.address,
        "PYTHONPATH": str(REPO),
    }
    out = subprocess.run(
        [sys.executable, "-c", CHECK_OFF], cwd=REPO, env=env, capture_output=True, check=True
    )
    seen = json.loads(out.stdout.decode().strip().splitlines()[-1])
    assert seen == {"client": [], "worker": ["LeaseInterceptor"], "sdk": False, "contrib": False}


OTLP_HTTP = "http/protobuf"


@pytest.mark.parametrize(
    ("environ", "exporters"),
    [
        ({}, None),
        ({"OTEL_SERVICE_NAME": "x"}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, ("otlp",)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:4318/v1/traces"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": "otlp, console"}, ("otlp", "console")),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h"}, None),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, None),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
            ("otlp",),
        ),
    ],
)
def test_the_standard_variables_turn_tracing_on(
    environ: dict[str, str], exporters: tuple[str, ...] | None
) -> None:
    config = tracing.tracing_config(environ)
    assert (config.exporters if config else None) == exporters


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER: zipkin is not one of"),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' is not supported",
        ),
    ],
)
def test_an_unsupported_exporter_is_refused_by_name(environ: dict[str, str], message: str) -> None:
    with pytest.raises(tracing.TracingConfigError, match=message):
        tracing.tracing_config(environ)


CHILD_LISTS_THEN_ANSWERS = {
    "conversations": {
        "*": [
            {"match": "^Child", "reply": [{"tool_use": {"name": "ls", "input": {}}}]},
            {"reply": [{"text": "child answer"}]},
        ]
    }
}


async def test_a_sub_agents_run_is_in_its_parents_trace(traced: Any) -> None:
    async with traced(CHILD_LISTS_THEN_ANSWERS) as t:
        stack = t.stack
        parent = await stack.client.sessions.create()
        delegate = {"prompt": "Child: look around", "name": "helper"}
        stack.model.add_steps(
            parent.id,
            [
                {"reply": [{"tool_use": {"name": "delegate", "input": delegate}}]},
                {"reply": [{"text": "ok"}]},
            ],
            replace=True,
        )
        async with t.worker():
            run = await stack.client.runs.prompt(parent.id, "go")
            result = await asyncio.wait_for(run.result(), timeout=30)
        assert result.status == "completed", result.error
        (child,) = await stack.client.sessions.children(parent.id)
        spans = t.client_spans()

    # One trace: the parent's run, and below it the sub-agent's, started by the parent
    # (Temporal's workflow spans hang off the span that started their workflow).
    (root,) = [s for s in spans if s.name == "StartWorkflow:SessionRun"]
    run_spans = [s for s in spans if s.trace_id == root.trace_id]
    parents = by_id(run_spans)
    runs = [s for s in run_spans if s.name == "RunWorkflow:SessionRun"]
    assert len(runs) == 2
    (parent_run,) = [r for r in runs if parents[str(r.parent_id)] == root]
    (child_run,) = [r for r in runs if r != parent_run]
    started_by = parents[str(child_run.parent_id)]
    assert started_by.name == "StartChildWorkflow:SessionRun"
    assert started_by.attributes["temporalWorkflowID"] == session_workflow_id(parent.id)
    assert child_run.attributes["temporalWorkflowID"] == session_workflow_id(child.id)

    def ancestors(span: Span) -> list[Span]:
        found = []
        while span.parent_id is not None:
            span = parents[span.parent_id]
            found.append(span)
        return found

    # Each model call is the parent's or the sub-agent's, below the span of its own run.
    chats = [s for s in run_spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert sorted(c.attributes["gen_ai.conversation.id"] for c in chats) == sorted(
        [parent.id, parent.id, child.id, child.id]
    )
    for chat in chats:
        lineage = ancestors(chat)
        assert (started_by in lineage) == (chat.attributes["gen_ai.conversation.id"] == child.id)
        assert root in lineage
    # Tool calls: the sub-agent's ls in its run; the parent's delegate call, a span from the
    # sub-agent's start to its answer, in the parent's.
    tools = {
        s.name: s for s in run_spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"
    }
    assert sorted(tools) == ["execute_tool delegate", "execute_tool ls"]
    listing, delegated = tools["execute_tool ls"], tools["execute_tool delegate"]
    assert started_by in ancestors(listing)
    assert listing.attributes["gen_ai.conversation.id"] == child.id
    assert started_by not in ancestors(delegated)
    assert delegated.attributes["gen_ai.conversation.id"] == parent.id
    assert delegated.attributes["duragent.subagent.session.id"] == child.id
    assert delegated.attributes["duragent.tool.outcome"] == "ok"
    assert delegated.attributes["gen_ai.tool.call.id"] == child.parent_tool_call_id
    child_chats = [c for c in chats if c.attributes["gen_ai.conversation.id"] == child.id]
    assert delegated.start_ns <= min(c.start_ns for c in child_chats)
    assert delegated.end_ns >= max(c.end_ns for c in child_chats)
