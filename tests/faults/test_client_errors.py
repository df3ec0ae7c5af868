"""Bad input from clients: each answered with a clear error, nothing stored lost."""

from __future__ import annotations

import pytest
from support import ApiServer, Stack, eventually, run_finished

from duragent.client.errors import SessionIdle
from duragent.domain.entries import MessageEntry
from duragent.domain.messages import AssistantMessage, ToolResultMessage, text_of
from duragent.domain.runs import session_workflow_id


@pytest.mark.script(
    {"conversations": {"*": [{"wait_for": "go", "reply": [{"text": "still fine"}]}]}}
)
async def test_malformed_signal_payloads_are_dropped_and_the_run_goes_on(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        run = await stack.client.runs.prompt(session.id, "work")
        await eventually(lambda: len(stack.model.requests_for(session.id)) == 1)
        handle = stack.temporal.get_workflow_handle(session_workflow_id(session.id))
        await handle.signal("steer", {"not": "a queued message"})
        await handle.signal("change", "garbage")
        await handle.signal("guidance", 42)
        await stack.client.inputs.steer(session.id, "a real steer")
        stack.model.release("go")
        result = await run.result()
    assert result.status == "completed"
    sent = stack.model.requests_for(session.id)
    assert len(sent) == 2 and "a real steer" in str(sent[1].body["messages"][-1])


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"tool_use": {"name": "read", "input": {"path": "../../etc/passwd"}}}]},
                {"error": {"status": 404, "message": "model: claude-no-such-model"}},
            ]
        }
    }
)
async def test_an_unknown_model_and_a_path_outside_the_workspace(stack: Stack) -> None:
    session = await stack.client.sessions.create(model="claude-no-such-model")
    async with stack.worker():
        result = await (await stack.client.runs.prompt(session.id, "read it")).result()
    assert result.status == "error"
    assert (
        result.error is not None
        and "404" in result.error
        and "claude-no-such-model" in result.error
    )
    path = await stack.client.tree.path(session.id)
    escaped = path[2]
    assert isinstance(escaped, MessageEntry) and isinstance(escaped.message, ToolResultMessage)
    assert escaped.message.is_error and "outside the workspace" in text_of(escaped.message.content)
    last = path[-1]
    assert isinstance(last, MessageEntry) and isinstance(last.message, AssistantMessage)
    assert last.message.stop_reason == "error"
    assert len(path) == 4  # prompt, call, result, the error reply: all kept


@pytest.mark.script({"conversations": {"*": [{"reply": [{"text": "done"}]}]}})
async def test_guidance_for_a_run_that_has_ended(stack: Stack, api: ApiServer) -> None:
    async with stack.worker(), api.client() as http:
        session = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        await http.post(f"/api/sessions/{session}/input", json={"text": "hi"})
        await eventually(lambda: run_finished(stack, session))
        item = (
            await http.post(f"/api/sessions/{session}/input-queue", json={"text": "late"})
        ).json()
        guided = await http.patch(
            f"/api/sessions/{session}/input-queue/{item['id']}", json={"action": "guide"}
        )
        assert guided.status_code == 409
        assert "no run in progress" in guided.json()["detail"]
        with pytest.raises(SessionIdle):
            await stack.client.inputs.guide(session, item["id"])
        # The input is still there, pending, for the next run.
        assert [
            i["text"] for i in (await http.get(f"/api/sessions/{session}/input-queue")).json()
        ] == ["late"]
