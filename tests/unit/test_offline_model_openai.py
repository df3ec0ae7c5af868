"""The offline model's OpenAI wires (Chat Completions, Responses), driven through the real
openai SDK over real HTTP, and the same script played on all three wires."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from support import eventually

from duragent.offline_model import OfflineModelServer, Script
from duragent.offline_model.openai_chat import validate_request as validate_chat
from duragent.offline_model.openai_responses import validate_request as validate_responses

MODEL = "offline-test-model"
LONG_TEXT = "I'll look at the workspace first, then decide what to change."
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


def client_for(server: OfflineModelServer, **options: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=server.openai_base_url, api_key="offline", max_retries=0, **options
    )


def chat(text: str = "hi", **extra: Any) -> dict[str, Any]:
    """Keyword arguments of a Chat Completions request with one user message (or `extra`'s
    messages): plain JSON, as a harness might send it, right or wrong."""
    return {"model": MODEL, "messages": [{"role": "user", "content": text}], **extra}


def respond(text: str = "hi", **extra: Any) -> dict[str, Any]:
    """Keyword arguments of a Responses request with `text` as its input (or `extra`'s)."""
    return {"model": MODEL, "input": text, **extra}


def strict_tool(name: str) -> dict[str, Any]:
    """The parameters of a strict function tool taking `path` (and optional `lines`)."""
    return {
        "type": "object",
        "properties": {"path": {"type": "string"}, "lines": {"type": "array"}},
        "required": ["path", "lines"],
        "additionalProperties": False,
    }


TOOL_STEP: dict[str, Any] = {
    "reply": [
        {"tool_use": {"id": "call_fixed", "name": "ls", "input": {"path": "."}}},
        {"tool_use": {"name": "read", "input": {"path": "src/app/main.py", "lines": [1, 40]}}},
    ]
}


# ---------------------------------------------------------------------------------------------
# Chat Completions


async def test_chat_text_reply_not_streamed(serve: Serve) -> None:
    server = serve([{"reply": [{"text": LONG_TEXT}]}])
    async with client_for(server) as client:
        raw = await client.chat.completions.with_raw_response.create(**chat())
    completion = raw.parse()
    assert raw.headers["x-request-id"].startswith("req_")
    assert completion.id.startswith("chatcmpl-") and completion.object == "chat.completion"
    assert completion.model == MODEL
    (choice,) = completion.choices
    assert choice.message.role == "assistant" and choice.message.content == LONG_TEXT
    assert choice.message.tool_calls is None and choice.finish_reason == "stop"
    assert completion.usage is not None and completion.usage.completion_tokens > 1
    assert server.requests[0].path == "/v1/chat/completions"
    assert (server.requests[0].status, server.requests[0].step_index) == (200, 0)


async def test_chat_text_streams_in_pieces_with_usage_last(serve: Serve) -> None:
    server = serve([{"reply": [{"text": LONG_TEXT}]}, {"reply": [{"text": "short"}]}])
    async with client_for(server) as client:
        async with client.chat.completions.stream(
            **chat(), stream_options={"include_usage": True}
        ) as stream:
            deltas = [e.delta async for e in stream if e.type == "content.delta" and e.delta]
            final = await stream.get_final_completion()
        chunks = [c async for c in await client.chat.completions.create(**chat(), stream=True)]

    assert len(deltas) > 1 and "".join(deltas) == LONG_TEXT
    assert final.choices[0].message.content == LONG_TEXT
    assert final.choices[0].finish_reason == "stop"
    assert final.usage is not None and final.usage.total_tokens > 0
    # Without include_usage no chunk carries usage; the finish chunk is the last.
    assert all(chunk.usage is None for chunk in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "short"


async def test_chat_wire_ends_with_done_and_a_usage_chunk(serve: Serve) -> None:
    server = serve([{"reply": [{"text": "Hi."}]}])
    body = {**chat(), "stream": True, "stream_options": {"include_usage": True}}
    async with httpx.AsyncClient(base_url=server.openai_base_url) as http:
        response = await http.post("/chat/completions", json=body)
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = [f for f in response.text.split("\n\n") if f]
    assert all(frame.startswith("data: ") for frame in frames)
    assert frames[-1] == "data: [DONE]"
    *chunks, usage = [json.loads(f.removeprefix("data: ")) for f in frames[:-1]]
    assert [c["choices"][0]["delta"] for c in chunks] == [
        {"role": "assistant", "content": "", "refusal": None},
        {"content": "Hi."},
        {},
    ]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, "stop"]
    assert all(c["usage"] is None and c["object"] == "chat.completion.chunk" for c in chunks)
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] > 0


