"""`duragent.testing`'s models at the model seam: a `FunctionModel` streams what its
function returns as a provider's client streams a reply (deltas, then the message), tells
the function the tools, model and system prompt, takes sync and async functions, fails a
turn clearly when the function raises; `scripted_model` plays Python values one per turn;
`model_clients` answers every provider with the model; the module imports no SDK."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from typing import Any

import pytest
from pydantic import BaseModel

from duragent import testing
from duragent.activities.models.seam import Delta, ModelFailed, ModelRequest, SummaryRequest
from duragent.domain.config import TurnSnapshot
from duragent.domain.messages import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from duragent.domain.models import PROVIDERS
from duragent.domain.tools import ToolSpec
from duragent.domain.transcript import LlmMessage
from duragent.domain.turns import ProviderFailure
from duragent.testing import AgentInfo

MODEL = "claude-sonnet-4-5"
LS: ToolSpec = {
    "name": "ls",
    "description": "List a directory.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}
LONG = "The workspace holds three files; I will read the first one before changing it."


def ask(
    messages: list[LlmMessage] | None = None,
    *,
    tools: list[ToolSpec] | None = None,
    model: str = MODEL,
    session: str = "s1",
) -> ModelRequest:
    snapshot = TurnSnapshot.model_validate(
        {
            "model": model,
            "thinking_level": "low",
            "system_prompt": "Be brief.",
            "active_tools": None,
            "max_tokens": 1024,
        }
    )
    return ModelRequest(
        snapshot=snapshot,
        messages=messages or [UserMessage(content=[TextContent(text="hi")], timestamp=1)],
        tools=[LS] if tools is None else tools,
        session_id=session,
        timestamp=1_700_000_000_000,
    )


async def streamed(model: Any, request: ModelRequest) -> tuple[list[Delta], AssistantMessage]:
    deltas: list[Delta] = []
    message = await model.ask(request).reply(deltas.append)
    return deltas, message


async def test_the_reply_streams_as_deltas_then_the_message() -> None:
    def model(messages: list[LlmMessage], info: AgentInfo) -> testing.Reply:
        return [
            testing.thinking("First the files.", signature="c2ln"),
            LONG,
            testing.call("ls", {"path": "src/long/enough/to/be/cut"}, id="call_1"),
        ]

    deltas, message = await streamed(testing.FunctionModel(model), ask())
    assert message.content == [
        ThinkingContent(thinking="First the files.", signature="c2ln"),
        TextContent(text=LONG),
        ToolCall(id="call_1", name="ls", arguments={"path": "src/long/enough/to/be/cut"}),
    ]
    assert (message.stop_reason, message.provider, message.api, message.model) == (
        "toolUse",
        "anthropic",
        "anthropic-messages",
        MODEL,
    )
    assert message.timestamp == 1_700_000_000_000
    assert message.usage.input_tokens > 10 and message.usage.output_tokens > 10
    # Each block's deltas, in order and in pieces, add up to it: the call's arguments as
    # JSON, told with the tool's name.
    by_block: dict[int, str] = {}
    for delta in deltas:
        by_block[delta.content_index] = by_block.get(delta.content_index, "") + delta.text
    assert by_block == {
        0: "First the files.",
        1: LONG,
        2: '{"path": "src/long/enough/to/be/cut"}',
    }
    assert [d.kind for d in deltas if d.content_index == 2] == ["toolCall"] * 2
    assert {d.tool_name for d in deltas if d.content_index == 2} == {"ls"}
    assert len([d for d in deltas if d.content_index == 1]) == 4  # 20 characters a piece


async def test_the_function_is_told_the_messages_tools_model_and_system_prompt() -> None:
    told: list[tuple[list[LlmMessage], AgentInfo]] = []

    async def model(messages: list[LlmMessage], info: AgentInfo) -> str:
        told.append((messages, info))
        return "ok"

    conversation: list[LlmMessage] = [
        UserMessage(content=[TextContent(text="list it")], timestamp=1),
        AssistantMessage(content=[ToolCall(id="c1", name="ls")], timestamp=2),
        ToolResultMessage(
            tool_call_id="c1", tool_name="ls", content=[TextContent(text="a.txt")], timestamp=3
        ),
    ]
    function_model = testing.FunctionModel(model)
    _, message = await streamed(function_model, ask(conversation, model="openai:gpt-4.1"))
    assert message.content == [TextContent(text="ok")] and message.stop_reason == "stop"
    assert (message.provider, message.api, message.model) == ("openai", "openai-chat", "gpt-4.1")
    ((messages, info),) = told
    assert messages == conversation
    assert (
        info.tools == (testing.ToolInfo("ls", "List a directory.", LS["input_schema"]),)
        and info.tool("ls") is not None
    )
    assert (info.model, info.system_prompt, info.session_id) == (
        "openai:gpt-4.1",
        "Be brief.",
        "s1",
    )
    assert (info.thinking_level, info.max_tokens, info.output_tool) == ("low", 1024, None)
    assert [r.session_id for r in function_model.requests] == ["s1"]


async def test_a_sync_function_runs_off_the_event_loop_and_can_return_a_message() -> None:
    threads: list[threading.Thread] = []

    def model(messages: list[LlmMessage], info: AgentInfo) -> AssistantMessage:
        threads.append(threading.current_thread())
        usage = Usage(input_tokens=7, output_tokens=3)
        return AssistantMessage(
            content=[TextContent(text="cut short")], stop_reason="length", usage=usage, timestamp=0
        )

    _, message = await streamed(testing.FunctionModel(model), ask())
    assert threads and threads[0] is not threading.current_thread()
    assert (message.stop_reason, message.usage) == (
        "length",
        Usage(input_tokens=7, output_tokens=3),
    )
    assert message.timestamp == 1_700_000_000_000  # the request's, as every client stamps it


async def test_what_the_function_raises_fails_the_turn_naming_it() -> None:
    def planner(messages: list[LlmMessage], info: AgentInfo) -> str:
        raise ValueError("no plan for this")

    with pytest.raises(ModelFailed) as failed:
        await streamed(testing.FunctionModel(planner), ask())
    failure = failed.value.failure
    assert failure.retryable is False and failure.kind == "other"
    assert failure.message == (
        "FunctionModel: the function test_what_the_function_raises_fails_the_turn_naming_it."
        "<locals>.planner raised ValueError: no plan for this"
    )
    assert isinstance(failed.value.__cause__, ValueError)

    with pytest.raises(ModelFailed, match=r"returned int: a reply is an AssistantMessage"):
        await streamed(testing.FunctionModel(lambda messages, info: 42), ask())  # type: ignore[arg-type, return-value]

    overloaded = ProviderFailure(kind="overloaded", status=529, message="busy", retryable=True)

    async def busy(messages: list[LlmMessage], info: AgentInfo) -> str:
        raise ModelFailed(overloaded)

    with pytest.raises(ModelFailed) as passed:  # a provider's failure, as it is
        await streamed(testing.FunctionModel(busy), ask())
    assert passed.value.failure == overloaded


async def test_a_cancelled_reply_keeps_what_was_streamed_without_its_calls() -> None:
    first_delta = asyncio.Event()
    model = testing.FunctionModel(lambda messages, info: [LONG, testing.call("ls")])
    stream = model.ask(ask())
    task = asyncio.create_task(stream.reply(lambda delta: first_delta.set()))
    await first_delta.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    aborted = stream.so_far()
    assert aborted.stop_reason == "aborted" and aborted.tool_calls == []
    (block,) = aborted.content
    assert isinstance(block, TextContent) and LONG.startswith(block.text) and block.text


class Refund(BaseModel):
    order_id: str
    amount: float


OUTPUT_TOOLS: dict[str, ToolSpec] = {
    "model": {
        "name": "final_result_support",
        "description": "Give your final answer.",
        "input_schema": {"type": "object", "properties": {"order_id": {}, "amount": {}}},
    },
    "wrapped": {
        "name": "final_result_counter",
        "description": "Give your final answer.",
        "input_schema": {"type": "object", "properties": {"output": {"type": "integer"}}},
    },
}


async def test_output_calls_the_agent_s_output_tool_or_is_the_text() -> None:
    refund = Refund(order_id="A-1", amount=12.5)
    model = testing.FunctionModel(lambda messages, info: testing.output(refund))
    _, message = await streamed(model, ask(tools=[LS, OUTPUT_TOOLS["model"]]))
    ((called),) = message.tool_calls
    assert (called.name, called.arguments) == ("final_result_support", refund.model_dump())
    counted = testing.FunctionModel(lambda messages, info: testing.output(3))
    _, message = await streamed(counted, ask(tools=[OUTPUT_TOOLS["wrapped"]]))
    assert message.tool_calls[0].arguments == {"output": 3}
    # A dict is read by the tool's schema: the model's fields, or a wrapped value.
    for tool, arguments in (("model", {"order_id": "A-2"}), ("wrapped", {"output": {"a": 1}})):

        def answer(messages: list[LlmMessage], info: AgentInfo, value: Any = arguments) -> Any:
            return testing.output(value)

        given = testing.FunctionModel(answer)
        _, message = await streamed(given, ask(tools=[OUTPUT_TOOLS[tool]]))
        assert message.tool_calls[0].arguments == arguments
    dicted = testing.FunctionModel(lambda messages, info: testing.output({"a": 1}))
    _, message = await streamed(dicted, ask(tools=[OUTPUT_TOOLS["wrapped"]]))
    assert message.tool_calls[0].arguments == {"output": {"a": 1}}
    # An agent whose output is text has no output tool: its output is the answer.
    texted = testing.FunctionModel(lambda messages, info: testing.output("done"))
    _, message = await streamed(texted, ask())
    assert message.content == [TextContent(text="done")]
    with pytest.raises(ModelFailed, match=r"offers no output tool final_result_\*"):
        await streamed(testing.FunctionModel(lambda messages, info: testing.output(refund)), ask())


async def test_summaries_answer_with_a_text_a_function_or_the_model_s_function() -> None:
    request = SummaryRequest(
        model=MODEL, prompt="Summarise: it went well.", max_tokens=200, session_id="s1"
    )
    fixed = await testing.FunctionModel(lambda m, i: "x", summary="The summary.").complete(request)
    assert fixed[0] == "The summary." and fixed[1].output_tokens > 0

    async def summarise(prompt: str) -> str:
        return prompt.upper()

    by_function = testing.FunctionModel(lambda m, i: "x", summary=summarise)
    assert (await by_function.complete(request))[0] == "SUMMARISE: IT WENT WELL."

    def model(messages: list[LlmMessage], info: AgentInfo) -> testing.Reply:
        assert info.tools == () and len(messages) == 1
        return ["Summary of ", "what was said."]

    assert (await testing.FunctionModel(model).complete(request))[
        0
    ] == "Summary of \nwhat was said."


async def test_a_scripted_model_plays_python_values_one_per_turn() -> None:
    refund = Refund(order_id="A-1", amount=12.5)
    model = testing.scripted_model(
        [
            [testing.text("Looking."), testing.call("ls", {"path": "."}, id="call_ls")],
            {"error": {"status": 529}},
            "Refunding.",
            testing.output(refund),
        ],
        agent="support",
    )
    user = UserMessage(content=[TextContent(text="refund A-1")], timestamp=1)
    first = (await streamed(model, ask([user])))[1]
    assert first.content == [
        TextContent(text="Looking."),
        ToolCall(id="call_ls", name="ls", arguments={"path": "."}),
    ]
    result = ToolResultMessage(
        tool_call_id="call_ls", tool_name="ls", content=[TextContent(text="a")], timestamp=2
    )
    second: list[LlmMessage] = [user, first, result]
    with pytest.raises(ModelFailed) as overloaded:
        await streamed(model, ask(second))
    assert overloaded.value.failure.status == 529
    retried = (await streamed(model, ask(second)))[1]  # the same turn again: its reply
    assert retried.content == [TextContent(text="Refunding.")]
    third: list[LlmMessage] = [
        *second,
        retried,
        UserMessage(content=[TextContent(text="go")], timestamp=3),
    ]
    (final,) = (await streamed(model, ask(third)))[1].tool_calls
    assert (final.name, final.arguments) == ("final_result_support", refund.model_dump())

    as_written = testing.scripted_model(
        [testing.output({"order_id": "A-2", "amount": 1})], agent="x"
    )
    (given,) = (await streamed(as_written, ask([user])))[1].tool_calls
    assert (given.name, given.arguments) == ("final_result_x", {"order_id": "A-2", "amount": 1})
    counted = testing.scripted_model([testing.output(3, agent="counter")])
    assert (await streamed(counted, ask([user])))[1].tool_calls[0].arguments == {"output": 3}

    with pytest.raises(ValueError, match=r"reply 0: output\(3\) needs the agent's name"):
        testing.scripted_model([testing.output(3)])
    with pytest.raises(ValueError, match=r"reply 1: int is not a reply part"):
        testing.scripted_model(["fine", [3]])  # type: ignore[list-item]


async def test_model_clients_answer_every_provider_with_the_model() -> None:
    function_model = testing.FunctionModel(lambda m, i: "ok")
    clients = testing.model_clients(function_model)
    assert all(clients.for_model(f"{name}:some-model") is function_model for name in PROVIDERS)
    scripted = testing.scripted_model(["one"])
    clients = testing.model_clients(scripted)
    assert clients.for_model(MODEL) is scripted
    chat = clients.for_model("openai:gpt-4.1")
    assert chat.api == "openai-chat" and getattr(chat, "player", None) is scripted.player
    await clients.aclose()


def test_importing_it_brings_no_sdk_and_no_server() -> None:
    code = (
        "import sys, duragent.testing as t; t.FunctionModel(lambda m, i: 'x'); "
        "print(sorted(m for m in ('anthropic', 'openai', 'starlette', 'uvicorn', "
        "'temporalio', 'sqlalchemy') if m in sys.modules))"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "[]"
    assert testing.ScriptedModel.__module__ == "duragent.offline_model.in_process"
