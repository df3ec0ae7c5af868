"""Steering, follow-ups, next_turn and live config: the run changes course, never breaks."""

from __future__ import annotations

import asyncio

import pytest
from support import (
    BOTH_PROTOCOLS,
    GATED_THEN_REPLIES,
    UNTIL_GO,
    Stack,
    assert_valid_pairing,
    bash_then_text,
    event_seen,
    eventually,
    let_go,
    transcript_roles,
    user_texts,
)

from duragent.client.errors import SessionIdle
from duragent.domain.entries import MessageEntry, ModelChangeEntry
from duragent.domain.messages import ToolResultMessage, UserMessage, text_of


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {
                    "reply": [
                        {
                            "tool_use": {
                                "name": "bash",
                                "input": {"command": f"{UNTIL_GO}; echo slow-done"},
                            }
                        },
                        {"tool_use": {"name": "write", "input": {"path": "a.txt", "content": "a"}}},
                    ]
                },
                {"reply": [{"text": "Switching to React."}]},
            ]
        }
    }
)
@BOTH_PROTOCOLS
async def test_steer_during_a_long_tool_call_reaches_the_next_model_call(
    stack: Stack, protocol: str
) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        run = await stack.client.runs.prompt(session.id, "build it")
        await eventually(
            lambda: event_seen(stack, session.id, "tool_execution_start", tool_name="bash")
        )
        steer_id = await stack.client.inputs.steer(session.id, "Wait, use React")
        await stack.client.inputs.steer(session.id, "Wait, use React", item_id=steer_id)  # a resend
        let_go(stack, session.id)  # the slow call ends once steered
        result = await run.result()
    assert result.status == "completed" and result.final_text == "Switching to React."

    # The slow call finished (not cancelled, not skipped); its sibling too.
    path = await stack.client.tree.path(session.id)
    assert transcript_roles(path) == [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "user",
        "assistant",
    ]
    bash_result = path[2]
    assert isinstance(bash_result, MessageEntry) and isinstance(
        bash_result.message, ToolResultMessage
    )
    assert "slow-done" in text_of(bash_result.message.content)
    assert path[4].id == steer_id  # delivered once, with the sender's id
    assert_valid_pairing(path)

    second = stack.model.requests_for(session.id)[1].body
    assert user_texts(second)[-1] == "Wait, use React"
    if protocol == "anthropic":  # both results and the steer in the user's last message
        last = second["messages"][-1]["content"]
        assert [b["type"] for b in last] == ["tool_result", "tool_result", "text"]
    else:  # each result a tool message, then the steer
        roles = [m["role"] for m in second["messages"][-3:]]
        assert roles == ["tool", "tool", "user"]
    assert await event_seen(stack, session.id, "queue_consumed", queue="steering", turn=2)


@pytest.mark.script(GATED_THEN_REPLIES)
@pytest.mark.parametrize("mode,expected_requests", [("all", 2), ("one-at-a-time", 3)])
async def test_follow_ups_in_both_modes(stack: Stack, mode: str, expected_requests: int) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        await stack.client.config.set_queue_modes(session.id, follow_up=mode)  # type: ignore[arg-type]
        run = await stack.client.runs.prompt(session.id, "start")
        await eventually(lambda: len(stack.model.requests_for(session.id)) == 1)
        await stack.client.inputs.follow_up(session.id, "then A")
        await stack.client.inputs.follow_up(session.id, "then B")
        status = await stack.client.sessions.status(session.id)
        assert status.run is not None and [f.text for f in status.run.follow_ups] == [
            "then A",
            "then B",
        ]
        stack.model.release("go")
        result = await run.result()
    requests = stack.model.requests_for(session.id)
    assert len(requests) == expected_requests
    assert user_texts(requests[-1].body)[-2:] == ["then A", "then B"]
    if mode == "one-at-a-time":
        assert user_texts(requests[1].body)[-1] == "then A"
    assert result.status == "completed"
    assert [m for m in transcript_roles(await stack.client.tree.path(session.id))].count(
        "user"
    ) == 3