async def test_chat_parallel_tool_calls_stream_their_arguments(serve: Serve) -> None:
    server = serve([TOOL_STEP])
    tools = [
        {"type": "function", "function": {"name": name, "strict": True, "parameters": params}}
        for name, params in (("ls", strict_tool("ls")), ("read", strict_tool("read")))
    ]
    async with (
        client_for(server) as client,
        client.chat.completions.stream(**chat(tools=tools)) as stream,
    ):
        argument_deltas = [
            (event.index, event.arguments_delta)
            async for event in stream
            if event.type == "tool_calls.function.arguments.delta"
        ]
        final = await stream.get_final_completion()

    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    calls = choice.message.tool_calls or []
    assert calls[0].id == "call_fixed"
    assert calls[1].id.startswith("call_") and len(calls[1].id) == len("call_") + 24
    functions = [call.function for call in calls if call.type == "function"]
    assert [(f.name, f.parsed_arguments) for f in functions] == [
        ("ls", {"path": "."}),
        ("read", {"path": "src/app/main.py", "lines": [1, 40]}),
    ]
    assert json.loads(functions[1].arguments) == {"path": "src/app/main.py", "lines": [1, 40]}
    # The second call's arguments came in several pieces, after the first call's.
    assert [index for index, _ in argument_deltas].count(1) > 1
    assert [index for index, _ in argument_deltas] == sorted(i for i, _ in argument_deltas)


async def test_chat_reasoning_content_and_usage_details(serve: Serve) -> None:
    usage = {
        "input_tokens": 100,
        "output_tokens": 40,
        "cache_read_input_tokens": 900,
        "cache_creation_input_tokens": 50,
        "reasoning_tokens": 12,
    }
    step = {"reply": [{"thinking": "The user says hi; greet back."}, {"text": "Hello!"}]}
    server = serve([{**step, "usage": usage}, step])
    async with client_for(server) as client:
        completion = await client.chat.completions.create(**chat())
        chunks = [
            chunk
            async for chunk in await client.chat.completions.create(
                **chat(), stream=True, stream_options={"include_usage": True}
            )
        ]
    message = completion.choices[0].message
    assert message.content == "Hello!"
    assert (message.model_extra or {})["reasoning_content"] == "The user says hi; greet back."
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (1050, 40)
    assert completion.usage.total_tokens == 1090
    assert completion.usage.prompt_tokens_details is not None
    assert completion.usage.prompt_tokens_details.cached_tokens == 900
    assert completion.usage.prompt_tokens_details.cache_write_tokens == 50
    assert completion.usage.completion_tokens_details is not None
    assert completion.usage.completion_tokens_details.reasoning_tokens == 12
    streamed = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content", "")
        for c in chunks
        if c.choices
    )
    assert streamed == "The user says hi; greet back."
    last = chunks[-1].usage
    assert last is not None and last.completion_tokens_details is not None
    assert last.completion_tokens_details.reasoning_tokens > 0  # estimated from the thinking


# ---------------------------------------------------------------------------------------------
# Responses


