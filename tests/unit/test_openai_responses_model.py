"""The Responses API's model client (`openai-responses:`), through the official openai SDK
over real HTTP to the offline model: streamed replies, tool calls, reasoning carried back,
aborts, failures, and a summary."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx2
import openai
import pytest

from duragent.activities.models.clients import ClientOptions
from duragent.activities.models.openai_responses import (
    OpenAIResponsesModel,
    ReplyState,
    StreamFailure,
    make,
)
from duragent.activities.models.seam import Delta, ModelFailed, ModelRequest, SummaryRequest
from duragent.domain.config import TurnSnapshot
from duragent.domain.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from duragent.domain.models import PROVIDERS, Endpoint
from duragent.domain.tools import ToolSpec
from duragent.domain.transcript import LlmMessage
from duragent.offline_model import OfflineModelServer, Script

MODEL = "o4-mini"
SESSION = "session-7"
LONG_TEXT = "I'll look at the workspace first, then decide what to change."
SYSTEM = "You are terse."
TOOLS: list[ToolSpec] = [
    {
        "name": name,
        "description": f"The {name} tool.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    for name in ("ls", "read")
]
PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJ"
    "RU5ErkJggg=="
)


class Served:
    """The offline model playing `steps`, and the client under test pointed at it."""

    def __init__(self, server: OfflineModelServer, model: OpenAIResponsesModel) -> None:
        self.server = server
        self.model = model

    def bodies(self) -> list[dict[str, Any]]:
        """The Responses requests the server received, oldest first."""
        return [r.body for r in self.server.requests if r.path == "/v1/responses"]


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[OfflineModelServer] = []

    def start(steps: list[dict[str, Any]], options: ClientOptions | None = None) -> Served:
        server = OfflineModelServer(Script.of(steps)).start()
        servers.append(server)
        where = Endpoint(server.openai_base_url, "offline")
        return Served(
            server, make(PROVIDERS["openai-responses"], where, options or ClientOptions())
        )

    yield start
    for server in servers:
        server.stop()


def user(text: str) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=1)


def ask(
    messages: list[LlmMessage],
    *,
    thinking: str = "off",
    tools: list[ToolSpec] | None = None,
    model: str = MODEL,
) -> ModelRequest:
    snapshot = TurnSnapshot.model_validate(
        {
            "model": f"openai-responses:{model}",
            "thinking_level": thinking,
            "system_prompt": SYSTEM,
            "active_tools": None,
            "max_tokens": 4096,
        }
    )
    return ModelRequest(snapshot, messages, tools or [], SESSION, timestamp=1234)


async def reply(
    model: OpenAIResponsesModel, request: ModelRequest
) -> tuple[AssistantMessage, list[Delta]]:
    deltas: list[Delta] = []
    message = await model.ask(request).reply(deltas.append)
    return message, deltas


def streamed(deltas: list[Delta], index: int) -> str:
    return "".join(d.text for d in deltas if d.content_index == index)


async def test_text_streams_in_pieces_and_ends_as_streamed(serve: Any) -> None:
    served = serve([{"reply": [{"text": LONG_TEXT}]}])
    message, deltas = await reply(served.model, ask([user("hi")]))
    await served.model.aclose()

    assert len(deltas) > 1 and {(d.content_index, d.kind) for d in deltas} == {(0, "text")}
    assert streamed(deltas, 0) == LONG_TEXT
    assert message.content == [TextContent(text=LONG_TEXT)]
    assert (message.api, message.provider, message.model) == (
        "openai-responses",
        "openai-responses",
        MODEL,
    )
    assert (message.stop_reason, message.timestamp) == ("stop", 1234)
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    (body,) = served.bodies()
    assert body["model"] == MODEL and body["instructions"] == SYSTEM
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    ]
    assert (body["stream"], body["store"], body["max_output_tokens"]) == (True, False, 4096)
    assert body["prompt_cache_key"] == SESSION == served.server.requests[0].key
    assert "reasoning" not in body  # thinking is off
    assert body["include"] == ["reasoning.encrypted_content"]  # o4-mini reasons regardless


async def test_parallel_tool_calls_stream_at_their_blocks(serve: Any) -> None:
    served = serve(
        [
            {
                "reply": [
                    {"text": "Looking."},
                    {"tool_use": {"id": "call_fixed", "name": "ls", "input": {"path": "."}}},
                    {"tool_use": {"name": "read", "input": {"path": "src/app/main.py" * 3}}},
                ]
            }
        ]
    )
    message, deltas = await reply(served.model, ask([user("look")], tools=TOOLS))
    await served.model.aclose()

    text, ls, read = message.content
    assert text == TextContent(text="Looking.")
    assert ls == ToolCall(id="call_fixed", name="ls", arguments={"path": "."})
    assert isinstance(read, ToolCall) and read.name == "read"
    assert read.id.startswith("call_") and read.arguments == {"path": "src/app/main.py" * 3}
    assert message.stop_reason == "toolUse"
    # Each call's argument JSON streams at its block's index, named; the read's in pieces.
    calls = [(d.content_index, d.tool_name) for d in deltas if d.kind == "toolCall"]
    assert calls.count((2, "read")) > 1 and set(calls) == {(1, "ls"), (2, "read")}
    assert json.loads(streamed(deltas, 2)) == read.arguments
    (body,) = served.bodies()
    assert body["tools"][0] == {
        "type": "function",
        "name": "ls",
        "description": "The ls tool.",
        "parameters": TOOLS[0]["input_schema"],
        "strict": False,
    }


THOUGHT = "The user wants the files listed; ls first."
REASONING_USAGE = {
    "input_tokens": 100,
    "output_tokens": 40,
    "cache_read_input_tokens": 900,
    "cache_creation_input_tokens": 50,
    "reasoning_tokens": 12,
}


async def test_reasoning_is_thinking_and_goes_back_with_its_encrypted_content(
    serve: Any,
) -> None:
    served = serve(
        [
            {
                "reply": [
                    {"thinking": THOUGHT, "signature": "enc-abc"},
                    {"tool_use": {"id": "call_1", "name": "ls", "input": {"path": "."}}},
                ],
                "usage": REASONING_USAGE,
            },
            {"reply": [{"text": "There is a.py."}]},
        ]
    )
    first = user("list files")
    message, deltas = await reply(served.model, ask([first], thinking="high", tools=TOOLS))

    thinking, call = message.content
    assert isinstance(thinking, ThinkingContent) and thinking.thinking == THOUGHT
    assert streamed(deltas, 0) == THOUGHT and deltas[0].kind == "thinking"
    signed = json.loads(thinking.signature or "")
    assert signed["id"].startswith("rs_") and signed["encrypted_content"] == "enc-abc"
    assert call == ToolCall(id="call_1", name="ls", arguments={"path": "."})
    assert message.usage == Usage(
        input_tokens=100,  # without the 950 cached (OpenAI's input_tokens count them)
        output_tokens=40,
        cache_read_tokens=900,
        cache_write_tokens=50,
        reasoning_tokens=12,
    )

    result = ToolResultMessage(
        tool_call_id="call_1", tool_name="ls", content=[TextContent(text="a.py")], timestamp=2
    )
    answer, _ = await reply(served.model, ask([first, message, result], thinking="high"))
    await served.model.aclose()

    assert answer.content == [TextContent(text="There is a.py.")]
    asked, answered = served.bodies()
    assert asked["reasoning"] == {"effort": "high", "summary": "auto"}
    assert answered["input"][1:] == [
        {
            "type": "reasoning",
            "id": signed["id"],
            "encrypted_content": "enc-abc",
            "summary": [{"type": "summary_text", "text": THOUGHT}],
        },
        {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": '{"path": "."}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "a.py"},
    ]


async def test_thinking_of_another_model_is_not_sent_as_reasoning(serve: Any) -> None:
    served = serve([{"reply": [{"text": "ok"}]}])
    signature = json.dumps({"type": "reasoning", "id": "rs_1", "encrypted_content": "enc"})
    earlier = [
        AssistantMessage(
            content=[ThinkingContent(thinking="mine", signature=signature), TextContent(text="A")],
            api="openai-responses",
            provider="openai-responses",
            model="o3",  # another model's: its encrypted reasoning is not for this one
            timestamp=1,
        ),
        AssistantMessage(
            content=[ThinkingContent(thinking="claude's", signature="c2lnbmVk")],
            api="anthropic-messages",
            provider="anthropic",
            model=MODEL,
            timestamp=1,
        ),
    ]
    await reply(served.model, ask([user("hi"), *earlier, user("again")], thinking="minimal"))
    await served.model.aclose()

    (body,) = served.bodies()
    assert [item["type"] for item in body["input"]] == ["message"] * 3
    assert body["input"][1] == {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "A"}],
    }
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}  # o4-mini has no minimal


async def test_tool_results_pair_with_their_calls_and_images_follow(serve: Any) -> None:
    served = serve([{"reply": [{"text": "Two files, one picture."}]}])
    calls = AssistantMessage(
        content=[
            TextContent(text="Looking."),
            ToolCall(id="call_a", name="ls", arguments={"path": "."}),
            ToolCall(id="call_b", name="read", arguments={"path": "p.png"}),
        ],
        api="openai-responses",
        provider="openai-responses",
        model=MODEL,
        stop_reason="toolUse",
        timestamp=1,
    )
    image = ImageContent(media_type="image/png", data=PIXEL)
    results = [
        ToolResultMessage(
            tool_call_id="call_a", tool_name="ls", content=[TextContent(text="p.png")], timestamp=2
        ),
        ToolResultMessage(tool_call_id="call_b", tool_name="read", content=[image], timestamp=2),
    ]
    message, _ = await reply(served.model, ask([user("look"), calls, *results], tools=TOOLS))
    await served.model.aclose()

    assert message.content == [TextContent(text="Two files, one picture.")]
    (body,) = served.bodies()  # accepted: every call paired with its output
    assert body["input"][1:] == [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Looking."}],
        },
        {"type": "function_call", "call_id": "call_a", "name": "ls", "arguments": '{"path": "."}'},
        {
            "type": "function_call",
            "call_id": "call_b",
            "name": "read",
            "arguments": '{"path": "p.png"}',
        },
        {"type": "function_call_output", "call_id": "call_a", "output": "p.png"},
        {"type": "function_call_output", "call_id": "call_b", "output": "(see the attached image)"},
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Images from the tool results:"},
                {
                    "type": "input_image",
                    "image_url": f"data:image/png;base64,{PIXEL}",
                    "detail": "auto",
                },
            ],
        },
    ]


async def test_abort_keeps_what_arrived_without_its_tool_calls(serve: Any) -> None:
    served = serve(
        [
            {
                "reply": [
                    {"thinking": THOUGHT},
                    {"text": LONG_TEXT},
                    {"tool_use": {"name": "read", "input": {"path": "x" * 400}}},
                ],
                "chunk_delay_ms": 30,
            }
        ]
    )
    call = served.model.ask(ask([user("go")], thinking="low", tools=TOOLS))
    deltas: list[Delta] = []
    arguments_began = asyncio.Event()

    def on_delta(delta: Delta) -> None:
        deltas.append(delta)
        if delta.kind == "toolCall":
            arguments_began.set()

    task = asyncio.create_task(call.reply(on_delta))
    await asyncio.wait_for(arguments_began.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    partial = call.so_far()
    await served.model.aclose()

    assert partial.stop_reason == "aborted" and partial.tool_calls == []
    thinking, text = partial.content
    assert isinstance(thinking, ThinkingContent) and thinking.thinking == THOUGHT
    assert thinking.signature is None  # never sent back without what followed it
    assert text == TextContent(text=LONG_TEXT) and streamed(deltas, 1) == LONG_TEXT


async def test_error_replies_are_sorted(serve: Any) -> None:
    served = serve(
        [
            {"error": {"status": 429, "retry_after": 2}},
            {"error": {"status": 401, "message": "Incorrect API key provided"}},
            {"error": {"status": 400, "code": "context_length_exceeded", "message": "too long"}},
            {"error": {"status": 529}},
        ]
    )
    failures = []
    for _ in range(4):
        with pytest.raises(ModelFailed) as failed:
            await reply(served.model, ask([user("hi")]))
        failures.append(failed.value.failure)
    await served.model.aclose()

    limited, unauthorised, too_long, overloaded = failures
    assert (limited.kind, limited.retryable, limited.retry_after_ms) == ("rate_limit", True, 2000)
    assert (unauthorised.kind, unauthorised.retryable) == ("auth", False)
    assert "Incorrect API key" in unauthorised.message
    assert (too_long.kind, too_long.retryable) == ("context_overflow", False)
    assert (overloaded.status, overloaded.retryable) == (503, True)


async def test_a_broken_stream_is_a_retryable_failure(serve: Any) -> None:
    cut = serve([{"reply": [{"text": LONG_TEXT}], "cut_after_chunks": 1}])
    deltas: list[Delta] = []
    with pytest.raises(ModelFailed) as failed:
        await cut.model.ask(ask([user("hi")])).reply(deltas.append)
    await cut.model.aclose()
    assert (failed.value.failure.kind, failed.value.failure.retryable) == ("network", True)
    assert streamed(deltas, 0) == LONG_TEXT[:20]  # one piece, then the cut

    stalled = serve(
        [{"reply": [{"text": LONG_TEXT}], "stall_after_chunks": 1}],
        ClientOptions(read_timeout_s=0.5),
    )
    with pytest.raises(ModelFailed) as silent:
        await reply(stalled.model, ask([user("hi")]))
    await stalled.model.aclose()
    assert (silent.value.failure.kind, silent.value.failure.retryable) == ("timeout", True)


def response(**fields: Any) -> dict[str, Any]:
    """A response as the stream's events carry it (their JSON)."""
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": MODEL,
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        **fields,
    }


