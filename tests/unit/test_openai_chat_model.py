"""The Chat Completions model client (`openai:`, and every OpenAI-compatible server:
ollama, vllm, openrouter, gemini), through the official openai SDK over real HTTP to the
offline model: streamed replies, parallel tool calls, reasoning, aborts, failures and
broken streams, a conversation with tool results going back, and a summary."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import openai
import pytest

from duragent.activities.models.clients import ClientOptions
from duragent.activities.models.openai_chat import OpenAIChatModel, make
from duragent.activities.models.openai_format import TOOL_IMAGES
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
from duragent.domain.turns import ProviderFailure
from duragent.offline_model import OfflineModelServer, Script

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
CHAT = "/v1/chat/completions"


class Served:
    """The offline model playing `steps`, and the client under test pointed at it."""

    def __init__(self, server: OfflineModelServer, model: OpenAIChatModel) -> None:
        self.server = server
        self.model = model

    def bodies(self) -> list[dict[str, Any]]:
        """The Chat Completions requests the server received, oldest first."""
        return [r.body for r in self.server.requests if r.path == CHAT]


@pytest.fixture
async def serve() -> AsyncIterator[Any]:
    started: list[Served] = []

    def start(
        steps: list[dict[str, Any]], options: ClientOptions | None = None, **script: Any
    ) -> Served:
        server = OfflineModelServer(Script.of(steps, **script)).start()
        where = Endpoint(server.openai_base_url, "offline")
        model = make(PROVIDERS["openai"], where, options or ClientOptions())
        started.append(Served(server, model))
        return started[-1]

    yield start
    for served in started:
        await served.model.aclose()
        served.server.stop()


def user(text: str) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=1)


def ask(
    messages: list[LlmMessage],
    *,
    model: str = "gpt-4.1",
    thinking: str = "off",
    tools: list[ToolSpec] | None = None,
) -> ModelRequest:
    snapshot = TurnSnapshot.model_validate(
        {
            "model": f"openai:{model}",
            "thinking_level": thinking,
            "system_prompt": SYSTEM,
            "active_tools": None,
            "max_tokens": 4096,
        }
    )
    return ModelRequest(snapshot, messages, tools or [], SESSION, timestamp=1234)


async def reply(
    model: OpenAIChatModel, request: ModelRequest
) -> tuple[AssistantMessage, list[Delta]]:
    deltas: list[Delta] = []
    message = await model.ask(request).reply(deltas.append)
    return message, deltas


def streamed(deltas: list[Delta], index: int) -> str:
    return "".join(d.text for d in deltas if d.content_index == index)


async def failure_of(model: OpenAIChatModel, request: ModelRequest) -> ProviderFailure:
    with pytest.raises(ModelFailed) as failed:
        await model.ask(request).reply(lambda _: None)
    return failed.value.failure


# ---------------------------------------------------------------------------------------------
# Replies


async def test_text_streams_in_pieces_and_ends_as_streamed(serve: Any) -> None:
    usage = {"input_tokens": 40, "cache_read_input_tokens": 300, "output_tokens": 12}
    served = serve([{"reply": [{"text": LONG_TEXT}], "usage": usage}])
    message, deltas = await reply(served.model, ask([user("hi")]))

    assert len(deltas) > 1 and {(d.content_index, d.kind) for d in deltas} == {(0, "text")}
    assert streamed(deltas, 0) == LONG_TEXT
    assert message.content == [TextContent(text=LONG_TEXT)]
    assert (message.api, message.provider, message.model) == ("openai-chat", "openai", "gpt-4.1")
    assert (message.stop_reason, message.timestamp) == ("stop", 1234)
    # OpenAI's prompt tokens count the cached ones; ours count them apart, as Anthropic's.
    assert message.usage == Usage(input_tokens=40, output_tokens=12, cache_read_tokens=300)
    (body,) = served.bodies()
    assert body["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "hi"},
    ]
    assert (body["model"], body["max_completion_tokens"], body["user"]) == (
        "gpt-4.1",
        4096,
        SESSION,
    )
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert "reasoning_effort" not in body and "tools" not in body


async def test_parallel_tool_calls_with_ids_names_and_arguments(serve: Any) -> None:
    served = serve(
        [
            {
                "reply": [
                    {"text": "Looking."},
                    {"tool_use": {"id": "call_fixed", "name": "ls", "input": {"path": "."}}},
                    {"tool_use": {"name": "read", "input": {"path": "src/app/main.py"}}},
                ]
            }
        ]
    )
    message, deltas = await reply(served.model, ask([user("look")], tools=TOOLS))

    text, ls, read = message.content
    assert text == TextContent(text="Looking.")
    assert isinstance(ls, ToolCall) and isinstance(read, ToolCall)
    assert (ls.id, ls.name, ls.arguments) == ("call_fixed", "ls", {"path": "."})
    assert read.id.startswith("call_") and read.id != ls.id
    assert (read.name, read.arguments) == ("read", {"path": "src/app/main.py"})
    assert message.stop_reason == "toolUse"
    # Each call's argument JSON streams under the index it has in the message, named.
    assert {(d.content_index, d.kind, d.tool_name) for d in deltas if d.kind == "toolCall"} == {
        (1, "toolCall", "ls"),
        (2, "toolCall", "read"),
    }
    assert json.loads(streamed(deltas, 2)) == {"path": "src/app/main.py"}
    (body,) = served.bodies()
    assert body["tools"][1] == {
        "type": "function",
        "function": {
            "name": "read",
            "description": "The read tool.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }


async def test_reasoning_streams_as_thinking_before_the_text(serve: Any) -> None:
    served = serve(
        [
            {
                "reply": [{"thinking": "The user greets; greet back."}, {"text": "Hello!"}],
                "usage": {"input_tokens": 5, "output_tokens": 30, "reasoning_tokens": 22},
            },
            {"reply": [{"text": "Again."}]},
            {"reply": [{"text": "Plain."}]},
        ]
    )
    message, deltas = await reply(served.model, ask([user("hi")], model="o4-mini", thinking="high"))
    await reply(served.model, ask([user("hi")], model="o4-mini", thinking="minimal"))
    await reply(served.model, ask([user("hi")], model="gpt-4.1", thinking="high"))

    assert message.content == [
        ThinkingContent(thinking="The user greets; greet back."),
        TextContent(text="Hello!"),
    ]
    assert deltas[0].kind == "thinking"
    assert streamed(deltas, 0) == "The user greets; greet back." and streamed(deltas, 1) == "Hello!"
    assert message.usage.reasoning_tokens == 22 and message.usage.output_tokens == 30
    # An effort for a reasoning model (the o-series take no "minimal"), none for others.
    efforts = [body.get("reasoning_effort") for body in served.bodies()]
    assert efforts == ["high", "low", None]


def sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "qwen3:8b",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def over(body: bytes) -> OpenAIChatModel:
    """A client whose HTTP answers every request with `body` as an event stream: chunks
    as servers other than the offline model send them."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx2.Response(200, headers=headers, content=body)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(answer))
    client = openai.AsyncOpenAI(api_key="none", base_url="http://ollama/v1", http_client=http)
    return OpenAIChatModel(client, "ollama")


