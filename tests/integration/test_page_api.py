"""The routes the web page uses beside /state and the queue, over real HTTP: each names only the
user's own sessions and entries, and bad input is a 422 naming the rule."""

from __future__ import annotations

from typing import Any

import pytest
from support import GATED_THEN_REPLIES, ApiServer, Stack, eventually, run_finished

from duragent.domain.input import MAX_INPUT_BYTES


async def new_session(http: Any, name: str = "s") -> str:
    created = await http.post("/api/sessions", json={"name": name})
    assert created.status_code == 201, created.text
    return str(created.json()["session"]["id"])


@pytest.mark.script(GATED_THEN_REPLIES)
async def test_summaries_status_steer_and_follow_up(stack: Stack, api: ApiServer) -> None:
    async with stack.worker(), api.client() as http, api.client(ApiServer.OTHER_TOKEN) as bob:
        idle, busy = await new_session(http, "idle"), await new_session(http, "busy")
        await new_session(bob, "bob's")
        assert (await http.post(f"/api/sessions/{busy}/input", json={"text": "go"})).is_success
        await eventually(lambda: len(stack.model.requests_for(busy)) == 1)
        listed = (await http.get("/api/session-summaries")).json()
        assert [(s["session"]["name"], s["status"]) for s in listed] == [
            ("busy", "running"),
            ("idle", "idle"),
        ]
        status = (await http.get(f"/api/sessions/{busy}/status")).json()
        assert status["phase"] == "turn" and status["worker_answering"] is True
        assert status["model"] == stack.settings.model
        quiet = (await http.get(f"/api/sessions/{idle}/status")).json()
        assert quiet["phase"] == "idle" and quiet["worker_answering"] is None
        steered = await http.post(f"/api/sessions/{busy}/steer", json={"text": "use pathlib"})
        assert steered.status_code == 200 and steered.json()["id"]
        later = await http.post(f"/api/sessions/{busy}/follow-up", json={"text": "add tests"})
        assert later.status_code == 200
        refused = await http.post(f"/api/sessions/{idle}/steer", json={"text": "x"})
        assert refused.status_code == 409 and "no run in progress" in refused.json()["detail"]
        too_big = await http.post(
            f"/api/sessions/{busy}/steer", json={"text": "x" * (MAX_INPUT_BYTES + 1)}
        )
        assert too_big.status_code == 413 and "the limit is" in too_big.text
        stack.model.release("go")
        await eventually(lambda: run_finished(stack, busy))
    sent = str(stack.model.requests_for(busy)[1].body["messages"])
    assert "use pathlib" in sent
    assert "add tests" in str(stack.model.requests_for(busy)[2].body["messages"])


@pytest.mark.script(GATED_THEN_REPLIES)
async def test_a_worker_that_is_down_is_reported(stack: Stack, api: ApiServer) -> None:
    worker = stack.spawn_worker()
    async with api.client() as http:
        session = await new_session(http)
        await http.post(f"/api/sessions/{session}/input", json={"text": "go"})
        await eventually(lambda: len(stack.model.requests_for(session)) == 1, timeout=30)
        stack.kill(worker)
        status = (await http.get(f"/api/sessions/{session}/status")).json()
        assert status["phase"] != "idle" and status["worker_answering"] is False
        async with stack.worker():
            stack.model.release("go")
            await eventually(lambda: run_finished(stack, session), timeout=30)


