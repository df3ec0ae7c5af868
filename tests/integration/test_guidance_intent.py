"""`POST /api/sessions/{id}/input` with guidance: the `intent` a client sends reaches the run,
whatever the wording would suggest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import BOTH_PROTOCOLS, ApiServer, Stack, eventually, run_finished

from duragent.activities.tools import process_group_alive
from duragent.domain.entries import CustomMessageEntry
from duragent.domain.guidance import GUIDANCE_TYPE


def tool_script(command: str) -> dict[str, Any]:
    return {
        "conversations": {
            "*": [
                {"reply": [{"tool_use": {"name": "bash", "input": {"command": command}}}]},
                {"reply": [{"text": "taken into account"}]},
            ]
        }
    }


async def start_tool_run(stack: Stack, http: Any) -> tuple[str, Path]:
    """A new session whose run is inside its bash call once this returns."""
    created = await http.post("/api/sessions", json={"name": "intent"})
    session = str(created.json()["session"]["id"])
    pid_file = Path((await stack.client.sessions.get(session)).workspace) / "pid.txt"
    await http.post(f"/api/sessions/{session}/input", json={"text": "go"})
    await eventually(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
    return session, pid_file


def guidance_intents(stack: Stack, session: str) -> list[str]:
    return [
        str((e.details or {}).get("intent"))
        for e in stack.client.sync.tree.path(session)
        if isinstance(e, CustomMessageEntry) and e.custom_type == GUIDANCE_TYPE
    ]


async def injected_points(http: Any, session: str) -> list[str]:
    state = (await http.get(f"/api/sessions/{session}/state")).json()
    return [
        e["payload"]["point"]
        for e in state["activity_events"]
        if e["type"] == "runtime_guidance_injected"
    ]


@pytest.mark.script(tool_script("echo $$ > pid.txt; sleep 60; echo finished"))
@BOTH_PROTOCOLS
async def test_intent_interrupt_stops_the_running_tool_whatever_the_wording(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as http:
        session, pid_file = await start_tool_run(stack, http)
        sent = await http.post(
            f"/api/sessions/{session}/input",
            # Worded as a supplement: only the explicit intent makes it interrupt.
            json={"text": "also print the date", "guidance": True, "intent": "interrupt"},
        )
        assert sent.status_code == 200, sent.text
        await eventually(lambda: not process_group_alive(int(pid_file.read_text())), timeout=15)
        await eventually(lambda: run_finished(stack, session))
        assert await injected_points(http, session) == ["during_tool_interrupted"]
    assert guidance_intents(stack, session) == ["interrupt"]
    assert (await stack.client.runs.list(session))[0].status == "completed"


@pytest.mark.script(tool_script("echo $$ > pid.txt; sleep 2; echo finished"))
async def test_intent_supplement_lets_the_running_tool_finish_whatever_the_wording(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as http:
        session, _ = await start_tool_run(stack, http)
        sent = await http.post(
            f"/api/sessions/{session}/input",
            # Worded as an interruption: the explicit intent says it only adds to the task.
            json={"text": "stop, also print the date", "guidance": True, "intent": "supplement"},
        )
        assert sent.status_code == 200, sent.text
        await eventually(lambda: run_finished(stack, session))
        assert await injected_points(http, session) == ["after_tool"]
    assert guidance_intents(stack, session) == ["supplement"]
    second = stack.model.requests_for(session)[1].body
    result = second["messages"][-1]["content"][0]  # the tool's result, then the guidance
    assert result["type"] == "tool_result" and "finished" in str(result["content"])


async def test_an_intent_without_guidance_is_refused(stack: Stack, api: ApiServer) -> None:
    async with api.client() as http:
        created = await http.post("/api/sessions", json={})
        session = created.json()["session"]["id"]
        cases = [
            ("post", f"/api/sessions/{session}/input", {"text": "hi", "intent": "interrupt"}),
            ("post", f"/api/sessions/{session}/input-queue", {"text": "hi", "intent": "interrupt"}),
            (
                "patch",
                f"/api/sessions/{session}/input-queue/x",
                {"action": "edit", "intent": "interrupt"},
            ),
        ]
        for method, url, body in cases:
            refused = await getattr(http, method)(url, json=body)
            assert refused.status_code == 422, (url, refused.text)
            assert "intent is for guidance" in refused.text
    assert await stack.client.inputs.queue(session, status=None) == []
    assert await stack.client.runs.list(session) == []


async def test_guidance_to_an_idle_session_is_refused_and_keeps_nothing(
    stack: Stack, api: ApiServer
) -> None:
    """Guidance is for the run in progress: with none open it is a 409, and no queued item
    is left behind to be sent again (a resend would have made a second one)."""
    async with api.client() as http:
        created = await http.post("/api/sessions", json={})
        session = created.json()["session"]["id"]
        for _ in range(2):
            refused = await http.post(
                f"/api/sessions/{session}/input", json={"text": "use pathlib", "guidance": True}
            )
            assert refused.status_code == 409, refused.text
        for _ in range(2):
            refused = await http.post(
                f"/api/sessions/{session}/input-queue",
                json={"text": "use pathlib", "kind": "guidance"},
            )
            assert refused.status_code == 409, refused.text
    assert await stack.client.inputs.queue(session, status=None) == []
    assert await stack.client.runs.list(session) == []