async def test_reasoning_field_of_ollama_and_openrouter_is_thinking_too() -> None:
    model = over(
        sse(
            chunk({"role": "assistant", "content": "", "reasoning": "Short "}),
            chunk({"reasoning": "answer."}),
            chunk({"content": "Yes."}),
            # Without an index (as some servers send them): one call, by its id.
            chunk({"tool_calls": [{"id": "c1", "function": {"name": "ls", "arguments": "{"}}]}),
            chunk({"tool_calls": [{"function": {"arguments": '"path": "."}'}}]}),
            chunk({}, finish="stop"),  # older Ollama says "stop" after tool calls
        )
    )
    message, deltas = await reply(model, ask([user("hi")], model="qwen3:8b"))
    await model.aclose()

    assert message.content == [
        ThinkingContent(thinking="Short answer."),
        TextContent(text="Yes."),
        ToolCall(id="c1", name="ls", arguments={"path": "."}),
    ]
    assert (message.provider, message.model, message.stop_reason) == (
        "ollama",
        "qwen3:8b",
        "toolUse",
    )
    assert [(d.content_index, d.kind) for d in deltas][:2] == [(0, "thinking"), (0, "thinking")]


async def test_arguments_that_are_not_json_are_kept_for_the_tool() -> None:
    call = {"index": 0, "id": "c1", "function": {"name": "ls", "arguments": "{not json"}}
    model = over(sse(chunk({"tool_calls": [call]}), chunk({}, finish="tool_calls")))
    message, _ = await reply(model, ask([user("hi")]))
    await model.aclose()
    assert message.tool_calls == [
        ToolCall(id="c1", name="ls", arguments={"__invalid_json__": "{not json"})
    ]


async def test_a_stream_ending_without_its_finish_reason_is_retried() -> None:
    model = over(sse(chunk({"content": "Half a rep"})))
    failure = await failure_of(model, ask([user("hi")]))
    await model.aclose()
    assert (failure.kind, failure.retryable) == ("network", True)
    assert "finish_reason" in failure.message


