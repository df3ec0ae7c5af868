"""Scripts that pick their step by the conversation's turn (`pick: turn`): several players,
as several processes each with its own copy of the script, play one conversation in
script order; a scripted error fails its turn once and the retry gets the reply; a `match`
step still answers what it matches; scripts that do not opt in keep playing in order."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from duragent.activities.models.clients import ClientOptions, make_client
from duragent.activities.models.seam import ModelClient, ModelFailed, ModelRequest
from duragent.domain.config import TurnSnapshot
from duragent.domain.messages import (
    AssistantMessage,
    TextContent,
    ToolResultMessage,
    UserMessage,
    text_of,
)
from duragent.domain.models import PROVIDERS, Endpoint, parse_model
from duragent.domain.transcript import LlmMessage
from duragent.offline_model import DEMO_SCRIPT, WIRE_MODELS, OfflineModelServer, load_script
from duragent.offline_model.in_process import ScriptedModel
from duragent.offline_model.player import ScriptPlayer, assistant_turns
from duragent.offline_model.script import Script

WIRES = [*WIRE_MODELS, "in-process"]


def demo_without_pauses() -> Script:
    """The bundled demo, its pauses (there for a person watching) taken out."""
    data = load_script(DEMO_SCRIPT).model_dump(exclude_none=True)
    for step in data["conversations"]["*"]:
        step.update(delay_ms=0, chunk_delay_ms=0)
    return Script.model_validate(data)


def request(model: str, messages: list[LlmMessage]) -> ModelRequest:
    snapshot = TurnSnapshot.model_validate(
        {
            "model": model,
            "thinking_level": "off",
            "system_prompt": "Be brief.",
            "active_tools": None,
            "max_tokens": 1024,
        }
    )
    return ModelRequest(
        snapshot=snapshot,
        messages=list(messages),
        tools=[],
        session_id="s1",
        timestamp=1_700_000_000_000,
    )


def user(text: str) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=1)


MakeClients = Callable[[str, Script, int], Any]


@pytest.fixture
async def clients() -> AsyncIterator[MakeClients]:
    """`count` clients of `wire`, each asking a player of its own playing `script`: over
    HTTP, each its own offline model server; in-process, each its own `ScriptedModel`."""
    servers: list[OfflineModelServer] = []
    made: list[ModelClient] = []

    async def make(wire: str, script: Script, count: int) -> list[ModelClient]:
        for _ in range(count):
            if wire == "in-process":
                made.append(ScriptedModel(script))
                continue
            server = await OfflineModelServer(script).__aenter__()
            servers.append(server)
            provider = PROVIDERS[parse_model(WIRE_MODELS[wire]).provider]
            base_url = server.base_url if wire == "anthropic" else server.openai_base_url
            where = Endpoint(base_url, "offline", offline=True)
            made.append(make_client(provider, where, ClientOptions()))
        return made[-count:]

    yield make
    for client in made:
        await client.aclose()
    for server in servers:
        await server.__aexit__(None, None, None)


@pytest.mark.parametrize("wire", WIRES)
async def test_two_processes_taking_turns_play_the_demo_in_order(
    clients: MakeClients, wire: str
) -> None:
    """Two workers, each with its own offline model on the demo script, serving every
    other turn of one session: the session gets the demo's four replies in order (each
    used to play its own first steps: the listing twice, then the write twice)."""
    model = WIRE_MODELS.get(wire, WIRE_MODELS["anthropic"])
    first, second = await clients(wire, demo_without_pauses(), 2)
    messages: list[LlmMessage] = [user("Write a hello script and run it.")]
    replies: list[AssistantMessage] = []
    for turn in range(5):
        client = (first, second)[turn % 2]
        reply = await client.ask(request(model, messages)).reply(lambda delta: None)
        replies.append(reply)
        messages.append(reply)
        for call in reply.tool_calls:
            content = [TextContent(text="ok")]
            messages.append(
                ToolResultMessage(
                    tool_call_id=call.id, tool_name=call.name, content=content, timestamp=2
                )
            )
        if not reply.tool_calls:
            messages.append(user("Thanks."))
    assert [[c.name for c in r.tool_calls] for r in replies] == [
        ["ls"],
        ["write", "bash"],
        ["bash"],
        [],
        [],
    ]
    assert text_of(replies[3].content).startswith("I wrote hello.py and ran it")
    assert text_of(replies[4].content) == "(offline script finished)"  # past its last turn


async def test_a_scripted_error_fails_its_turn_once_then_the_retry_gets_the_reply() -> None:
    steps: list[dict[str, Any]] = [
        {"error": {"status": 529}},
        {"reply": [{"text": "one"}]},
        {"error": {"status": 500}},
        {"error": {"status": 429}},
        {"reply": [{"text": "two"}]},
    ]
    model = ScriptedModel(Script.of(steps, pick="turn"))
    first: list[LlmMessage] = [user("go")]

    async def answer(messages: list[LlmMessage]) -> str | int | None:
        try:
            reply = await model.ask(request("claude-sonnet-4-5", messages)).reply(
                lambda delta: None
            )
        except ModelFailed as failed:
            return failed.failure.status
        return text_of(reply.content)

    # The same conversation sent again (a retry): the error once, then the reply, and the
    # reply again for any later retry of the turn (a reply lost with its worker).
    assert [await answer(first) for _ in range(3)] == [529, "one", "one"]
    said = AssistantMessage(content=[TextContent(text="one")], timestamp=2)
    second: list[LlmMessage] = [*first, said, user("more")]
    assert [await answer(second) for _ in range(4)] == [500, 429, "two", "two"]
    assert await answer([*second, said, user("again")]) == "(offline script finished)"
    assert [r.step_index for r in model.requests] == [0, 1, 1, 2, 3, 4, 4, None]


def test_a_match_step_answers_what_it_matches_and_takes_no_turn() -> None:
    steps: list[dict[str, Any]] = [
        {"reply": [{"text": "one"}]},
        {"match": "^Summarise", "reply": [{"text": "the summary"}], "repeat": True},
        {"reply": [{"text": "two"}]},
    ]
    player = ScriptPlayer(Script.of(steps, pick="turn"))

    def take(*messages: dict[str, Any]) -> int | None:
        taken = player.take("s1", {"messages": list(messages)})
        return None if taken is None else taken[0]

    summary = {"role": "user", "content": "Summarise the conversation."}
    hello, said = {"role": "user", "content": "hi"}, {"role": "assistant", "content": "one"}
    # A summary request between a turn and its retry: the retry still gets its turn's reply.
    got = [take(hello), take(summary), take(hello), take(hello, said, hello), take(summary)]
    assert got == [0, 1, 0, 2, 1]


def test_scripts_that_do_not_opt_in_play_in_order() -> None:
    steps: list[dict[str, Any]] = [{"reply": [{"text": "one"}]}, {"reply": [{"text": "two"}]}]
    player = ScriptPlayer(Script.of(steps))
    body = {"messages": [{"role": "user", "content": "hi"}]}
    assert [player.take("s1", body), player.take("s1", body), player.take("s1", body)] == [
        (0, player.script.conversations["*"][0]),
        (1, player.script.conversations["*"][1]),
        None,
    ]
    assert Script.of(steps).pick == "order" and load_script(DEMO_SCRIPT).pick == "turn"


def test_assistant_turns_on_every_wire() -> None:
    call = {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "x"}
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    said = {"type": "message", "role": "assistant", "content": [{"type": "output_text"}]}
    asked = {"type": "message", "role": "user", "content": "hi"}
    # One reply is several items on the Responses API: reasoning, text, calls.
    assert assistant_turns({"input": [asked, reasoning, said, call, output, said, asked]}) == 2
    assert assistant_turns({"input": "hi"}) == 0
    chat = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "more"},
    ]
    assert assistant_turns({"messages": chat}) == 2
    assert assistant_turns({"messages": [{"role": "user", "content": "hi"}]}) == 0