async def test_responses_text_reply_not_streamed(serve: Serve) -> None:
    server = serve([{"reply": [{"text": LONG_TEXT}]}])
    async with client_for(server) as client:
        response = await client.responses.create(**respond())
    assert response.id.startswith("resp_") and response.status == "completed"
    assert response.output_text == LONG_TEXT
    (message,) = response.output
    assert message.type == "message" and message.role == "assistant"
    assert response.usage is not None and response.usage.output_tokens > 1
    assert response._request_id is not None and response._request_id.startswith("req_")


async def test_responses_stream_reasoning_text_and_parallel_calls(serve: Serve) -> None:
    thinking = "The user wants the files listed and main.py read; both at once."
    server = serve([{"reply": [{"thinking": thinking}, {"text": LONG_TEXT}, *TOOL_STEP["reply"]]}])
    tools = [
        {"type": "function", "name": name, "strict": True, "parameters": strict_tool(name)}
        for name in ("ls", "read")
    ]
    async with (
        client_for(server) as client,
        client.responses.stream(
            **respond(tools=tools, include=["reasoning.encrypted_content"])
        ) as stream,
    ):
        events = [event async for event in stream]
        final = await stream.get_final_response()

    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    summary = [e.delta for e in events if e.type == "response.reasoning_summary_text.delta"]
    assert len(summary) > 1 and "".join(summary) == thinking
    text = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(text) > 1 and "".join(text) == LONG_TEXT
    arguments = [e for e in events if e.type == "response.function_call_arguments.delta"]
    assert len([e for e in arguments if e.output_index == 3]) > 1

    reasoning, message, ls, read = final.output
    assert reasoning.type == "reasoning" and [s.text for s in reasoning.summary] == [thinking]
    assert reasoning.encrypted_content  # asked for with `include`
    assert message.type == "message" and final.output_text == LONG_TEXT
    assert ls.type == "function_call" and read.type == "function_call"
    assert (ls.call_id, ls.name, ls.parsed_arguments) == ("call_fixed", "ls", {"path": "."})
    assert read.call_id.startswith("call_") and read.name == "read"
    assert read.parsed_arguments == {"path": "src/app/main.py", "lines": [1, 40]}
    assert final.usage is not None and final.usage.output_tokens_details.reasoning_tokens > 0


async def test_responses_usage_details_and_incomplete_status(serve: Serve) -> None:
    usage = {
        "input_tokens": 100,
        "output_tokens": 40,
        "cache_read_input_tokens": 900,
        "cache_creation_input_tokens": 50,
        "reasoning_tokens": 12,
    }
    server = serve(
        [
            {"reply": [{"thinking": "hm"}, {"text": "Done."}], "usage": usage},
            {"reply": [{"text": "cut short"}], "stop_reason": "max_tokens"},
            {"reply": [{"text": "cut short"}], "stop_reason": "max_tokens"},
        ]
    )
    async with client_for(server) as client:
        done = await client.responses.create(**respond())
        incomplete = await client.responses.create(**respond())
        streamed = [e.type async for e in await client.responses.create(**respond(), stream=True)]
    assert done.usage is not None
    assert (done.usage.input_tokens, done.usage.output_tokens, done.usage.total_tokens) == (
        1050,
        40,
        1090,
    )
    assert done.usage.input_tokens_details.cached_tokens == 900
    assert done.usage.input_tokens_details.cache_write_tokens == 50
    assert done.usage.output_tokens_details.reasoning_tokens == 12
    assert done.output[0].type == "reasoning" and done.output[0].encrypted_content is None
    assert incomplete.status == "incomplete"
    assert incomplete.incomplete_details is not None
    assert incomplete.incomplete_details.reason == "max_output_tokens"
    assert streamed[-1] == "response.incomplete"


async def test_responses_input_tokens_count_consumes_no_step(serve: Serve) -> None:
    server = serve([{"reply": [{"text": "ok"}]}])
    async with client_for(server) as client:
        counted = await client.responses.input_tokens.count(**respond("a" * 400))
        response = await client.responses.create(**respond())
    assert counted.object == "response.input_tokens" and counted.input_tokens >= 100
    assert response.output_text == "ok"