# ---------------------------------------------------------------------------------------------
# Aborts, failures, broken streams


async def test_abort_mid_stream_keeps_the_text_so_far(serve: Any) -> None:
    served = serve(
        [
            {
                "reply": [{"text": LONG_TEXT}, {"tool_use": {"name": "ls", "input": {}}}],
                "chunk_delay_ms": 200,
            }
        ]
    )
    call = served.model.ask(ask([user("hi")], tools=TOOLS))
    arrived = asyncio.Event()
    deltas: list[Delta] = []

    def on_delta(delta: Delta) -> None:
        deltas.append(delta)
        arrived.set()

    task = asyncio.create_task(call.reply(on_delta))
    await asyncio.wait_for(arrived.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    partial = call.so_far()
    assert partial.stop_reason == "aborted" and partial.tool_calls == []
    assert partial.content == [TextContent(text=streamed(deltas, 0))]
    assert LONG_TEXT.startswith(streamed(deltas, 0)) and streamed(deltas, 0) != LONG_TEXT
    assert (partial.api, partial.provider, partial.timestamp) == ("openai-chat", "openai", 1234)


async def test_error_replies_are_classified(serve: Any) -> None:
    served = serve(
        [
            {"error": {"status": 429, "retry_after": 2}},
            {"error": {"status": 401, "message": "Incorrect API key provided: sk-proj-abc123xyz"}},
            {
                "error": {
                    "status": 400,
                    "code": "context_length_exceeded",
                    "message": "This model's maximum context length is 128000 tokens.",
                }
            },
            {
                "error": {
                    "status": 404,
                    "code": "model_not_found",
                    "message": "The model `gpt-9` does not exist or you do not have access to it.",
                }
            },
        ]
    )
    request = ask([user("hi")])
    limited = await failure_of(served.model, request)
    auth = await failure_of(served.model, request)
    overflow = await failure_of(served.model, request)
    unknown = await failure_of(served.model, ask([user("hi")], model="gpt-9"))

    assert (limited.kind, limited.status, limited.retryable) == ("rate_limit", 429, True)
    assert limited.retry_after_ms == 2000
    assert (auth.kind, auth.retryable) == ("auth", False)
    assert "sk-proj" not in auth.message and "[key]" in auth.message
    assert (overflow.kind, overflow.retryable) == ("context_overflow", False)
    assert (unknown.kind, unknown.retryable) == ("not_found", False)
    assert "unknown model 'gpt-9'" in unknown.message


async def test_overloaded_server_is_retried(serve: Any) -> None:
    served = serve([{"reply": [{"text": "ok"}]}], chaos={"overloaded": 1.0})
    failure = await failure_of(served.model, ask([user("hi")]))
    assert (failure.kind, failure.status, failure.retryable) == ("server", 503, True)


@pytest.mark.parametrize(
    "fault",
    [{"cut_after_chunks": 1}, {"chaos": {"dropped": 1.0}}],
    ids=["cut", "dropped"],
)
async def test_a_broken_stream_is_a_retryable_interruption(serve: Any, fault: Any) -> None:
    chaos = fault.get("chaos")
    step = {"reply": [{"text": LONG_TEXT}], **{k: v for k, v in fault.items() if k != "chaos"}}
    served = serve([step], chaos=chaos)
    call = served.model.ask(ask([user("hi")]))
    deltas: list[Delta] = []
    with pytest.raises(ModelFailed) as failed:
        await call.reply(deltas.append)

    failure = failed.value.failure
    assert (failure.kind, failure.retryable) == ("network", True)
    assert failure.message.startswith("stream interrupted")
    assert deltas and call.so_far().content == [TextContent(text=streamed(deltas, 0))]


async def test_a_silent_stream_times_out_and_is_retried(serve: Any) -> None:
    served = serve(
        [{"reply": [{"text": LONG_TEXT}], "stall_after_chunks": 1}],
        options=ClientOptions(read_timeout_s=0.5),
    )
    failure = await failure_of(served.model, ask([user("hi")]))
    assert (failure.kind, failure.retryable) == ("timeout", True)


async def test_an_error_sent_inside_the_stream_is_classified() -> None:
    error = {"message": "The server had an error.", "type": "server_error", "code": None}
    streamed_error = over(sse(chunk({"content": "Hal"}), {"error": error}))
    unreadable = over(b"data: {not json\n\n")
    server = await failure_of(streamed_error, ask([user("hi")]))
    garbled = await failure_of(unreadable, ask([user("hi")]))
    await streamed_error.aclose()
    await unreadable.aclose()

    assert (server.kind, server.retryable) == ("server", True)
    assert server.message == "stream error: server_error: The server had an error."
    assert (garbled.kind, garbled.retryable) == ("server", True)
    assert garbled.message.startswith("the model stream could not be read")


@pytest.mark.parametrize("data", [b"null", b'["a list"]'], ids=["null", "list"])
async def test_a_chunk_that_is_not_an_object_is_unreadable(data: bytes) -> None:
    model = over(b"data: " + data + b"\n\n" + sse(chunk({"content": "Hi"}, finish="stop")))
    failure = await failure_of(model, ask([user("hi")]))
    await model.aclose()
    assert (failure.kind, failure.retryable) == ("server", True)
    assert failure.message.startswith("the model stream could not be read")


# ---------------------------------------------------------------------------------------------
# A conversation, and a summary


async def test_tool_results_go_back_paired_with_their_calls(serve: Any) -> None:
    served = serve(
        [
            {
                "reply": [
                    {"thinking": "Two looks."},
                    {"tool_use": {"id": "call_a", "name": "read", "input": {"path": "x.png"}}},
                    {"tool_use": {"id": "call_b", "name": "ls", "input": {"path": "."}}},
                ]
            },
            {"reply": [{"text": "A one-pixel image."}]},
        ]
    )
    first, _ = await reply(served.model, ask([user("look")], model="o4-mini", tools=TOOLS))
    results = [
        ToolResultMessage(
            tool_call_id="call_a",
            tool_name="read",
            content=[ImageContent(media_type="image/png", data=PIXEL)],
            timestamp=2,
        ),
        ToolResultMessage(
            tool_call_id="call_b",
            tool_name="ls",
            content=[TextContent(text="x.png")],
            timestamp=3,
        ),
    ]
    second, _ = await reply(
        served.model,
        ask([user("look"), first, *results, user("and?")], model="o4-mini", tools=TOOLS),
    )

    # The offline model refuses a call without its result (and the reverse) with a 400.
    assert second.content == [TextContent(text="A one-pixel image.")]
    assert [r.status for r in served.server.requests] == [200, 200]
    sent = served.bodies()[1]["messages"]
    roles = [m["role"] for m in sent]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user", "user"]
    assistant = sent[2]
    assert assistant["content"] is None  # its thinking is not sent back
    assert [(c["id"], c["function"]["name"]) for c in assistant["tool_calls"]] == [
        ("call_a", "read"),
        ("call_b", "ls"),
    ]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"path": "x.png"}
    assert sent[3] == {
        "role": "tool",
        "tool_call_id": "call_a",
        "content": "(see the attached image)",
    }
    assert sent[4] == {"role": "tool", "tool_call_id": "call_b", "content": "x.png"}
    # A tool message takes text only: the image follows all the results, as a user's.
    assert sent[5]["content"] == [
        {"type": "text", "text": TOOL_IMAGES},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}},
    ]
    assert sent[6] == {"role": "user", "content": "and?"}