def test_summary_parts_stream_as_the_paragraphs_the_thinking_ends_with() -> None:
    # The offline model sends one summary part per reasoning item; OpenAI's may send several.
    at = {"item_id": "rs_1", "output_index": 0}
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [],
        "encrypted_content": None,
    }
    parts = [{"type": "summary_text", "text": t} for t in ("First.", "Then.")]
    done = {**item, "summary": parts, "encrypted_content": "enc", "status": "completed"}
    events: list[dict[str, Any]] = [
        {
            "type": "response.output_item.added",
            "sequence_number": 0,
            "output_index": 0,
            "item": item,
        }
    ]
    for number, part in enumerate(parts):
        where = {**at, "summary_index": number, "sequence_number": 0}
        events.append(
            {**where, "type": "response.reasoning_summary_part.added", "part": {**part, "text": ""}}
        )
        events.append(
            {**where, "type": "response.reasoning_summary_text.delta", "delta": part["text"]}
        )
    events.append(
        {"type": "response.output_item.done", "sequence_number": 0, "output_index": 0, "item": done}
    )
    completed = response(status="completed", output=[done])
    events.append({"type": "response.completed", "sequence_number": 9, "response": completed})
    state, deltas = ReplyState(), list[Delta]()
    for event in events:
        state.take(event, deltas.append)
    message = state.message(provider="openai-responses", model=MODEL, timestamp=1, partial=False)

    (thinking,) = message.content
    assert isinstance(thinking, ThinkingContent) and thinking.thinking == "First.\n\nThen."
    assert streamed(deltas, 0) == thinking.thinking
    assert json.loads(thinking.signature or "")["encrypted_content"] == "enc"
    assert message.stop_reason == "stop"


