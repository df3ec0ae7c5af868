"""A session changes model across providers between turns: Claude with thinking and a tool
call, then OpenAI's Chat Completions, then Claude again. Each request is what its API takes
(the offline model checks call/result pairing on every wire), foreign thinking goes as
text, and `show` prices every turn."""

from __future__ import annotations

import pytest
import wire
from support import Stack

from duragent.domain.entries import MessageEntry
from duragent.domain.messages import AssistantMessage

REPLIES = [
    {
        "reply": [
            {"thinking": "The user wants the notes listed first."},
            {"text": "Looking."},
            {"tool_use": {"id": "toolu_01ABCdef", "name": "ls", "input": {"path": "."}}},
        ]
    },
    {"reply": [{"text": "Nothing there yet."}]},
    {"reply": [{"text": "Still nothing, from OpenAI."}]},
    {"reply": [{"text": "And back on Claude."}]},
]


@pytest.mark.script({"conversations": {"*": REPLIES}})
async def test_a_session_moves_between_providers_and_keeps_its_transcript(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():  # a config change is stored by the workers
        await stack.client.config.update(session.id, thinking_level="low")
        first = await (await stack.client.runs.prompt(session.id, "list the notes")).result()
        assert first.status == "completed", first.error
        await stack.client.config.update(session.id, model="openai:gpt-4.1")
        second = await (await stack.client.runs.prompt(session.id, "and now?")).result()
        assert second.status == "completed", second.error
        assert second.final_text == "Still nothing, from OpenAI."
        await stack.client.config.update(session.id, model="claude-sonnet-5-5")
        third = await (await stack.client.runs.prompt(session.id, "once more")).result()
        assert third.status == "completed", third.error

    requests = [r for r in stack.model.requests_for(session.id)]
    assert [r.status for r in requests] == [200, 200, 200, 200]  # each wire took its request
    assert [wire.wire_of(r.body) for r in requests] == [
        "anthropic",
        "anthropic",
        "openai",
        "anthropic",
    ]
    to_openai = requests[2].body
    # Claude's thinking reached GPT as plain text, its signature nowhere in the request.
    assert any("The user wants the notes listed first." in t for t in wire.texts(to_openai))
    assert "signature" not in str(to_openai)
    # The call and its result kept one id the Chat API takes, paired.
    [(call_id, name)] = wire.last_calls(to_openai)
    results = [r.call_id for m in wire.sent(to_openai) for r in m.results]
    assert name == "ls" and results == [call_id]
    # Back on Claude, its own thinking goes back as thinking, signed.
    back = requests[3].body
    first_reply = next(m for m in back["messages"] if m["role"] == "assistant")
    assert first_reply["content"][0]["type"] == "thinking"
    assert first_reply["content"][0]["signature"]

    replies = [
        e.message
        for e in await stack.client.tree.path(session.id)
        if isinstance(e, MessageEntry) and isinstance(e.message, AssistantMessage)
    ]
    assert [(m.provider, m.api) for m in replies] == [
        ("anthropic", "anthropic-messages"),
        ("anthropic", "anthropic-messages"),
        ("openai", "openai-chat"),
        ("anthropic", "anthropic-messages"),
    ]
    code, out, err = await stack.cli("show", session.id)
    assert code == 0, err
    assert "gpt-4.1 ·" in out and "no price" not in out and "cost unknown" not in out