@pytest.mark.script(
    {"conversations": {"*": [{"reply": [{"text": "ok"}]}, {"reply": [{"text": "ok"}]}]}}
)
async def test_steer_and_abort_need_a_run_and_next_turn_waits_for_the_next_one(
    stack: Stack,
) -> None:
    session = await stack.client.sessions.create()
    with pytest.raises(SessionIdle, match="steer"):
        await stack.client.inputs.steer(session.id, "hello?")
    with pytest.raises(SessionIdle, match="abort"):
        await stack.client.runs.abort(session.id)
    await stack.client.inputs.next_turn(session.id, "Context: the repo uses tabs.")
    async with stack.worker():
        await (await stack.client.runs.prompt(session.id, "first task")).result()
        await stack.client.inputs.next_turn(session.id, "Context: now spaces.")
        await (await stack.client.runs.prompt(session.id, "second task")).result()
    first, second = (r.body for r in stack.model.requests_for(session.id))
    assert user_texts(first) == ["Context: the repo uses tabs.", "first task"]
    assert user_texts(second)[-2:] == ["Context: now spaces.", "second task"]
    assert await stack.client.inputs.next_turn_items(session.id) == []


@pytest.mark.script(bash_then_text(f"{UNTIL_GO}; echo ok", "done"))
async def test_config_change_mid_turn_applies_from_the_next_turn(stack: Stack) -> None:
    session = await stack.client.sessions.create(model="claude-first")
    async with stack.worker():
        run = await stack.client.runs.prompt(session.id, "go")
        await eventually(lambda: event_seen(stack, session.id, "tool_execution_start"))
        await stack.client.config.set_model(session.id, "claude-second")
        await stack.client.config.set_system_prompt(session.id, "You are terse.")
        status = await stack.client.sessions.status(session.id)
        assert status.config.model == "claude-second"  # getters: the latest config
        pending = await stack.client.writes.pending(session.id)
        assert [e.type for e in pending] == ["model_change"]
        assert not any(
            isinstance(e, ModelChangeEntry) for e in await stack.client.tree.path(session.id)
        )
        let_go(stack, session.id)
        await run.result()
        # Idle again: a setter applies at once.
        await stack.client.config.set_model(session.id, "claude-third")
        assert (await stack.client.sessions.status(session.id)).config.model == "claude-third"
    first, second = (r.body for r in stack.model.requests_for(session.id))
    assert first["model"] == "claude-first" and second["model"] == "claude-second"
    assert "terse" not in first["system"][0]["text"] and second["system"][0]["text"].startswith(
        "You are terse."
    )
    types = [e.type for e in await stack.client.tree.path(session.id)]
    assert types == ["message", "message", "message", "model_change", "message", "model_change"]


@pytest.mark.script({"conversations": {"*": [{"wait_for": "go", "reply": [{"text": "done"}]}]}})
async def test_two_clients_racing_to_prompt_one_session(stack: Stack) -> None:
    from duragent.client.api import DuragentClient
    from duragent.client.connection import connect_temporal
    from duragent.client.errors import SessionBusy

    session = await stack.client.sessions.create()
    other = DuragentClient(await connect_temporal(stack.settings), stack.db, stack.settings)
    async with stack.worker():
        outcomes = await asyncio.gather(
            stack.client.runs.prompt(session.id, "mine"),
            other.runs.prompt(session.id, "no, mine"),
            return_exceptions=True,
        )
        busy = [o for o in outcomes if isinstance(o, SessionBusy)]
        started = [o for o in outcomes if not isinstance(o, BaseException)]
        assert len(busy) == 1 and len(started) == 1
        assert started[0].run_id in str(busy[0])
        stack.model.release("go")
        await started[0].result()
    prompts = [
        text_of(e.message.content)
        for e in await stack.client.tree.path(session.id)
        if isinstance(e, MessageEntry) and isinstance(e.message, UserMessage)
    ]
    assert len(prompts) == 1
