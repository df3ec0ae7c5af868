"""The Anthropic client's stream, over real HTTP: replies the offline model plays (and, for
what its scripts cannot say, a raw event stream served as is) read into our message,
each piece told as it arrives; Bedrock's client signing its request for the model's id.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import importlib.util
import json
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from duragent.activities.model import Model
from duragent.activities.models.anthropic_model import AnthropicModel, ProviderNotSetUp, make
from duragent.activities.models.clients import ClientOptions, MissingProviderPackage, ModelClients
from duragent.activities.models.seam import Delta, ModelFailed, ModelRequest
from duragent.domain.config import TurnSnapshot
from duragent.domain.messages import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    user_text,
)
from duragent.domain.models import OFFLINE_KEY, PROVIDERS, Endpoint
from duragent.offline_model import OfflineModelServer, Script

MODEL = "claude-sonnet-5-5"
THINKING = "The user wants two files read; both at once is faster."
TEXT = "Reading both files now, then I will compare what they say."
SIGNATURE = "c2lnbmVkLWJ5LXRoZS1tb2RlbA=="


@pytest.fixture(scope="module")
def offline() -> Iterator[OfflineModelServer]:
    with OfflineModelServer(Script()) as server:
        yield server


def request(key: str, model: str = MODEL, thinking: str = "off") -> ModelRequest:
    snapshot = TurnSnapshot.model_validate(
        {
            "model": model,
            "thinking_level": thinking,
            "system_prompt": "You read files.",
            "active_tools": None,
            "max_tokens": 1024,
        }
    )
    return ModelRequest(snapshot, [user_text("compare a.txt and b.txt", 1)], [], key, 1_000)


def claude(base_url: str) -> AnthropicModel:
    return make(PROVIDERS["anthropic"], Endpoint(base_url, OFFLINE_KEY), ClientOptions())


async def reply(
    base_url: str, key: str, deltas: list[Delta] | None = None
) -> tuple[AssistantMessage, list[Delta]]:
    told = [] if deltas is None else deltas
    model = claude(base_url)
    try:
        return await model.ask(request(key)).reply(told.append), told
    finally:
        await model.aclose()


def joined(deltas: list[Delta], index: int) -> str:
    return "".join(d.text for d in deltas if d.content_index == index)


async def test_thinking_text_and_parallel_calls_become_our_message(
    offline: OfflineModelServer,
) -> None:
    read_a = {"path": "a.txt", "why": "the first of the two files to compare " * 3}
    offline.add_steps(
        "parallel",
        [
            {
                "reply": [
                    {"thinking": THINKING, "signature": SIGNATURE},
                    {"text": TEXT},
                    {"tool_use": {"id": "toolu_a", "name": "read", "input": read_a}},
                    {"tool_use": {"id": "toolu_b", "name": "ls", "input": {"path": "."}}},
                ],
                "usage": {
                    "input_tokens": 1200,
                    "output_tokens": 345,
                    "cache_read_input_tokens": 1000,
                    "cache_creation_input_tokens": 200,
                },
            }
        ],
    )
    message, deltas = await reply(offline.base_url, "parallel")

    assert message.content == [
        ThinkingContent(thinking=THINKING, signature=SIGNATURE),
        TextContent(text=TEXT),
        ToolCall(id="toolu_a", name="read", arguments=read_a),
        ToolCall(id="toolu_b", name="ls", arguments={"path": "."}),
    ]
    assert (message.stop_reason, message.model, message.api, message.provider) == (
        "toolUse",
        MODEL,
        "anthropic-messages",
        "anthropic",
    )
    # The output count comes at the end (message_start says 1), the cache counts with it.
    assert message.usage == Usage(
        input_tokens=1200, output_tokens=345, cache_read_tokens=1000, cache_write_tokens=200
    )

    # Each piece as it came: block by block, in the final message's indexes, several
    # pieces each, a call's argument JSON named by its tool.
    order = [d.content_index for d in deltas]
    assert order == sorted(order) and set(order) == {0, 1, 2, 3}
    assert all(order.count(i) > 1 for i in (0, 1, 2))
    assert {(d.content_index, d.kind, d.tool_name) for d in deltas} == {
        (0, "thinking", None),
        (1, "text", None),
        (2, "toolCall", "read"),
        (3, "toolCall", "ls"),
    }
    assert (joined(deltas, 0), joined(deltas, 1)) == (THINKING, TEXT)
    assert json.loads(joined(deltas, 2)) == read_a


async def test_an_aborted_reply_keeps_what_arrived_and_no_call(
    offline: OfflineModelServer,
) -> None:
    offline.add_steps(
        "abort",
        [
            {
                "reply": [
                    {"thinking": THINKING, "signature": SIGNATURE},
                    {"text": TEXT},
                    {"tool_use": {"name": "write", "input": {"path": "c.txt", "content": TEXT}}},
                ],
                # thinking's 3 pieces, its signature, the text's 3, a piece of the call's
                # arguments; then silence
                "stall_after_chunks": 8,
            }
        ],
    )
    deltas: list[Delta] = []
    calling = asyncio.Event()

    def told(delta: Delta) -> None:
        deltas.append(delta)
        if delta.kind == "toolCall":
            calling.set()

    model = claude(offline.base_url)
    call = model.ask(request("abort"))
    streaming = asyncio.create_task(call.reply(told))
    await asyncio.wait_for(calling.wait(), 20)
    streaming.cancel()
    with pytest.raises(asyncio.CancelledError):
        await streaming
    await model.aclose()

    # What arrived stays; the call does not (it will not run).
    so_far = call.so_far()
    assert so_far.content == [
        ThinkingContent(thinking=THINKING, signature=SIGNATURE),
        TextContent(text=TEXT),
    ]
    assert (so_far.stop_reason, so_far.tool_calls) == ("aborted", [])


async def test_a_connection_cut_mid_reply_is_a_retryable_network_failure(
    offline: OfflineModelServer,
) -> None:
    offline.add_steps("cut", [{"reply": [{"text": TEXT}], "cut_after_chunks": 2}])
    model = claude(offline.base_url)
    call = model.ask(request("cut"))
    with pytest.raises(ModelFailed) as failed:
        await call.reply(lambda _: None)
    await model.aclose()
    failure = failed.value.failure
    assert (failure.kind, failure.retryable) == ("network", True)
    assert failure.message.startswith("stream interrupted: ")
    assert call.so_far().content == [TextContent(text=TEXT[:40])]


# A stream served as is, for what the offline model's scripts cannot say.


@dataclass
class Served:
    """A local HTTP server answering every request with `body`, once each."""

    body: bytes
    content_type: str = "text/event-stream"
    requests: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)
    base_url: str = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        path = head[0].split(" ")[1]
        headers = {}
        for line in head[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.requests.append((path, headers, json.loads(body)))
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n" % (self.content_type.encode(), len(self.body)) + self.body
        )
        await writer.drain()
        writer.close()


Serve = Callable[[Served], Awaitable[Served]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Start a `Served` on a free port; every one is closed after the test."""
    servers: list[asyncio.Server] = []

    async def start(served: Served) -> Served:
        server = await asyncio.start_server(served.handle, "127.0.0.1", 0)
        servers.append(server)
        served.base_url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        return served

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


