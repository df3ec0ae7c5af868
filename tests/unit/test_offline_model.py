"""The offline model, driven through the real anthropic SDK over real HTTP."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from support import eventually

from duragent.offline_model import (
    DEMO_SCRIPT,
    Chaos,
    OfflineModelServer,
    Script,
    Step,
    load_script,
)
from duragent.offline_model.chaos import roll
from duragent.offline_model.protocol import validate_request
from duragent.offline_model.server import QuickStopServer

MODEL = "offline-test-model"
Serve = Callable[..., OfflineModelServer]


@pytest.fixture
def serve() -> Iterator[Serve]:
    """Start a server for a list of "*" steps; every server is stopped after the test."""
    servers: list[OfflineModelServer] = []

    def start(steps: list[dict[str, Any]] | None = None, **script: Any) -> OfflineModelServer:
        server = OfflineModelServer(Script.of(steps or [], **script)).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def client_for(server: OfflineModelServer) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=server.base_url, api_key="offline", max_retries=0)


def user(text: str = "hi", key: str | None = None) -> dict[str, Any]:
    """Keyword arguments for one user turn, optionally under conversation `key`."""
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": text}],
    }
    if key is not None:
        kwargs["metadata"] = {"user_id": key}
    return kwargs


LONG_TEXT = "I'll look at the workspace first, then decide what to change."


async def test_stream_helper_builds_text_and_tool_use(serve: Serve) -> None:
    server = serve(
        [
            {
                "reply": [
                    {"text": LONG_TEXT},
                    {"tool_use": {"name": "ls", "input": {"path": "."}}},
                    {"tool_use": {"id": "toolu_fixed", "name": "read", "input": {"path": "a.py"}}},
                ]
            }
        ]
    )
    async with (
        client_for(server) as client,
        client.messages.stream(**user()) as stream,
    ):
        text_events = [event async for event in stream if event.type == "text"]
        message = await stream.get_final_message()

    assert len(text_events) > 1  # the text arrived in several deltas
    assert [block.type for block in message.content] == ["text", "tool_use", "tool_use"]
    text, ls, read = message.content
    assert text.type == "text" and text.text == LONG_TEXT
    assert ls.type == "tool_use" and ls.name == "ls" and ls.input == {"path": "."}
    assert ls.id.startswith("toolu_") and len(ls.id) == len("toolu_") + 24
    assert read.type == "tool_use" and read.id == "toolu_fixed" and read.input == {"path": "a.py"}
    assert message.stop_reason == "tool_use"
    assert message.model == MODEL
    assert message.id.startswith("msg_")
    assert message.usage.output_tokens > 1


async def test_each_streamed_delta_is_logged_when_sent(serve: Serve) -> None:
    server = serve([{"reply": [{"text": LONG_TEXT}], "chunk_delay_ms": 30}])
    async with client_for(server) as client, client.messages.stream(**user()) as stream:
        arrived = [event for event in [e async for e in stream] if event.type == "text"]
    (request,) = server.requests
    sent = request.deltas_sent_at
    assert len(sent) == len(arrived) > 1
    gaps = [later - earlier for earlier, later in itertools.pairwise(sent)]
    assert min(gaps) >= 0.025  # the chunk delay paces them
    assert request.received_at <= sent[0]


async def test_raw_stream_events_follow_the_api_order(serve: Serve) -> None:
    server = serve([{"reply": [{"thinking": "The user said hi."}, {"text": LONG_TEXT}]}])
    async with client_for(server) as client:
        stream = await client.messages.create(**user(), stream=True)
        events = [event async for event in stream]

    kinds = [event.type for event in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    start = events[0]
    assert start.type == "message_start"
    assert start.message.content == [] and start.message.stop_reason is None
    blocks = kinds[1:-2]
    assert blocks[0] == "content_block_start" and blocks.count("content_block_start") == 2
    assert blocks.count("content_block_stop") == 2
    deltas = [e.delta.type for e in events if e.type == "content_block_delta"]
    assert deltas[-1] == "text_delta"
    signature_at = deltas.index("signature_delta")
    assert set(deltas[:signature_at]) == {"thinking_delta"}
    assert set(deltas[signature_at + 1 :]) == {"text_delta"}
    stop = events[-2]
    assert stop.type == "message_delta"
    assert stop.delta.stop_reason == "end_turn" and stop.delta.stop_sequence is None


async def test_wire_format_has_ping_and_request_id(serve: Serve) -> None:
    server = serve([{"reply": [{"text": "Hi."}]}])
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        response = await http.post("/v1/messages", json={**user(), "stream": True})
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["request-id"].startswith("req_")
    frames = [f for f in response.text.split("\n\n") if f]
    names = [f.splitlines()[0].removeprefix("event: ") for f in frames]
    assert names == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    for frame, name in zip(frames, names, strict=True):
        assert json.loads(frame.splitlines()[1].removeprefix("data: "))["type"] == name


async def test_non_streaming_returns_the_whole_message(serve: Serve) -> None:
    server = serve(
        [
            {
                "reply": [{"text": "Done."}],
                "stop_reason": "max_tokens",
                "usage": {"input_tokens": 11, "output_tokens": 7},
            }
        ]
    )
    async with client_for(server) as client:
        message = await client.messages.create(**user())
    assert message.type == "message" and message.role == "assistant"
    assert [(b.type, getattr(b, "text", None)) for b in message.content] == [("text", "Done.")]
    assert message.stop_reason == "max_tokens"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (11, 7)
    assert server.requests[0].status == 200 and server.requests[0].step_index == 0


async def test_overloaded_with_retry_after(serve: Serve) -> None:
    server = serve(
        [
            {
                "error": {
                    "status": 529,
                    "type": "overloaded_error",
                    "message": "Overloaded",
                    "retry_after": 1,
                }
            }
        ]
    )
    async with client_for(server) as client:
        with pytest.raises(anthropic.InternalServerError) as caught:
            await client.messages.create(**user(), stream=True)
    assert caught.value.status_code == 529
    assert caught.value.response.headers["retry-after"] == "1"
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": caught.value.response.headers["request-id"],
    }


@pytest.mark.parametrize(("should_retry", "header"), [(True, "true"), (False, "false")])
async def test_scripted_error_sends_the_should_retry_header(
    serve: Serve, should_retry: bool, header: str
) -> None:
    server = serve([{"error": {"status": 400, "should_retry": should_retry}}])
    async with client_for(server) as client:
        with pytest.raises(anthropic.BadRequestError) as caught:
            await client.messages.create(**user(), stream=True)
    assert caught.value.response.headers["x-should-retry"] == header


@pytest.mark.parametrize(
    ("status", "error_class"),
    [
        (429, anthropic.RateLimitError),
        (400, anthropic.BadRequestError),
        (401, anthropic.AuthenticationError),
        (403, anthropic.PermissionDeniedError),
        (500, anthropic.InternalServerError),
    ],
)
async def test_scripted_errors_become_sdk_exceptions(
    serve: Serve, status: int, error_class: type[anthropic.APIStatusError]
) -> None:
    server = serve([{"error": {"status": status}}, {"reply": [{"text": "recovered"}]}])
    async with client_for(server) as client:
        with pytest.raises(error_class) as caught:
            await client.messages.create(**user())
        assert caught.value.status_code == status
        again = await client.messages.create(**user())  # the error consumed its step
    assert again.content[0].type == "text" and again.content[0].text == "recovered"


TOOL_TURN: list[dict[str, Any]] = [
    {"role": "user", "content": "list files"},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_abc", "name": "ls", "input": {}}],
    },
]


async def test_tool_pairing_violation_is_a_400_that_consumes_no_step(serve: Serve) -> None:
    server = serve([{"reply": [{"text": "first step"}]}])
    unanswered = [*TOOL_TURN, {"role": "user", "content": "never mind"}]
    async with client_for(server) as client:
        with pytest.raises(anthropic.BadRequestError) as caught:
            await client.messages.create(**{**user(), "messages": unanswered})
        message = await client.messages.create(**user())
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["error"] == {
        "type": "invalid_request_error",
        "message": "messages.1: `tool_use` ids were found without `tool_result` blocks "
        "immediately after: toolu_abc. Each `tool_use` block must have a corresponding "
        "`tool_result` block in the next message.",
    }
    assert caught.value.response.headers["request-id"].startswith("req_")
    assert message.content[0].type == "text" and message.content[0].text == "first step"
    invalid, valid = server.requests
    assert (invalid.status, invalid.step_index) == (400, None)
    assert (valid.status, valid.step_index) == (200, 0)


def test_validation_wording() -> None:
    def check(messages: list[dict[str, Any]], **extra: Any) -> str | None:
        return validate_request({"model": MODEL, "max_tokens": 10, "messages": messages, **extra})

    answered: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": "toolu_abc",
        "content": "a.py",
    }
    assert check([*TOOL_TURN, {"role": "user", "content": [answered]}]) is None
    stray = {"type": "tool_result", "tool_use_id": "toolu_x", "content": "?"}
    assert check([*TOOL_TURN, {"role": "user", "content": [answered, stray]}]) == (
        "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_x. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous "
        "message."
    )
    text_first = [{"type": "text", "text": "here"}, answered]
    assert str(check([*TOOL_TURN, {"role": "user", "content": text_first}])).startswith(
        "messages.1: `tool_use` ids were found without `tool_result` blocks"
    )
    assert check([{"role": "user", "content": [{"type": "text", "text": " "}]}]) == (
        "messages: text content blocks must contain non-whitespace text"
    )
    assert check([{"role": "assistant", "content": "hi"}]) == (
        'messages: first message must use the "user" role'
    )
    assert check([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]) == (
        'messages: roles must alternate between "user" and "assistant", '
        'but found multiple "user" roles in a row'
    )
    assert check([]) == "messages: at least one message is required"
    assert validate_request({"model": MODEL, "messages": [{"role": "user", "content": "a"}]}) == (
        "max_tokens: Field required"
    )


async def test_each_key_plays_its_own_copy_of_the_template(serve: Serve) -> None:
    server = serve([{"reply": [{"text": "one"}]}, {"reply": [{"text": "two"}]}])
    async with client_for(server) as client:
        texts = []
        for key in ("alice", "bob", "alice", "bob"):
            message = await client.messages.create(**user(key=key))
            block = message.content[0]
            texts.append(block.text if block.type == "text" else "")
    assert texts == ["one", "one", "two", "two"]
    assert [r.step_index for r in server.requests_for("alice")] == [0, 1]
    assert server.requests_for("bob")[0].body["metadata"] == {"user_id": "bob"}


async def test_cut_stream_makes_the_sdk_raise(serve: Serve) -> None:
    server = serve(
        [{"reply": [{"text": LONG_TEXT}], "cut_after_chunks": 1}, {"reply": [{"text": "ok"}]}]
    )
    async with client_for(server) as client:
        received: list[str] = []
        # The SDK talks HTTP through httpx2, whose errors surface unwrapped mid-stream.
        with pytest.raises((anthropic.APIError, httpx2.HTTPError)):
            async with client.messages.stream(**user()) as stream:
                async for event in stream:
                    if event.type == "text":
                        received.append(event.text)
        assert received == [LONG_TEXT[:20]]
        message = await client.messages.create(**user())  # the server is fine afterwards
    assert message.content[0].type == "text" and message.content[0].text == "ok"


async def test_wait_for_holds_until_released(serve: Serve) -> None:
    server = serve(
        [
            {"reply": [{"text": "a"}], "wait_for": "go"},
            {"reply": [{"text": "b"}], "wait_for": "http-go"},
        ]
    )
    async with client_for(server) as client:
        held = asyncio.create_task(client.messages.create(**user()))
        await eventually(lambda: len(server.requests) == 1)  # arrived, and held
        assert not held.done()
        assert [(r.step_index, r.status) for r in server.requests] == [(0, None)]
        server.release("go")
        assert (await asyncio.wait_for(held, 5)).content[0].type == "text"

        held = asyncio.create_task(client.messages.create(**user(), stream=True))
        await eventually(lambda: len(server.requests) == 2)
        assert not held.done()
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            assert (await http.post("/_offline/release/http-go")).json() == {"released": "http-go"}
        events = [event.type async for event in await asyncio.wait_for(held, 5)]
    assert events[-1] == "message_stop"


async def test_hang_is_answered_when_the_server_stops(serve: Serve) -> None:
    server = serve([{"hang": True}])
    async with client_for(server) as client:
        held = asyncio.create_task(client.messages.create(**user()))
        await eventually(lambda: len(server.requests) == 1)  # arrived, and hanging
        assert not held.done()
        await asyncio.to_thread(server.stop)
        with pytest.raises(anthropic.InternalServerError):
            await asyncio.wait_for(held, 5)


async def test_exhausted_script_replies_or_errors(serve: Serve) -> None:
    replying = serve([])
    failing = serve([], when_exhausted="error")
    async with client_for(replying) as client:
        message = await client.messages.create(**user())
    assert message.content[0].type == "text"
    assert message.content[0].text == "(offline script finished)"
    assert message.stop_reason == "end_turn"
    async with client_for(failing) as client:
        with pytest.raises(anthropic.InternalServerError) as caught:
            await client.messages.create(**user(key="session-9"))
    assert "session-9" in caught.value.message


async def test_control_endpoints_queue_steps_and_list_requests(serve: Serve) -> None:
    server = serve([{"reply": [{"text": "template"}]}])
    server.add_steps("k", [{"reply": [{"text": "added in code"}]}], replace=True)
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        queued = await http.post(
            "/_offline/script",
            json={"key": "k", "steps": [{"reply": [{"text": "added over http"}]}]},
        )
        assert queued.json() == {"key": "k", "pending": 2}
        async with client_for(server) as client:
            first = await client.messages.create(**user(key="k"))
            second = await client.messages.create(**user(key="k"))
        log = (await http.get("/_offline/requests")).json()
    assert [m.content[0].text for m in (first, second) if m.content[0].type == "text"] == [
        "added in code",
        "added over http",
    ]
    assert [(r["key"], r["step_index"], r["status"]) for r in log] == [("k", 0, 200), ("k", 1, 200)]
    assert server.remaining("k") == 0


async def test_async_context_manager_and_restart_keep_the_port() -> None:
    server = OfflineModelServer(Script.of([{"reply": [{"text": "a"}]}, {"reply": [{"text": "b"}]}]))
    async with server:
        url = server.base_url
        async with client_for(server) as client:
            await client.messages.create(**user())
    assert not server.running
    async with server, client_for(server) as client:
        assert server.base_url == url
        message = await client.messages.create(**user())
    assert message.content[0].type == "text" and message.content[0].text == "b"
    assert len(server.requests) == 2


def test_a_stop_is_quick_and_closes_its_connections() -> None:
    # uvicorn's own stop takes 0.2 s (its next 0.1 s tick, then a fixed 0.1 s sleep before
    # it looks at the connections), and a test suite starts hundreds of these servers.
    server = OfflineModelServer(Script.of([]))
    took: list[float] = []
    for _ in range(3):
        server.start()
        with httpx.Client(base_url=server.base_url) as http:  # keeps its connection open
            assert http.get("/_offline/requests").status_code == 200
            started = time.monotonic()
            server.stop()
            took.append(time.monotonic() - started)
            assert not server.running
            with pytest.raises(httpx.ConnectError):  # the port listens no more
                http.get("/_offline/requests")
    assert min(took) < 0.1, took
    assert "offline-model" not in [thread.name for thread in threading.enumerate()]


async def test_a_quick_stop_lets_a_request_going_finish() -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(request: Request) -> PlainTextResponse:
        entered.set()
        await release.wait()
        return PlainTextResponse("done")

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    app = Starlette(routes=[Route("/", slow)])
    server = QuickStopServer(uvicorn.Config(app, log_config=None, lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{sock.getsockname()[1]}") as http:
        await eventually(lambda: server.started)
        going = asyncio.create_task(http.get("/"))
        await entered.wait()
        server.exit_now()
        await eventually(lambda: not server.servers[0].is_serving())  # stopping: no new ones
        assert not serving.done()
        release.set()
        answer = await asyncio.wait_for(going, 5)
    assert (answer.status_code, answer.text) == (200, "done")
    await asyncio.wait_for(serving, 5)


def test_scripts_load_from_yaml_and_json(tmp_path: Path) -> None:
    demo = load_script(DEMO_SCRIPT)
    steps = demo.conversations["*"]
    assert len(steps) == 4 and [s.has_tool_use for s in steps] == [True, True, True, False]
    data = {"when_exhausted": "error", "conversations": {"a": [{"error": {"status": 529}}]}}
    (tmp_path / "s.json").write_text(json.dumps(data))
    script = load_script(tmp_path / "s.json")
    error = script.conversations["a"][0].error
    assert error is not None and error.error_type == "overloaded_error"
    with pytest.raises(ValueError, match="exactly one of"):
        Step.model_validate({"reply": [{"text": "x"}], "error": {"status": 500}})


@pytest.fixture
async def demo_server() -> AsyncIterator[OfflineModelServer]:
    async with OfflineModelServer(DEMO_SCRIPT) as server:
        yield server


async def test_demo_script_plays_through_the_sdk(demo_server: OfflineModelServer) -> None:
    async with client_for(demo_server) as client:
        first = await client.messages.create(**user("make a script"))
    assert [b.name for b in first.content if b.type == "tool_use"] == ["ls"]


async def test_chaos_faults_consume_no_step(serve: Serve) -> None:
    server = serve([{"reply": [{"text": "ok"}]}], chaos={"overloaded": 1.0})
    async with client_for(server) as client:
        for _ in range(2):
            with pytest.raises(anthropic.APIStatusError) as raised:
                await client.messages.create(**user())
            assert raised.value.status_code == 529
    assert server.remaining("default") == 1  # the step waits for a request that gets through


async def test_chaos_drops_a_stream_after_its_first_delta(serve: Serve) -> None:
    server = serve([{"reply": [{"text": "ok"}]}], chaos={"dropped": 1.0})
    async with client_for(server) as client:
        with pytest.raises((anthropic.APIError, httpx2.HTTPError)):
            async with client.messages.stream(**user()) as stream:
                async for _ in stream:
                    pass
    assert server.remaining("default") == 1


def test_chaos_dice_replay_with_the_seed() -> None:
    chaos = Chaos(
        seed=7, latency_ms=(10, 500), slow_first_byte=0.2, overloaded=0.2, server_error=0.2
    )
    first = [roll(chaos, "s1", n) for n in range(200)]
    assert first == [roll(chaos, "s1", n) for n in range(200)]
    assert first != [roll(chaos, "s2", n) for n in range(200)]
    assert all(10 <= r.delay_ms <= 500 + chaos.slow_first_byte_ms for r in first)
    faults = [r.fault for r in first]
    assert {"overloaded", "server_error", None} == set(faults)  # no drops at chance 0
    assert 20 < faults.count(None) < 180
    with pytest.raises(ValueError):
        Chaos(overloaded=0.6, dropped=0.6)