# ---------------------------------------------------------------------------------------------
# Conversations, match, timing


async def test_user_keys_the_conversation_on_both_wires(serve: Serve) -> None:
    server = serve([{"reply": [{"text": "one"}]}, {"reply": [{"text": "two"}]}])
    async with client_for(server) as client:
        texts = [
            (await client.chat.completions.create(**chat(user="alice"))).choices[0].message.content,
            (await client.responses.create(**respond(user="bob"))).output_text,
            (await client.responses.create(**respond(user="alice"))).output_text,
            (await client.chat.completions.create(**chat(prompt_cache_key="carol")))
            .choices[0]
            .message.content,
            (await client.chat.completions.create(**chat(store=True, metadata={"user_id": "bob"})))
            .choices[0]
            .message.content,
        ]
    assert texts == ["one", "one", "two", "one", "two"]
    assert [r.path for r in server.requests_for("alice")] == [
        "/v1/chat/completions",
        "/v1/responses",
    ]


async def test_match_reads_the_last_user_text_of_each_wire(serve: Serve) -> None:
    server = serve(
        [
            {"reply": [{"text": "in order"}]},
            {"reply": [{"text": "summary"}], "match": "^Summarise", "repeat": True},
        ]
    )
    async with client_for(server) as client:
        parts = [{"role": "user", "content": [{"type": "input_text", "text": "Summarise it"}]}]
        by_input_parts = await client.responses.create(**respond(input=parts))
        by_chat = await client.chat.completions.create(**chat("Summarise this"))
        by_input_text = await client.responses.create(**respond("Summarise that"))
        other = await client.responses.create(**respond("go on"))
    assert by_input_parts.output_text == "summary" == by_input_text.output_text
    assert by_chat.choices[0].message.content == "summary"
    assert other.output_text == "in order"


async def test_chunk_delay_paces_deltas_and_wait_for_holds(serve: Serve) -> None:
    server = serve(
        [
            {"reply": [{"text": LONG_TEXT}], "chunk_delay_ms": 30},
            {"reply": [{"text": "released"}], "wait_for": "go"},
        ]
    )
    async with client_for(server) as client:
        stream = await client.responses.create(**respond(), stream=True)
        arrived = [e async for e in stream if e.type == "response.output_text.delta"]
        held = asyncio.create_task(client.chat.completions.create(**chat()))
        await eventually(lambda: len(server.requests) == 2)  # arrived, and held
        assert not held.done() and server.requests[1].status is None
        server.release("go")
        completion = await asyncio.wait_for(held, 5)
    sent = server.requests[0].deltas_sent_at
    assert len(sent) == len(arrived) > 1
    assert min(b - a for a, b in itertools.pairwise(sent)) >= 0.025
    assert completion.choices[0].message.content == "released"


# ---------------------------------------------------------------------------------------------
# Errors and faults


async def test_scripted_errors_in_openai_shape(serve: Serve) -> None:
    server = serve(
        [
            {"error": {"status": 429, "retry_after": 2}},
            {"error": {"status": 400, "code": "context_length_exceeded", "message": "too long"}},
            {"error": {"status": 529}},
            {"error": {"status": 401}},
            {"reply": [{"text": "recovered"}]},
        ]
    )
    async with client_for(server) as client:
        with pytest.raises(openai.RateLimitError) as limited:
            await client.chat.completions.create(**chat())
        with pytest.raises(openai.BadRequestError) as too_long:
            await client.responses.create(**respond(), stream=True)
        with pytest.raises(openai.InternalServerError) as overloaded:
            await client.chat.completions.create(**chat(), stream=True)
        with pytest.raises(openai.AuthenticationError):
            await client.responses.create(**respond())
        again = await client.responses.create(**respond())
    assert limited.value.response.headers["retry-after"] == "2"
    assert (limited.value.type, limited.value.code) == ("requests", "rate_limit_exceeded")
    assert limited.value.request_id is not None and limited.value.request_id.startswith("req_")
    assert too_long.value.code == "context_length_exceeded"
    assert too_long.value.body == {
        "message": "too long",
        "type": "invalid_request_error",
        "param": None,
        "code": "context_length_exceeded",
    }
    assert overloaded.value.status_code == 503 and overloaded.value.type == "server_error"
    assert again.output_text == "recovered"  # each error consumed its step