async def test_rename_and_the_rules_it_names(stack: Stack, api: ApiServer) -> None:
    async with stack.worker(), api.client() as http, api.client(ApiServer.OTHER_TOKEN) as bob:
        session = await new_session(http, "old")
        renamed = await http.patch(f"/api/sessions/{session}", json={"name": "  new name "})
        assert renamed.status_code == 200 and renamed.json()["name"] == "new name"
        blank = await http.patch(f"/api/sessions/{session}", json={"name": "   "})
        assert blank.status_code == 422 and "white space" in blank.text
        long = await http.patch(f"/api/sessions/{session}", json={"name": "n" * 201})
        assert long.status_code == 422 and "200" in long.text
        theirs = await bob.patch(f"/api/sessions/{session}", json={"name": "mine"})
        assert theirs.status_code == 404
    assert (await stack.client.sessions.get(session)).name == "new name"


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"text": "first answer"}]},
                {"reply": [{"text": "second answer"}]},
            ]
        }
    }
)
async def test_tree_goto_fork_and_labels(stack: Stack, api: ApiServer) -> None:
    async with stack.worker(), api.client() as http, api.client(ApiServer.OTHER_TOKEN) as bob:
        session = await new_session(http, "t")
        for runs, text in enumerate(("first question", "second question"), start=1):
            await http.post(f"/api/sessions/{session}/input", json={"text": text})

            def ran(n: int = runs) -> bool:
                return len(stack.client.sync.runs.list(session)) == n and run_finished(
                    stack, session
                )

            await eventually(ran)
        tree = (await http.get(f"/api/sessions/{session}/tree")).json()
        users = [n for n in tree["nodes"] if n["kind"] == "user"]
        assert [n["preview"] for n in users] == ["first question", "second question"]
        assert [n["preview"] for n in tree["nodes"] if n["is_leaf"]] == ["second answer"]
        went = await http.post(f"/api/sessions/{session}/goto", json={"entry_id": users[1]["id"]})
        assert went.status_code == 200 and went.json()["edit_text"] == "second question"
        labelled = await http.put(
            f"/api/sessions/{session}/labels/{users[0]['id']}", json={"label": "start"}
        )
        assert labelled.status_code == 204
        tree = (await http.get(f"/api/sessions/{session}/tree")).json()
        assert [n["label"] for n in tree["nodes"] if n["id"] == users[0]["id"]] == ["start"]
        assert [n["preview"] for n in tree["nodes"] if n["is_leaf"]] == ["first answer"]
        forked = await http.post(f"/api/sessions/{session}/fork", json={"entry_id": users[0]["id"]})
        assert forked.status_code == 201 and forked.json()["name"] == "t (fork)"
        assert forked.json()["owner"] == "alice"
        # Entries and sessions of others are not found, whichever way they are named.
        other = await new_session(bob, "b")
        for response in (
            await http.post(f"/api/sessions/{session}/goto", json={"entry_id": "nope"}),
            await http.post(f"/api/sessions/{session}/fork", json={"entry_id": "nope"}),
            await http.put(f"/api/sessions/{session}/labels/nope", json={"label": "x"}),
            await http.get(f"/api/sessions/{other}/tree"),
            await http.get(f"/api/sessions/{other}/compactions"),
            await bob.post(f"/api/sessions/{session}/fork", json={"entry_id": users[0]["id"]}),
        ):
            assert response.status_code == 404, response.text
        too_long = await http.put(
            f"/api/sessions/{session}/labels/{users[0]['id']}", json={"label": "l" * 101}
        )
        assert too_long.status_code == 422


async def test_the_page_is_served_without_a_token_and_the_api_needs_one(api: ApiServer) -> None:
    async with api.client(token=None) as http:
        page = await http.get("/")
        assert page.status_code == 200 and '<script type="module"' in page.text
        assert (await http.get("/web/app.css")).status_code == 200
        assert (
            await http.get(f"/api/session-summaries?token={ApiServer.TOKEN}")
        ).status_code == 401


@pytest.mark.script({"conversations": {"*": [{"reply": [{"text": "named"}]}]}})
async def test_a_new_session_is_named_after_its_first_prompt(stack: Stack, api: ApiServer) -> None:
    async with stack.worker(), api.client() as http:
        created = await http.post("/api/sessions", json={})
        session = created.json()["session"]["id"]
        sent = await http.post(
            f"/api/sessions/{session}/input", json={"text": "  \n Fix the  parser\nnow"}
        )
        assert sent.status_code == 200, sent.text
        state = await http.get(f"/api/sessions/{session}/state")
        assert state.status_code == 200, state.text
        await eventually(lambda: run_finished(stack, session))
        state = await http.get(f"/api/sessions/{session}/state")
        assert state.status_code == 200, state.text
        assert state.json()["run"]["latest"]["status"] == "completed"
        assert (await stack.client.sessions.get(session)).name == "Fix the parser"
        later = await http.get(f"/api/sessions/{session}/state?messages_after=0&events_after=3")
        assert later.status_code == 200, later.text
