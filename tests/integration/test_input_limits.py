"""One size limit on every text a client sends, on every path: over HTTP, from Python and
from the command line. A refused text is stored nowhere and reaches no run."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from support import ApiServer, Stack, eventually, run_finished
from typer.testing import CliRunner

from duragent.api.app import MAX_BODY_BYTES
from duragent.client.cli import app as cli
from duragent.client.errors import InputQueueFull, InputTooLarge
from duragent.domain.input import MAX_INPUT_BYTES, MAX_PENDING_INPUT
from duragent.domain.messages import user_text
from duragent.store import input_queue

OVER = "x" * (MAX_INPUT_BYTES + 1)
LIMIT_NAMED = f"the limit is {MAX_INPUT_BYTES} bytes"
GATED = {
    "conversations": {
        "*": [
            {"wait_for": "go", "reply": [{"text": "first"}]},
            {"reply": [{"text": "second"}]},
        ]
    }
}


def tree(folder: Path) -> set[str]:
    return {str(Path(d) / n) for d, dirs, files in os.walk(folder) for n in dirs + files}


def assert_refused(response: Any, what: str) -> None:
    assert response.status_code == 413, (what, response.status_code, response.text[:300])
    detail = response.json()["detail"]
    assert LIMIT_NAMED in detail and detail.startswith(what), detail


def sent_texts(stack: Stack, session: str) -> str:
    return json.dumps([r.body for r in stack.model.requests_for(session)])


@pytest.mark.parametrize("field", ["name", "system_prompt", "model", "workspace"])
async def test_creating_a_session_with_an_oversize_field_is_refused(
    stack: Stack, api: ApiServer, field: str
) -> None:
    before = tree(stack.settings.home)
    async with api.client() as http:
        response = await http.post("/api/sessions", json={field: OVER})
    what = {"name": "session name", "system_prompt": "system prompt"}.get(field, field)
    assert_refused(response, what)
    assert await stack.client.sessions.list() == []
    assert tree(stack.settings.home) == before


async def test_oversize_input_to_an_idle_session_is_refused(stack: Stack, api: ApiServer) -> None:
    async with api.client() as http:
        session = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        assert_refused(
            await http.post(f"/api/sessions/{session}/input", json={"text": OVER}), "prompt"
        )
        assert_refused(
            await http.post(f"/api/sessions/{session}/input-queue", json={"text": OVER}),
            "queued input",
        )
    assert await stack.client.runs.list(session) == []
    assert await stack.client.tree.entries(session) == []
    assert await stack.client.inputs.queue(session, status=None) == []


@pytest.mark.script(GATED)
async def test_every_path_into_a_busy_session_refuses_oversize_text(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as http:
        # Named: an unnamed session's first prompt would name it (a pending write).
        created = await http.post("/api/sessions", json={"name": "limits"})
        session = created.json()["session"]["id"]
        url = f"/api/sessions/{session}"
        assert (await http.post(f"{url}/input", json={"text": "go"})).json()["action"] == "started"
        await eventually(lambda: len(stack.model.requests_for(session)) == 1)
        # Over HTTP: queued input, guidance, a queued guidance item.
        assert_refused(await http.post(f"{url}/input", json={"text": OVER}), "prompt")
        guided = await http.post(f"{url}/input", json={"text": OVER, "guidance": True})
        assert_refused(guided, "queued input")
        queued = await http.post(f"{url}/input-queue", json={"text": OVER, "kind": "guidance"})
        assert_refused(queued, "queued input")
        # An item stored before the limit held is not sent to the run as guidance.
        with stack.db.transaction() as db:
            old = input_queue.add_item(
                db, item_id="old", session_id=session, kind="next_turn", message=user_text(OVER, 0)
            )
        assert_refused(
            await http.patch(f"{url}/input-queue/old", json={"action": "guide"}), "guidance"
        )
        # From Python: steering, follow-ups and every config string or session write.
        client = stack.client
        refusals = {
            "steering message": client.inputs.steer(session, OVER),
            "follow up message": client.inputs.follow_up(session, OVER),
            "system prompt": client.config.update(session, system_prompt=OVER),
            "model": client.config.set_model(session, OVER),
            "active tools": client.config.set_active_tools(session, ["read", OVER]),
            "session name": client.sessions.rename(session, OVER),
            "label": client.tree.label(session, "entry", OVER),
            "custom message": client.tree.append_custom_message(session, "note", OVER),
            "custom entry": client.tree.append_custom_entry(session, "state", {"blob": OVER}),
        }
        for what, call in refusals.items():
            with pytest.raises(InputTooLarge, match=f"^{what} is .*{LIMIT_NAMED}"):
                await call
        status = await client.sessions.status(session)
        assert status.run is not None
        assert (status.run.steering, status.run.follow_ups, status.run.pending_writes) == (
            [],
            [],
            [],
        )
        stack.model.release("go")
        await eventually(lambda: run_finished(stack, session))
    assert [i.id for i in await stack.client.inputs.queue(session, status=None)] == [old.id]
    assert (await stack.client.inputs.item(session, "old")).status == "pending"
    assert OVER not in sent_texts(stack, session)
    assert OVER not in json.dumps(
        [e.model_dump(mode="json") for e in await stack.client.tree.entries(session)]
    )
    assert (await stack.client.sessions.get(session)).config.system_prompt != OVER


async def test_runs_and_tree_operations_refuse_oversize_arguments(stack: Stack) -> None:
    client = stack.client
    session = await client.sessions.create()
    calls = {
        "skill invocation": client.runs.skill(session.id, "review", [OVER]),
        "template invocation": client.runs.prompt_from_template(session.id, OVER),
        "compaction instructions": client.tree.compact(session.id, instructions=OVER),
        "summary instructions": client.tree.navigate(session.id, "entry", instructions=OVER),
    }
    for what, call in calls.items():
        with pytest.raises(InputTooLarge, match=f"^{what} is "):
            await call
    with pytest.raises(InputTooLarge, match=r"^session name is "):
        await client.sessions.fork(session.id, "entry", name=OVER)
    with pytest.raises(InputTooLarge, match=r"^session name is "):
        await client.sessions.create(name=OVER)
    assert await client.runs.list(session.id) == [] and len(await client.sessions.list()) == 1


async def test_the_request_body_is_bounded_before_it_is_read(stack: Stack, api: ApiServer) -> None:
    async with api.client() as http:
        session = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        url = f"/api/sessions/{session}/input-queue"
        huge = json.dumps({"text": "x" * (20 * 1024 * 1024)}).encode()
        declared = await http.post(url, content=huge, headers={"Content-Type": "application/json"})

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
            for start in range(0, len(huge), 64 * 1024):
                yield huge[start : start + 64 * 1024]

        streamed = await http.post(
            url, content=chunks(), headers={"Content-Type": "application/json"}
        )
        for response in (declared, streamed):
            assert response.status_code == 413, response.text[:200]
            detail = response.json()["detail"]
            assert f"over {MAX_BODY_BYTES} bytes" in detail and str(MAX_INPUT_BYTES) in detail
        edit = await http.patch(
            f"{url}/x", content=huge, headers={"Content-Type": "application/json"}
        )
        assert edit.status_code == 413
        # A text under the limit fits however its JSON is escaped (here 2 x its size).
        chinese = "中" * (MAX_INPUT_BYTES // 3 - 10)
        escaped = json.dumps({"text": chinese}, ensure_ascii=True).encode()
        assert len(escaped) > 2 * MAX_INPUT_BYTES - 100
        fits = await http.post(url, content=escaped, headers={"Content-Type": "application/json"})
        assert fits.status_code == 201, fits.text[:200]
    assert [i.text for i in await stack.client.inputs.queue(session)] == [chinese]


@pytest.mark.script(GATED)
async def test_the_command_line_refuses_oversize_text(stack: Stack) -> None:
    """In process (an argument of this size cannot pass through exec)."""
    settings = stack.settings
    options = [
        f"--home={settings.home}",
        f"--database-url={settings.database_url}",
        f"--temporal-address={settings.temporal_address}",
        f"--task-queue={settings.task_queue}",
    ]
    session = await stack.client.sessions.create()
    runner = CliRunner()
    async with stack.worker():
        run = await stack.client.runs.prompt(session.id, "go")
        await eventually(lambda: len(stack.model.requests_for(session.id)) == 1)
        commands = {
            "queued input": ["next-turn", session.id, OVER],
            "steering message": ["steer", session.id, OVER],
            "follow up message": ["follow-up", session.id, OVER],
            "prompt": ["send", session.id, OVER],
            "system prompt": ["configure", session.id, f"--system-prompt={OVER}"],
        }
        for what, args in commands.items():
            result = await asyncio.to_thread(runner.invoke, cli, [*options, *args])
            assert result.exit_code == 2, (what, result.output[-500:])
            assert f"{what} is" in result.stderr and LIMIT_NAMED in result.stderr
        guided = await asyncio.to_thread(
            runner.invoke, cli, [*options, "guide", session.id, "--text", OVER]
        )
        assert guided.exit_code == 2 and LIMIT_NAMED in guided.stderr
        status = await stack.client.sessions.status(session.id)
        assert status.run is not None and status.run.steering == [] and status.run.follow_ups == []
        stack.model.release("go")
        await run.result()
    assert await stack.client.inputs.queue(session.id, status=None) == []
    assert OVER not in sent_texts(stack, session.id)


async def test_a_full_input_queue_refuses_more_and_keeps_what_it_holds(
    stack: Stack, api: ApiServer
) -> None:
    async with api.client() as http:
        session = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        for n in range(MAX_PENDING_INPUT):
            await stack.client.inputs.next_turn(session, f"item {n}")
        url = f"/api/sessions/{session}"
        refused = await http.post(f"{url}/input-queue", json={"text": "one more"})
        assert refused.status_code == 409, refused.text
        assert f"holds {MAX_PENDING_INPUT} pending items" in refused.json()["detail"]
        with pytest.raises(InputQueueFull, match="send, guide or delete some first"):
            await stack.client.inputs.next_turn(session, "one more")
        state = (await http.get(f"{url}/state")).json()
        assert [i["text"] for i in state["input_queue"]] == [
            f"item {n}" for n in range(MAX_PENDING_INPUT)
        ]
        # Room again once one is deleted.
        await stack.client.inputs.delete(session, state["input_queue"][0]["id"])
        added = await http.post(f"{url}/input-queue", json={"text": "one more"})
        assert added.status_code in (200, 201), added.text
    pending = await stack.client.inputs.queue(session)
    assert len(pending) == MAX_PENDING_INPUT and pending[-1].text == "one more"
