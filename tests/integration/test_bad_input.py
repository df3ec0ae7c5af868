"""Bad input ends as a user would expect: a clear message, and nothing stored lost."""

from __future__ import annotations

import pytest
from support import Stack, assert_valid_pairing, eventually, transcript_roles

from duragent.client.errors import InvalidPrompt, SessionBusy, SessionNotFound
from duragent.domain.entries import MessageEntry
from duragent.domain.messages import AssistantMessage, ToolResultMessage, text_of


def tool_results(stack: Stack, session_id: str) -> list[ToolResultMessage]:
    return [
        e.message
        for e in stack.client.sync.tree.path(session_id)
        if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
    ]


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"tool_use": {"name": "teleport", "input": {"to": "mars"}}}]},
                {"reply": [{"tool_use": {"name": "read", "input": {"file": "x.txt"}}}]},
                {"reply": [{"text": "I will stop here."}]},
            ]
        }
    }
)
async def test_unknown_tool_and_invalid_arguments_become_error_results(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        result = await (await stack.client.runs.prompt(session.id, "go")).result()
    assert result.status == "completed"
    unknown, invalid = tool_results(stack, session.id)
    assert unknown.is_error and "teleport" in text_of(unknown.content)
    assert "not found" in text_of(unknown.content).lower()
    assert invalid.is_error and "path" in text_of(invalid.content)
    # The model saw both errors as tool results and carried on.
    last_request = stack.model.requests_for(session.id)[-1].body["messages"]
    assert last_request[-1]["content"][0]["type"] == "tool_result"
    assert last_request[-1]["content"][0]["is_error"] is True


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"error": {"status": 529, "message": "Overloaded", "retry_after": 0.2}},
                {"error": {"status": 500, "message": "boom"}},
                {"reply": [{"text": "Recovered."}]},
            ]
        }
    }
)
async def test_overloaded_then_success_retries_inside_the_run(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        handle = await stack.client.runs.prompt(
            session.id,
            "hi",
            options=stack.client.runs.default_options().model_copy(
                update={"provider_backoff_s": 0.1}
            ),
        )
        result = await handle.result()
    assert result.status == "completed" and result.final_text == "Recovered."
    assert len(stack.model.requests_for(session.id)) == 3
    events = [e async for e in stack.client.events.stream(session.id, follow=False)]
    retries = [e.payload for e in events if e.type == "retry_scheduled"]
    assert [r["attempt"] for r in retries] == [1, 2]
    assert retries[0]["delay_ms"] == 200  # the server's retry-after
    assert "529" in retries[0]["error"]
    phases = [e.payload["phase"] for e in events if e.type == "phase_changed"]
    assert phases == ["retry", "turn", "retry", "turn"]
    assert transcript_roles(await stack.client.tree.path(session.id)) == ["user", "assistant"]


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"tool_use": {"name": "ls", "input": {}}}]},
                {"error": {"status": 400, "message": "messages: bad request on purpose"}},
                {"reply": [{"text": "Fine now."}]},
            ]
        }
    }
)
async def test_bad_request_ends_the_run_with_the_error_and_keeps_the_session(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        failed = await (await stack.client.runs.prompt(session.id, "first")).result()
        assert failed.status == "error"
        assert failed.error is not None and "400" in failed.error and "on purpose" in failed.error
        # Not retried: a 400 will not get better.
        assert len(stack.model.requests_for(session.id)) == 2
        path = await stack.client.tree.path(session.id)
        assert transcript_roles(path) == ["user", "assistant", "toolResult", "assistant"]
        last = path[-1]
        assert isinstance(last, MessageEntry) and isinstance(last.message, AssistantMessage)
        assert last.message.stop_reason == "error" and "on purpose" in (
            last.message.error_message or ""
        )
        run = await stack.client.runs.get(failed.run_id)
        assert run is not None and run.status == "error"

        ok = await (await stack.client.runs.prompt(session.id, "again")).result()
    assert ok.status == "completed" and ok.final_text == "Fine now."
    path = await stack.client.tree.path(session.id)
    assert transcript_roles(path) == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "user",
        "assistant",
    ]
    assert_valid_pairing(path)
    # The errored, empty assistant turn is left out of what the model receives.
    sent = stack.model.requests_for(session.id)[-1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]


@pytest.mark.script({"conversations": {"*": [{"wait_for": "go", "reply": [{"text": "done"}]}]}})
async def test_prompt_to_a_busy_session_names_the_running_run(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        first = await stack.client.runs.prompt(session.id, "long task")
        await eventually(lambda: len(stack.model.requests_for(session.id)) == 1)
        with pytest.raises(SessionBusy) as busy:
            await stack.client.runs.prompt(session.id, "another")
        assert first.run_id in str(busy.value) and session.id in str(busy.value)
        assert await stack.client.sessions.phase(session.id) == "turn"
        stack.model.release("go")
        result = await first.result()
    assert result.status == "completed"
    assert transcript_roles(await stack.client.tree.path(session.id)) == ["user", "assistant"]
    assert await stack.client.sessions.phase(session.id) == "idle"


async def test_unknown_session_and_empty_prompt_are_refused(stack: Stack) -> None:
    with pytest.raises(SessionNotFound, match="nope"):
        await stack.client.runs.prompt("nope", "hello")
    session = await stack.client.sessions.create()
    with pytest.raises(InvalidPrompt, match="empty"):
        await stack.client.runs.prompt(session.id, "   ")
    with pytest.raises(InvalidPrompt, match="limit is 262144 bytes"):
        await stack.client.runs.prompt(session.id, "x" * 300_000)
    assert await stack.client.tree.entries(session.id) == []
    assert await stack.client.runs.list(session.id) == []