@pytest.mark.parametrize("wire", ["chat", "responses"])
@pytest.mark.parametrize(("fault", "status"), [("overloaded", 503), ("server_error", 500)])
async def test_chaos_errors_are_openai_errors_and_consume_no_step(
    serve: Serve, wire: str, fault: str, status: int
) -> None:
    server = serve([{"reply": [{"text": "ok"}]}], chaos={fault: 1.0})
    async with client_for(server) as client:
        with pytest.raises(openai.InternalServerError) as raised:
            if wire == "chat":
                await client.chat.completions.create(**chat())
            else:
                await client.responses.create(**respond(), stream=True)
    assert raised.value.status_code == status and raised.value.type == "server_error"
    assert server.remaining("default") == 1


@pytest.mark.parametrize("wire", ["chat", "responses"])
async def test_dropped_and_cut_streams_raise_connection_errors(serve: Serve, wire: str) -> None:
    dropping = serve([{"reply": [{"text": "ok"}]}], chaos={"dropped": 1.0})
    cutting = serve([{"reply": [{"text": LONG_TEXT}], "cut_after_chunks": 1}])
    for server in (dropping, cutting):
        received: list[str] = []
        async with client_for(server) as client:
            with pytest.raises(openai.APIConnectionError):
                if wire == "chat":
                    async for chunk in await client.chat.completions.create(**chat(), stream=True):
                        received.append(chunk.choices[0].delta.content or "")
                else:
                    async for event in await client.responses.create(**respond(), stream=True):
                        if event.type == "response.output_text.delta":
                            received.append(event.delta)
        assert len("".join(received)) == 20  # one piece, then the drop
    assert dropping.remaining("default") == 1  # a chaos drop consumed no step


async def test_slow_first_byte_and_stopped_server(serve: Serve) -> None:
    slow = serve([{"reply": [{"text": "late"}]}], chaos={"slow_first_byte": 1.0})
    delayed = serve([{"reply": [{"text": "late"}], "delay_ms": 5000}])
    async with client_for(slow, timeout=0.5) as client:
        with pytest.raises(openai.APITimeoutError):
            await client.chat.completions.create(**chat())
    async with client_for(delayed, timeout=0.5) as client:
        with pytest.raises(openai.APITimeoutError):
            await client.responses.create(**respond(), stream=True)
    hanging = serve([{"hang": True}])
    async with client_for(hanging) as client:
        held = asyncio.create_task(client.responses.create(**respond()))
        await eventually(lambda: len(hanging.requests) == 1)
        await asyncio.to_thread(hanging.stop)
        with pytest.raises(openai.InternalServerError) as stopped:
            await asyncio.wait_for(held, 5)
    assert stopped.value.body == {
        "message": "The offline model server stopped.",
        "type": "server_error",
        "param": None,
        "code": None,
    }


async def test_exhausted_script_replies_or_errors(serve: Serve) -> None:
    replying = serve([])
    failing = serve([], when_exhausted="error")
    async with client_for(replying) as client:
        response = await client.responses.create(**respond())
        completion = await client.chat.completions.create(**chat())
    assert response.output_text == "(offline script finished)"
    assert completion.choices[0].message.content == "(offline script finished)"
    async with client_for(failing) as client:
        with pytest.raises(openai.InternalServerError, match="session-9"):
            await client.chat.completions.create(**chat(user="session-9"))