Block = tuple[dict[str, Any], list[dict[str, Any]]]
"""A content block's start and its deltas."""


def events(*blocks: Block, stop: bool = True) -> list[dict[str, Any]]:
    """A reply's raw events: each block's start and deltas; message_stop unless not `stop`."""
    usage = {
        "input_tokens": 30,
        "output_tokens": 1,
        "cache_read_input_tokens": 500,
        "cache_creation_input_tokens": 20,
    }
    out: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            },
        }
    ]
    for index, (start_block, deltas) in enumerate(blocks):
        out.append({"type": "content_block_start", "index": index, "content_block": start_block})
        out += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        out.append({"type": "content_block_stop", "index": index})
    out.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            # The final counts: output, and here input and the cache read (cumulative,
            # each replacing the first); the cache write not told again.
            "usage": {"output_tokens": 12, "input_tokens": 31, "cache_read_input_tokens": 510},
        }
    )
    if stop:
        out.append({"type": "message_stop"})
    return out


def sse(stream: list[dict[str, Any]]) -> bytes:
    """`stream` as the API sends it: server-sent events, a ping after the first."""
    pinged = [*stream[:1], {"type": "ping"}, *stream[1:]]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in pinged)


REDACTED: Block = ({"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}, [])
TEXT_BLOCK: Block = ({"type": "text", "text": ""}, [{"type": "text_delta", "text": TEXT}])


async def test_redacted_thinking_and_arguments_that_are_not_json(serve: Serve) -> None:
    broken_call: Block = (
        {"type": "tool_use", "id": "toolu_x", "name": "read", "input": {}},
        [{"type": "input_json_delta", "partial_json": '{"path": "a.t'}],
    )
    served = await serve(Served(sse(events(REDACTED, TEXT_BLOCK, broken_call))))
    message, deltas = await reply(served.base_url, "redacted")
    assert message.content == [
        ThinkingContent(thinking="", signature="ZW5jcnlwdGVk", redacted=True),
        TextContent(text=TEXT),
        ToolCall(id="toolu_x", name="read", arguments={"__invalid_json__": '{"path": "a.t'}),
    ]
    assert message.usage == Usage(
        input_tokens=31, output_tokens=12, cache_read_tokens=510, cache_write_tokens=20
    )
    assert [(d.content_index, d.kind, d.tool_name) for d in deltas] == [
        (1, "text", None),
        (2, "toolCall", "read"),
    ]


async def test_a_stream_that_ends_before_message_stop_is_incomplete(
    serve: Serve,
) -> None:
    served = await serve(Served(sse(events(TEXT_BLOCK, stop=False))))
    model = claude(served.base_url)
    call = model.ask(request("incomplete"))
    with pytest.raises(ModelFailed) as failed:
        await call.reply(lambda _: None)
    await model.aclose()
    failure = failed.value.failure
    assert (failure.kind, failure.retryable) == ("network", True)
    assert failure.message == "the model stream ended before message_stop"
    assert call.so_far().content == [TextContent(text=TEXT)]


# Bedrock: the same Messages API, signed with AWS credentials, at the model's path.

BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


def event_stream(stream: list[dict[str, Any]]) -> bytes:
    """`stream` as Bedrock sends it: AWS event stream messages, each a JSON `chunk` whose
    `bytes` are the event's JSON, base64."""
    out = b""
    for event in stream:
        payload = json.dumps({"bytes": base64.b64encode(json.dumps(event).encode()).decode()})
        headers = b""
        for name, value in [
            (":event-type", "chunk"),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ]:
            headers += bytes([len(name)]) + name.encode() + b"\x07"
            headers += struct.pack(">H", len(value)) + value.encode()
        total = 12 + len(headers) + len(payload) + 4
        prelude = struct.pack(">II", total, len(headers))
        message = prelude + struct.pack(">I", binascii.crc32(prelude)) + headers
        message += payload.encode()
        out += message + struct.pack(">I", binascii.crc32(message))
    return out


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> pytest.MonkeyPatch:
    """An AWS environment of its own: no profile, no config files, no instance metadata."""
    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_BEARER_TOKEN_BEDROCK",
        "ANTHROPIC_BEDROCK_BASE_URL",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return monkeypatch


async def test_bedrock_signs_its_request_for_the_model_at_its_path(
    serve: Serve, aws: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("botocore", reason="the bedrock extra is not installed")
    aws.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    aws.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    aws.setenv("AWS_REGION", "eu-west-3")
    served = await serve(
        Served(event_stream(events(TEXT_BLOCK)), "application/vnd.amazon.eventstream")
    )
    model = make(PROVIDERS["bedrock"], Endpoint(served.base_url, None), ClientOptions())
    try:
        message = await model.ask(request("b", f"bedrock:{BEDROCK_MODEL}", "high")).reply(
            lambda _: None
        )
    finally:
        await model.aclose()

    assert message.content == [TextContent(text=TEXT)]
    assert (message.provider, message.stop_reason) == ("bedrock", "stop")
    [(path, headers, body)] = served.requests
    assert path == f"/model/{BEDROCK_MODEL}/invoke-with-response-stream"
    assert (
        headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        and "/eu-west-3/bedrock/aws4_request" in headers["authorization"]
    )
    assert headers["x-amz-date"]
    # The model is in the path, not the body; Sonnet 4.5 thinks on a budget.
    assert "model" not in body and body["anthropic_version"]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 16384}


async def test_bedrock_without_a_region_says_which_variable_to_set(
    aws: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("botocore", reason="the bedrock extra is not installed")
    with pytest.raises(ProviderNotSetUp, match="set AWS_REGION"):
        make(PROVIDERS["bedrock"], Endpoint(None, None), ClientOptions())

    # A turn on it fails at once, not retried, with those words.
    clients = ModelClients(environ={})
    stream = Model(clients).ask(request("b", f"bedrock:{BEDROCK_MODEL}"))
    with pytest.raises(ModelFailed) as failed:
        await stream.reply(lambda _: None)
    assert failed.value.failure.retryable is False
    assert "needs an AWS region: set AWS_REGION" in failed.value.failure.message
    await clients.aclose()


def test_vertex_without_its_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        installed = importlib.util.find_spec("google.auth") is not None
    except ModuleNotFoundError:
        installed = False
    if installed:
        pytest.skip("google-auth is installed here")
    monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
    with pytest.raises(MissingProviderPackage, match=r"pip install -e '\.\[vertex\]'"):
        make(PROVIDERS["vertex"], Endpoint(None, None), ClientOptions())