def test_a_failed_response_in_the_stream_is_sorted() -> None:
    # The offline model fails before it streams; OpenAI can also fail a response mid-way.
    failed = response(status="failed", error={"code": "server_error", "message": "boom"})
    state = ReplyState()
    with pytest.raises(StreamFailure) as server:
        state.take({"type": "response.failed", "sequence_number": 3, "response": failed}, print)
    with pytest.raises(StreamFailure) as refused:
        state.take(
            {
                "type": "error",
                "sequence_number": 4,
                "code": "invalid_prompt",
                "message": "no",
                "param": None,
            },
            print,
        )
    assert (server.value.failure.kind, server.value.failure.retryable) == ("server", True)
    assert server.value.failure.message == "stream error: server_error: boom"
    assert (refused.value.failure.kind, refused.value.failure.retryable) == ("bad_request", False)


def over(body: bytes) -> OpenAIResponsesModel:
    """A client whose HTTP answers every request with `body` as an event stream."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx2.Response(200, headers=headers, content=body)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(answer))
    client = openai.AsyncOpenAI(api_key="none", base_url="http://openai/v1", http_client=http)
    return OpenAIResponsesModel(client)


@pytest.mark.parametrize(
    "data", [b"{not json", b"null", b'["a list"]'], ids=["garbled", "null", "list"]
)
async def test_an_event_that_is_not_an_object_is_unreadable(data: bytes) -> None:
    model = over(b"data: " + data + b"\n\n")
    with pytest.raises(ModelFailed) as failed:
        await reply(model, ask([user("hi")]))
    await model.aclose()
    assert (failed.value.failure.kind, failed.value.failure.retryable) == ("server", True)
    assert failed.value.failure.message.startswith("the model stream could not be read")


async def test_complete_answers_in_one_piece(serve: Any) -> None:
    served = serve([{"reply": [{"text": "A summary."}], "usage": REASONING_USAGE}])
    text, usage = await served.model.complete(
        SummaryRequest(f"openai-responses:{MODEL}", "Summarise this.", 512, SESSION)
    )
    await served.model.aclose()
    assert text == "A summary."
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (100, 900, 40)
    (body,) = served.bodies()
    assert body.get("stream") is not True and body["input"] == "Summarise this."
    assert (body["max_output_tokens"], body["store"], body["prompt_cache_key"]) == (
        512,
        False,
        SESSION,
    )