# ---------------------------------------------------------------------------------------------
# Validation


ASSISTANT_CALLS: dict[str, Any] = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
        {"id": "call_b", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
    ],
}


async def test_chat_unanswered_tool_call_is_a_400_that_consumes_no_step(serve: Serve) -> None:
    server = serve([{"reply": [{"text": "first step"}]}])
    broken = [
        {"role": "user", "content": "list twice"},
        ASSISTANT_CALLS,
        {"role": "tool", "tool_call_id": "call_a", "content": "a.py"},
        {"role": "user", "content": "never mind"},
    ]
    async with client_for(server) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(**chat(messages=broken))
        completion = await client.chat.completions.create(**chat())
    assert caught.value.body == {
        "message": "An assistant message with 'tool_calls' must be followed by tool messages "
        "responding to each 'tool_call_id'. The following tool_call_ids did not have response "
        "messages: call_b",
        "type": "invalid_request_error",
        "param": "messages.[3].role",
        "code": None,
    }
    assert completion.choices[0].message.content == "first step"
    assert [(r.status, r.step_index) for r in server.requests] == [(400, None), (200, 0)]


async def test_responses_unanswered_function_call_is_a_400(serve: Serve) -> None:
    server = serve([{"reply": [{"text": "first step"}]}])
    call = {"type": "function_call", "call_id": "call_a", "name": "ls", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "call_a", "output": ""}
    async with client_for(server) as client:
        with pytest.raises(openai.BadRequestError) as unanswered:
            await client.responses.create(**respond(input=[call]))
        with pytest.raises(openai.BadRequestError) as orphan:
            await client.responses.create(**respond(input=[output]))
        paired = await client.responses.create(**respond(input=[call, output]))
    assert unanswered.value.body == {
        "message": "No tool output found for function call call_a.",
        "type": "invalid_request_error",
        "param": "input",
        "code": None,
    }
    assert isinstance(orphan.value.body, dict)
    assert orphan.value.body["message"] == (
        "No tool call found for function call output with call_id call_a."
    )
    assert paired.output_text == "first step"


def test_validation_wording() -> None:
    def chat_problem(**body: Any) -> str | None:
        problem = validate_chat(
            {"model": MODEL, "messages": [{"role": "user", "content": "x"}]} | body
        )
        return None if problem is None else problem.message

    def responses_problem(**body: Any) -> str | None:
        problem = validate_responses({"model": MODEL, "input": "x"} | body)
        return None if problem is None else problem.message

    assert chat_problem() is None and responses_problem() is None
    assert chat_problem(messages=[{"role": "tool", "tool_call_id": "c", "content": "x"}]) == (
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
        "message with 'tool_calls'."
    )
    stray = [
        {"role": "user", "content": "x"},
        ASSISTANT_CALLS,
        {"role": "tool", "tool_call_id": "call_z", "content": "?"},
    ]
    assert chat_problem(messages=stray) == (
        "Invalid parameter: 'tool_call_id' of 'call_z' not found in 'tool_calls' of previous "
        "message."
    )
    assert chat_problem(stream_options={"include_usage": True}) == (
        "The 'stream_options' parameter is only allowed when 'stream' is enabled."
    )
    assert chat_problem(metadata={"user_id": "k"}) == (
        "The 'metadata' parameter is only allowed when 'store' is enabled."
    )
    assert chat_problem(messages=[]) == (
        "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an "
        "empty array instead."
    )
    dotted = [{"type": "function", "function": {"name": "srv.tool"}}]
    assert chat_problem(tools=dotted) == (
        "Invalid 'tools[0].function.name': string does not match pattern. Expected a string "
        "that matches the pattern '^[a-zA-Z0-9_-]+$'."
    )
    chat_style = [{"type": "function", "function": {"name": "ls"}}]
    assert responses_problem(tools=chat_style) == "Missing required parameter: 'tools[0].name'."
    assert responses_problem(max_output_tokens=8) == (
        "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but "
        "got 8 instead."
    )
    no_output = [{"type": "function_call_output", "call_id": "call_a"}]
    assert responses_problem(input=no_output) == "Missing required parameter: 'input[0].output'."
    later = [{"type": "function_call_output", "call_id": "call_old", "output": "x"}]
    assert responses_problem(input=later, previous_response_id="resp_1") is None
    assert validate_responses({"input": "x"}) is not None