async def test_complete_answers_a_summary_in_one_piece(serve: Any) -> None:
    served = serve(
        [{"reply": [{"text": "The session wrote app.py."}], "usage": {"output_tokens": 7}}]
    )
    text, usage = await served.model.complete(
        SummaryRequest("openai:gpt-4.1", "Summarise.", max_tokens=500, session_id=SESSION)
    )

    assert text == "The session wrote app.py." and usage.output_tokens == 7
    (body,) = served.bodies()
    assert body["messages"] == [{"role": "user", "content": "Summarise."}]
    assert (body["max_completion_tokens"], body["user"]) == (500, SESSION)
    assert not body.get("stream")


async def test_complete_failure_is_classified(serve: Any) -> None:
    served = serve([{"error": {"status": 500}}])
    with pytest.raises(ModelFailed) as failed:
        await served.model.complete(SummaryRequest("openai:gpt-4.1", "Sum.", 500, SESSION))
    assert (failed.value.failure.kind, failed.value.failure.retryable) == ("server", True)


async def test_every_openai_compatible_provider_gets_this_client() -> None:
    for name in ("openai", "ollama", "vllm", "openrouter", "gemini"):
        provider = PROVIDERS[name]
        model = make(provider, Endpoint(provider.base_url, None), ClientOptions(read_timeout_s=9))
        assert (model.api, model.provider) == ("openai-chat", name)
        assert model.sdk.api_key == "none"  # a server of the user's own takes no key
        assert model.sdk.timeout == openai.Timeout(connect=10, read=9, write=30, pool=10)
        assert model.sdk.max_retries == 0
        await model.aclose()
