"""The offline model played in-process (`offline_model.in_process.ScriptedModel`) against
the same script played over HTTP to the Anthropic client (`AnthropicModel` on a real
`OfflineModelServer`): the same deltas, messages, failures and request log; a reply
aborted mid-stream keeping what arrived; gates released through the server; conversations
keyed by session; what only a wire can do refused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, get_args

import pytest

from duragent.activities.models.anthropic_model import make
from duragent.activities.models.clients import ClientOptions
from duragent.activities.models.seam import (
    Delta,
    ModelClient,
    ModelFailed,
    ModelRequest,
    SummaryRequest,
)
from duragent.domain.config import TurnSnapshot
from duragent.domain.messages import (
    AssistantMessage,
    TextContent,
    ToolCall,
    UserMessage,
)
from duragent.domain.models import PROVIDERS, Endpoint
from duragent.domain.transcript import LlmMessage
from duragent.domain.turns import ProviderFailure
from duragent.offline_model import OfflineModelServer, Script
from duragent.offline_model.in_process import ScriptedModel, WireOnly, scripted_clients
from duragent.offline_model.script import StopReason

MODEL = "claude-sonnet-4-5"
LONG = "The workspace holds three files; I will read the first one before changing it. " * 3


def ask(
    text: str = "hi",
    *,
    session: str = "alice",
    model: str = MODEL,
    thinking: str = "off",
    messages: list[LlmMessage] | None = None,
) -> ModelRequest:
    snapshot = TurnSnapshot.model_validate(
        {
            "model": model,
            "thinking_level": thinking,
            "system_prompt": "Be brief.",
            "active_tools": None,
            "max_tokens": 1024,
        }
    )
    user = UserMessage(content=[TextContent(text=text)], timestamp=1)
    return ModelRequest(
        snapshot=snapshot,
        messages=messages or [user],
        tools=[],
        session_id=session,
        timestamp=1_700_000_000_000,
    )


@dataclass
class Answer:
    """What one request gave: its deltas and message, or its failure."""

    deltas: list[Delta]
    message: AssistantMessage | None
    failure: ProviderFailure | None


async def answers(client: ModelClient, requests: list[ModelRequest]) -> list[Answer]:
    """Each request asked in turn, streamed to its end."""
    got = []
    for request in requests:
        deltas: list[Delta] = []
        try:
            message = await client.ask(request).reply(deltas.append)
        except ModelFailed as failed:
            got.append(Answer(deltas, None, failed.failure))
        else:
            got.append(Answer(deltas, message, None))
    return got


@dataclass
class Played:
    answers: list[Answer]
    log: list[dict[str, Any]]
    """The request log without what only HTTP has (headers, times)."""


Play = Callable[[dict[str, Any], list[ModelRequest]], Any]


@pytest.fixture
async def over_http() -> AsyncIterator[Play]:
    """Play a script to the Anthropic client over a real offline model server."""
    servers: list[OfflineModelServer] = []

    async def play(script: dict[str, Any], requests: list[ModelRequest]) -> Played:
        server = await OfflineModelServer(Script.model_validate(script)).__aenter__()
        servers.append(server)
        where = Endpoint(base_url=server.base_url, api_key=None, offline=True)
        client = make(PROVIDERS["anthropic"], where, ClientOptions())
        try:
            got = await answers(client, requests)
        finally:
            await client.aclose()
        return Played(got, logged(server.requests))

    yield play
    for server in servers:
        await server.__aexit__(None, None, None)


async def in_process(script: dict[str, Any], requests: list[ModelRequest]) -> Played:
    model = ScriptedModel(Script.model_validate(script))
    got = await answers(model, requests)
    return Played(got, logged(model.requests))


def logged(requests: list[Any]) -> list[dict[str, Any]]:
    return [r.model_dump(include={"path", "key", "body", "step_index", "status"}) for r in requests]


def tool(name: str, tool_id: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_use": {"id": tool_id, "name": name, "input": arguments}}


SCRIPTS: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {
    "text": ([{"reply": [{"text": LONG}]}], {}),
    "thinking": (
        [{"reply": [{"thinking": LONG, "signature": "c2lnbmVk"}, {"text": "Done."}]}],
        {"thinking": "low"},
    ),
    "parallel tool calls": (
        [
            {
                "reply": [
                    {"text": "Two looks at once."},
                    tool("bash", "toolu_a", command="ls -la", timeout=30),
                    tool("read", "toolu_b", path="notes/today.md"),
                ]
            }
        ],
        {},
    ),
    "usage": (
        [
            {
                "reply": [{"text": "cached"}],
                "usage": {
                    "input_tokens": 12,
                    "output_tokens": 340,
                    "cache_read_input_tokens": 2000,
                    "cache_creation_input_tokens": 55,
                },
                "stop_reason": "max_tokens",
            }
        ],
        {},
    ),
    "errors": (
        [
            {"error": {"status": 529}},
            {"error": {"status": 429, "retry_after": 2}},
            {"error": {"status": 400, "message": "prompt is too long: 210000 tokens"}},
            {"error": {"status": 500, "should_retry": False}},
            {"error": {"status": 401}},
            {"reply": [{"text": "then it worked"}], "delay_ms": 5, "chunk_delay_ms": 1},
        ],
        {},
    ),
}


@pytest.mark.parametrize("name", list(SCRIPTS))
async def test_a_script_plays_as_over_http(over_http: Play, name: str) -> None:
    steps, options = SCRIPTS[name]
    script = {"conversations": {"*": steps}}
    requests = [ask(f"request {n}", **options) for n in range(len(steps) + 1)]  # one past
    http, here = await over_http(script, requests), await in_process(script, requests)
    assert here.answers == http.answers
    assert here.log == http.log
    assert here.answers[-1].message is not None  # the script ran out: its ending reply
    assert any(a.deltas for a in here.answers)


@pytest.mark.parametrize("stop_reason", get_args(StopReason))
async def test_every_stop_reason_reads_as_over_http(over_http: Play, stop_reason: str) -> None:
    script = {"conversations": {"*": [{"reply": [{"text": "ok"}], "stop_reason": stop_reason}]}}
    http, here = await over_http(script, [ask()]), await in_process(script, [ask()])
    assert here.answers == http.answers


async def test_failures_of_the_server_itself_are_as_over_http(over_http: Play) -> None:
    """A script run out under `when_exhausted: error`, chaos's overload, and a request the
    API refuses (a tool call left without its result)."""
    unpaired: list[LlmMessage] = [
        UserMessage(content=[TextContent(text="look")], timestamp=1),
        AssistantMessage(content=[ToolCall(id="toolu_x", name="ls", arguments={})], timestamp=2),
        UserMessage(content=[TextContent(text="well?")], timestamp=3),
    ]
    cases: list[tuple[dict[str, Any], ModelRequest]] = [
        ({"when_exhausted": "error", "conversations": {"*": []}}, ask()),
        ({"chaos": {"overloaded": 1.0}, "conversations": {"*": [{"reply": []}]}}, ask()),
        ({"conversations": {"*": [{"reply": [{"text": "x"}]}]}}, ask(messages=unpaired)),
    ]
    failures = []
    for script, request in cases:
        http, here = await over_http(script, [request]), await in_process(script, [request])
        assert here.answers == http.answers
        assert here.log == http.log
        failures.append(here.answers[0].failure)
    assert [(f.kind, f.status) if f else None for f in failures] == [
        ("server", 500),
        ("overloaded", 529),
        ("bad_request", 400),
    ]
    assert failures[2] is not None and "tool_use" in failures[2].message


async def test_errors_fail_with_the_clients_classification() -> None:
    """What the turn sees (`ModelFailed`): kind, status, retryable, the wait asked for."""
    steps = [
        {"error": {"status": 529}},
        {"error": {"status": 429, "retry_after": 2}},
        {"error": {"status": 400, "message": "prompt is too long: 210000 tokens"}},
        {"error": {"status": 503, "should_retry": False}},
    ]
    played = await in_process({"conversations": {"*": steps}}, [ask() for _ in steps])
    failures = [
        (f.kind, f.status, f.retryable, f.retry_after_ms)
        for a in played.answers
        if (f := a.failure)
    ]
    assert failures == [
        ("overloaded", 529, True, None),
        ("rate_limit", 429, True, 2000),
        ("context_overflow", 400, False, None),
        ("server", 503, False, None),
    ]


async def test_a_summary_completes_as_over_http() -> None:
    script = Script.model_validate(
        {
            "conversations": {
                "*": [{"reply": [{"text": "A summary."}], "usage": {"input_tokens": 9}}]
            }
        }
    )
    request = SummaryRequest(model=MODEL, prompt="Summarise.", max_tokens=200, session_id="bob")
    async with OfflineModelServer(script) as server:
        where = Endpoint(base_url=server.base_url, api_key=None, offline=True)
        client = make(PROVIDERS["anthropic"], where, ClientOptions())
        try:
            over_http = await client.complete(request)
        finally:
            await client.aclose()
        http_log = logged(server.requests)
    model = ScriptedModel(script)
    assert await model.complete(request) == over_http
    assert over_http[0] == "A summary."
    assert logged(model.requests) == http_log


async def arrived(deltas: list[Delta], count: int) -> None:
    while len(deltas) < count:
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("with_call", [False, True], ids=["text", "text then a call"])
async def test_an_aborted_reply_keeps_what_arrived(with_call: bool) -> None:
    parts: list[dict[str, Any]] = [{"text": LONG}]
    if with_call:
        parts.append(tool("bash", "toolu_c", command="sleep 1"))
    model = ScriptedModel(Script.of([{"reply": parts, "chunk_delay_ms": 40}]))
    call = model.ask(ask())
    deltas: list[Delta] = []
    task = asyncio.create_task(call.reply(deltas.append))
    await asyncio.wait_for(arrived(deltas, 3), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    aborted = call.so_far()
    received = "".join(d.text for d in deltas)
    assert aborted.stop_reason == "aborted"
    assert aborted.content == [TextContent(text=received)]
    assert 3 <= len(deltas) < len(LONG) // 20  # cut mid-text: the calls never began
    assert aborted.provider == "anthropic" and aborted.model == MODEL
    # What the server's log says was sent is what the reply told.
    assert len(model.requests[0].deltas_sent_at) == len(deltas)


async def test_a_reply_held_by_a_gate_is_released_through_the_server() -> None:
    """The stack's way: the server (not started) and the in-process model share a player,
    and a gate released from another thread wakes the reply waiting on its own loop."""
    server = OfflineModelServer(Script.of([{"wait_for": "go", "reply": [{"text": "gone"}]}]))
    model = ScriptedModel(server)
    held = asyncio.create_task(model.ask(ask()).reply(lambda delta: None))

    def holding() -> bool:
        return [(r.step_index, r.status) for r in server.requests] == [(0, None)]

    while not holding():
        await asyncio.sleep(0.005)
    assert not held.done()
    await asyncio.to_thread(server.release, "go")
    message = await asyncio.wait_for(held, 10)
    assert message.content == [TextContent(text="gone")]
    assert [r.status for r in server.requests_for("alice")] == [200]


async def test_a_reply_held_by_a_gate_aborts_with_nothing() -> None:
    model = ScriptedModel(Script.of([{"wait_for": "never", "reply": [{"text": "x"}]}]))
    call = model.ask(ask())
    task = asyncio.create_task(call.reply(lambda delta: None))
    while not model.requests:
        await asyncio.sleep(0.005)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    aborted = call.so_far()
    assert (aborted.content, aborted.stop_reason) == ([], "aborted")


async def test_conversations_are_keyed_by_session() -> None:
    script = Script.model_validate(
        {
            "conversations": {
                "alice": [{"reply": [{"text": "for alice"}]}],
                "bob": [{"reply": [{"text": "for bob"}]}, {"reply": [{"text": "bob again"}]}],
                "*": [{"reply": [{"text": "for anyone"}]}],
            }
        }
    )
    model = ScriptedModel(script)
    got = []
    for session in ("bob", "alice", "carol", "bob", "dave"):
        message = await model.ask(ask(session=session)).reply(lambda delta: None)
        got.append(message.content)
    assert got == [
        [TextContent(text=t)]
        for t in ("for bob", "for alice", "for anyone", "bob again", "for anyone")
    ]
    assert [r.body["metadata"] for r in model.requests_for("bob")] == [{"user_id": "bob"}] * 2


async def test_every_provider_plays_the_script_stamped_as_its_own() -> None:
    clients = scripted_clients(Script.of([{"reply": [{"text": "one"}]}]))
    for model, api, provider in [
        (MODEL, "anthropic-messages", "anthropic"),
        ("openai:gpt-4.1", "openai-chat", "openai"),
        ("openai-responses:gpt-5", "openai-responses", "openai-responses"),
        ("bedrock:anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic-messages", "bedrock"),
    ]:
        request = ask(session=provider, model=model)
        message = await clients.for_model(model).ask(request).reply(lambda delta: None)
        assert (message.api, message.provider, message.model) == (api, provider, request.ref.model)
        assert message.content == [TextContent(text="one")]


async def test_what_only_a_wire_does_is_refused() -> None:
    with pytest.raises(WireOnly, match=r"step 1 of conversation 'bob': cut_after_chunks"):
        cut: list[dict[str, Any]] = [{"reply": []}, {"reply": [], "cut_after_chunks": 1}]
        ScriptedModel(Script.of(cut, key="bob"))
    with pytest.raises(WireOnly, match=r"chaos\.dropped"):
        ScriptedModel(Script.of([], chaos={"dropped": 0.5}))
    model = ScriptedModel(Script.of([]))
    model.add_steps("alice", [{"reply": [{"text": "x"}], "stall_after_chunks": 0}])
    with pytest.raises(ModelFailed) as failed:
        await model.ask(ask()).reply(lambda delta: None)
    assert not failed.value.failure.retryable
    assert "stall_after_chunks" in failed.value.failure.message