# ---------------------------------------------------------------------------------------------
# One script, three wires


SAME_SCRIPT: list[dict[str, Any]] = [
    {
        "reply": [
            {"thinking": "Two files to look at; read both at once."},
            {"text": LONG_TEXT},
            {"tool_use": {"id": "call_ls", "name": "ls", "input": {"path": "."}}},
            {"tool_use": {"id": "call_read", "name": "read", "input": {"path": "a.py"}}},
        ],
        "usage": {"input_tokens": 10, "output_tokens": 20, "cache_read_input_tokens": 5},
    }
]

Played = tuple[str, str, list[tuple[str, str, dict[str, Any]]], int]
"""(reasoning, text, [(call id, name, input)], output tokens)."""


async def play_anthropic(server: OfflineModelServer) -> Played:
    async with (
        anthropic.AsyncAnthropic(base_url=server.base_url, api_key="x", max_retries=0) as client,
        client.messages.stream(
            model=MODEL,
            max_tokens=256,
            messages=[{"role": "user", "content": "go"}],
            metadata={"user_id": "on-anthropic"},
        ) as stream,
    ):
        message = await stream.get_final_message()
    blocks = message.content
    return (
        "".join(b.thinking for b in blocks if b.type == "thinking"),
        "".join(b.text for b in blocks if b.type == "text"),
        [(b.id, b.name, dict(b.input)) for b in blocks if b.type == "tool_use"],
        message.usage.output_tokens,
    )


async def play_chat(server: OfflineModelServer) -> Played:
    async with (
        client_for(server) as client,
        client.chat.completions.stream(
            **chat("go", user="on-chat"), stream_options={"include_usage": True}
        ) as stream,
    ):
        final = await stream.get_final_completion()
    message = final.choices[0].message
    calls = [c for c in message.tool_calls or [] if c.type == "function"]
    assert final.usage is not None and final.usage.prompt_tokens_details is not None
    assert final.usage.prompt_tokens_details.cached_tokens == 5
    return (
        (message.model_extra or {}).get("reasoning_content", ""),
        message.content or "",
        [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls],
        final.usage.completion_tokens,
    )


async def play_responses(server: OfflineModelServer) -> Played:
    async with (
        client_for(server) as client,
        client.responses.stream(**respond("go", user="on-responses")) as stream,
    ):
        final = await stream.get_final_response()
    items = final.output
    assert final.usage is not None and final.usage.input_tokens_details.cached_tokens == 5
    return (
        "".join(s.text for i in items if i.type == "reasoning" for s in i.summary),
        final.output_text,
        [(i.call_id, i.name, json.loads(i.arguments)) for i in items if i.type == "function_call"],
        final.usage.output_tokens,
    )


async def test_one_script_plays_the_same_on_all_three_wires(serve: Serve) -> None:
    server = serve(SAME_SCRIPT)  # each wire plays its own key's copy of the template
    played = [
        await play_anthropic(server),
        await play_chat(server),
        await play_responses(server),
    ]
    expected: Played = (
        "Two files to look at; read both at once.",
        LONG_TEXT,
        [("call_ls", "ls", {"path": "."}), ("call_read", "read", {"path": "a.py"})],
        20,
    )
    assert played == [expected] * 3
    assert [r.path for r in server.requests] == [
        "/v1/messages",
        "/v1/chat/completions",
        "/v1/responses",
    ]
