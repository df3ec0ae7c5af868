"""The guidance acceptance points (docs/SPEC.md) over the HTTP API: real HTTP, server and store.

Point 7 (compaction keeps the display history) lives with the compaction tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import (
    BOTH_STORES,
    GATED_THEN_REPLIES,
    IN_PROCESS_MODEL,
    ApiServer,
    Stack,
    assert_valid_pairing,
    bash_then_text,
    event_seen,
    eventually,
    run_finished,
)

from duragent.activities.tools import process_group_alive

pytestmark = IN_PROCESS_MODEL  # none of it is about the model's wire

Json = dict[str, Any]


def texts(body: Json) -> list[str]:
    return [
        block["text"]
        for message in body["messages"]
        if message["role"] == "user"
        for block in message["content"]
        if block["type"] == "text"
    ]


async def new_session(http: Any) -> str:
    created = await http.post("/api/sessions", json={"name": "s"})
    assert created.status_code == 201, created.text
    return str(created.json()["session"]["id"])


async def events_of(http: Any, session: str, kind: str) -> list[Json]:
    state = (await http.get(f"/api/sessions/{session}/state")).json()
    return [e["payload"] for e in state["activity_events"] if e["type"] == kind]


@pytest.mark.script(GATED_THEN_REPLIES)
async def test_two_sessions_at_once_no_cross_talk(stack: Stack, api: ApiServer) -> None:
    async with stack.worker(), api.client() as http:
        a, b = await new_session(http), await new_session(http)
        for session, text in ((a, "task for A"), (b, "task for B")):
            sent = await http.post(f"/api/sessions/{session}/input", json={"text": text})
            assert sent.json()["action"] == "started"
        await eventually(lambda: all(len(stack.model.requests_for(s)) == 1 for s in (a, b)))
        # Both busy: input to B lands in B's queue only, and A's run goes on untouched.
        queued = await http.post(f"/api/sessions/{b}/input", json={"text": "more for B"})
        assert queued.json()["action"] == "queued"
        assert [i["text"] for i in (await http.get(f"/api/sessions/{b}/input-queue")).json()] == [
            "more for B"
        ]
        assert (await http.get(f"/api/sessions/{a}/input-queue")).json() == []
        # Guidance to A reaches only A's run.
        guided = await http.post(
            f"/api/sessions/{a}/input", json={"text": "A: mention the date", "guidance": True}
        )
        assert guided.json()["item"]["kind"] == "guidance"
        stack.model.release("go")
        await eventually(lambda: len(stack.model.requests_for(a)) == 2)
        # B's queued input starts B's next run when B's run ends; A has no second run.
        await eventually(lambda: len(stack.client.sync.runs.list(b)) == 2)
        await eventually(
            lambda: all(
                (stack.client.sync.runs.get(r.run_id) or r).status != "running"
                for s in (a, b)
                for r in stack.client.sync.runs.list(s)
            )
        )
    a_sent = " ".join(t for r in stack.model.requests_for(a) for t in texts(r.body))
    b_sent = " ".join(t for r in stack.model.requests_for(b) for t in texts(r.body))
    assert "task for A" in a_sent and "A: mention the date" in a_sent
    assert "for B" not in a_sent
    assert "task for B" in b_sent and "for A" not in b_sent and "A: mention" not in b_sent
    assert texts(stack.model.requests_for(b)[-1].body)[-1] == "more for B"
    assert await stack.client.inputs.next_turn_items(b) == []
    assert len(await stack.client.runs.list(a)) == 1


@BOTH_STORES
@pytest.mark.script(bash_then_text("sleep 2; echo ok", "done", "second run"))
async def test_pending_items_survive_a_restart_of_the_api_and_the_worker(
    stack: Stack, api: ApiServer
) -> None:
    async with api.client() as http:
        session = await new_session(http)
        async with stack.worker():
            await http.post(f"/api/sessions/{session}/input", json={"text": "go"})
            await eventually(lambda: len(stack.model.requests_for(session)) == 1)
            queued = await http.post(f"/api/sessions/{session}/input", json={"text": "later"})
            item = queued.json()["item"]
    await api.stop()
    await api.start()  # a new app, same store
    async with api.client() as http:
        pending = (await http.get(f"/api/sessions/{session}/input-queue")).json()
        assert [(i["id"], i["status"]) for i in pending] == [(item["id"], "pending")]
        # A new worker finishes the run, and the input that waited starts the next one.
        async with stack.worker():
            await eventually(lambda: len(stack.model.requests_for(session)) == 3, timeout=30)
            await eventually(lambda: run_finished(stack, session))
    assert texts(stack.model.requests_for(session)[2].body)[-1:] == ["later"]
    assert [r.kind for r in await stack.client.runs.list(session)] == ["queued", "prompt"]
    assert await stack.client.inputs.queue(session) == []


@pytest.mark.script(bash_then_text("sleep 1; echo built", "done, with the changelog"))
async def test_guidance_taken_at_the_nearest_safe_point(stack: Stack, api: ApiServer) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http)
        await http.post(f"/api/sessions/{session}/input", json={"text": "build"})
        await eventually(lambda: len(stack.model.requests_for(session)) == 1)
        item = (
            await http.post(
                f"/api/sessions/{session}/input", json={"text": "also update the changelog"}
            )
        ).json()["item"]
        guided = await http.patch(
            f"/api/sessions/{session}/input-queue/{item['id']}", json={"action": "guide"}
        )
        assert guided.status_code == 200 and guided.json()["item"]["kind"] == "guidance"
        again = await http.patch(  # guiding twice delivers it once
            f"/api/sessions/{session}/input-queue/{item['id']}", json={"action": "guide"}
        )
        assert again.status_code == 200
        await eventually(lambda: len(stack.model.requests_for(session)) == 2)
        await eventually(lambda: run_finished(stack, session))
        injected = await events_of(http, session, "runtime_guidance_injected")
        state = (await http.get(f"/api/sessions/{session}/state")).json()
    assert [(e["point"], e["item_ids"]) for e in injected] == [("after_tool", [item["id"]])]
    second = stack.model.requests_for(session)[1].body
    hidden = [t for t in texts(second) if "<runtime-guidance>" in t]
    assert len(hidden) == 1 and "also update the changelog" in hidden[0]
    # After the tool result, never between a tool_use and its tool_result.
    assert second["messages"][-1]["content"][0]["type"] == "tool_result"
    assert all("update the changelog" not in str(m["message"]) for m in state["messages"])
    assert state["input_queue"] == []
    item_now = await stack.client.inputs.item(session, item["id"])
    assert item_now.status == "consumed"
    assert_valid_pairing(await stack.client.tree.path(session))


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {
                    "wait_for": "go",
                    "reply": [
                        {"tool_use": {"name": "bash", "input": {"command": "touch ran.txt"}}}
                    ],
                },
                {"reply": [{"text": "re-planned"}]},
            ]
        }
    }
)
async def test_guidance_before_tools_skips_them_with_the_replan_event(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http)
        workspace = Path((await stack.client.sessions.get(session)).workspace)
        await http.post(f"/api/sessions/{session}/input", json={"text": "do it"})
        await eventually(lambda: len(stack.model.requests_for(session)) == 1)
        await http.post(
            f"/api/sessions/{session}/input", json={"text": "use the staging db", "guidance": True}
        )
        stack.model.release("go")
        await eventually(lambda: run_finished(stack, session))
        replans = await events_of(http, session, "runtime_guidance_replan_before_tools")
        injected = await events_of(http, session, "runtime_guidance_injected")
    assert len(replans) == 1 and len(replans[0]["skipped"]) == 1
    assert injected[0]["point"] == "before_tools"
    assert not (workspace / "ran.txt").exists()  # the planned call never ran
    second = stack.model.requests_for(session)[1].body
    result = second["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and "Not run" in result["content"][0]["text"]
    assert "use the staging db" in texts(second)[-1]
    assert_valid_pairing(await stack.client.tree.path(session))


@pytest.mark.script(bash_then_text("echo $$ > pid.txt; echo step-1; sleep 60", "switched approach"))
async def test_interrupting_guidance_stops_only_the_running_tool(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http)
        pid_file = Path((await stack.client.sessions.get(session)).workspace) / "pid.txt"
        await http.post(f"/api/sessions/{session}/input", json={"text": "go"})
        await eventually(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
        await eventually(lambda: event_seen(stack, session, "tool_execution_update"))  # step-1
        pgid = int(pid_file.read_text())
        await http.post(
            f"/api/sessions/{session}/input",
            json={"text": "Stop that, use the cached build instead", "guidance": True},
        )
        await eventually(lambda: not process_group_alive(pgid), timeout=10)
        await eventually(lambda: run_finished(stack, session))
        injected = await events_of(http, session, "runtime_guidance_injected")
    assert (
        injected[0]["point"] == "during_tool_interrupted" and len(injected[0]["interrupted"]) == 1
    )
    second = stack.model.requests_for(session)[1].body
    result = second["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and "step-1" in result["content"][0]["text"]
    assert "cached build" in texts(second)[-1]
    assert (await stack.client.runs.list(session))[
        0
    ].status == "completed"  # the run was not cancelled


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {
                    "reply": [
                        {
                            "tool_use": {
                                "name": "bash",
                                "input": {"command": "echo $$ > pid.txt; sleep 60"},
                            }
                        }
                    ]
                },
                {"reply": [{"text": "unused"}]},
            ]
        }
    }
)
async def test_stop_kills_the_tool_and_cancels_pending_items(stack: Stack, api: ApiServer) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http)
        pid_file = Path((await stack.client.sessions.get(session)).workspace) / "pid.txt"
        await http.post(f"/api/sessions/{session}/input", json={"text": "go"})
        await eventually(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
        pgid = int(pid_file.read_text())
        for text in ("one", "two"):
            await http.post(f"/api/sessions/{session}/input", json={"text": text})
        stopped = await http.post(f"/api/sessions/{session}/stop")
        assert stopped.status_code == 200, stopped.text
        assert stopped.json()["status"] == "aborted"
        assert sorted(stopped.json()["cancelled_inputs"]) == ["one", "two"]
        await eventually(lambda: not process_group_alive(pgid), timeout=5)
        assert (await http.get(f"/api/sessions/{session}/input-queue")).json() == []
        statuses = [i.status for i in await stack.client.inputs.queue(session, status=None)]
        assert statuses == ["cancelled", "cancelled"]
        again = await http.post(f"/api/sessions/{session}/stop")
        assert again.status_code == 409 and "no run in progress" in again.json()["detail"]


@BOTH_STORES
@pytest.mark.script({"conversations": {"*": [{"reply": [{"text": "hi"}]}]}})
async def test_auth_ownership_and_a_resumable_event_stream(stack: Stack, api: ApiServer) -> None:
    async with stack.worker(), api.client() as http, api.client(ApiServer.OTHER_TOKEN) as bob:
        async with api.client(None) as anonymous:
            assert (await anonymous.get("/api/sessions")).status_code == 401
        session = await new_session(http)
        assert (await bob.get(f"/api/sessions/{session}/state")).status_code == 404
        assert (await bob.get("/api/sessions/nope/state")).status_code == 404
        assert (await bob.get("/api/sessions")).json() == []
        bad = await http.post(f"/api/sessions/{session}/input", json={"text": ""})
        assert bad.status_code == 422
        await http.post(f"/api/sessions/{session}/input", json={"text": "hello"})
        await eventually(lambda: run_finished(stack, session))
        seen: list[tuple[int, str]] = []
        async with http.stream("GET", f"/api/sessions/{session}/events") as stream:
            event_id = None
            async for line in stream.aiter_lines():
                if line.startswith("id: "):
                    event_id = int(line[4:])
                elif line.startswith("event: "):
                    seen.append((event_id or 0, line[7:]))
                    if line[7:] == "agent_end":
                        break
        assert seen[0][1] == "agent_start" and seen[-1][1] == "agent_end"
        resume_from = seen[2][0]
        resumed: list[int] = []
        async with http.stream(
            "GET", f"/api/sessions/{session}/events", headers={"Last-Event-ID": str(resume_from)}
        ) as stream:
            async for line in stream.aiter_lines():
                if line.startswith("id: "):
                    resumed.append(int(line[4:]))
                    if len(resumed) == len(seen) - 3:
                        break
        assert resumed == [seq for seq, _ in seen[3:]]
        openapi = (await http.get("/openapi.json")).json()
        assert "/api/sessions/{session_id}/input-queue/{item_id}" in openapi["paths"]


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"wait_for": "go", "reply": [{"text": "Final answer."}]},
                {"reply": [{"text": "Final answer, now in French."}]},
            ]
        }
    }
)
async def test_guidance_before_finish_takes_one_more_turn_and_an_edited_item_is_not_taken(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http)
        await http.post(f"/api/sessions/{session}/input", json={"text": "answer"})
        await eventually(lambda: len(stack.model.requests_for(session)) == 1)
        kept = (
            await http.post(
                f"/api/sessions/{session}/input", json={"text": "in French", "guidance": True}
            )
        ).json()["item"]
        # Guided, then taken back for editing before the run reached a safe point.
        edited = (
            await http.post(
                f"/api/sessions/{session}/input", json={"text": "in German", "guidance": True}
            )
        ).json()["item"]
        taken_back = await http.patch(
            f"/api/sessions/{session}/input-queue/{edited['id']}", json={"action": "edit"}
        )
        assert taken_back.json()["text"] == "in German"
        stack.model.release("go")
        await eventually(lambda: run_finished(stack, session))
        injected = await events_of(http, session, "runtime_guidance_injected")
    assert [(e["point"], e["item_ids"]) for e in injected] == [("before_finish", [kept["id"]])]
    assert len(stack.model.requests_for(session)) == 2
    sent = " ".join(texts(stack.model.requests_for(session)[1].body))
    assert "in French" in sent and "in German" not in sent
    assert (await stack.client.inputs.item(session, edited["id"])).status == "cancelled"
    assert (await stack.client.runs.list(session))[0].turns == 2


@BOTH_STORES
@pytest.mark.script(bash_then_text("sleep 4; echo built", "done"))
async def test_guidance_survives_a_worker_crash_and_is_delivered_once(
    stack: Stack, api: ApiServer
) -> None:
    async with api.client() as http:
        session = await new_session(http)
        worker = stack.spawn_worker()
        await http.post(f"/api/sessions/{session}/input", json={"text": "build"})
        started = Path((await stack.client.sessions.get(session)).workspace)
        await eventually(lambda: started.exists() and len(stack.model.requests_for(session)) == 1)
        await eventually(lambda: event_seen(stack, session, "tool_execution_start"), timeout=30)
        item = (
            await http.post(
                f"/api/sessions/{session}/input",
                json={"text": "also note the build time", "guidance": True, "intent": "supplement"},
            )
        ).json()["item"]
        stack.kill(worker)  # guided, signalled, not yet taken
        worker = stack.spawn_worker()
        await eventually(lambda: run_finished(stack, session), timeout=60)
        stack.kill(worker)
    requests = stack.model.requests_for(session)
    delivered = [t for r in requests for t in texts(r.body) if "note the build time" in t]
    assert len(delivered) == 1
    assert [e.id for e in await stack.client.tree.path(session)].count(item["id"]) == 1
    assert (await stack.client.inputs.item(session, item["id"])).status == "consumed"
    assert_valid_pairing(await stack.client.tree.path(session))
