"""Schedules end to end: the HTTP API and the command line over the real dev server (its
Temporal Schedules fire), a worker, the store and the offline model.

A schedule fires on a short interval into an idle session (a run starts, marked as
scheduled), is paused, then resumed while the session is busy (the prompt waits and starts
the next run when the open one ends); `skip` and `new_session` are checked by triggering.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support import BOTH_STORES, ApiServer, Stack, eventually, run_finished, user_texts

Json = dict[str, Any]

SCRIPT = {
    "conversations": {
        "*": [
            # Every scheduled prompt ("tick") gets "tock", however many fire.
            {"match": "^tick", "repeat": True, "reply": [{"text": "tock"}]},
            # A person's prompt keeps the session busy until the test lets it go.
            {"match": "^work", "wait_for": "go", "reply": [{"text": "worked"}]},
        ]
    }
}
EVERY_S = 2


async def new_session(http: Any, name: str = "s") -> str:
    created = await http.post("/api/sessions", json={"name": name})
    assert created.status_code == 201, created.text
    return str(created.json()["session"]["id"])


async def messages(http: Any, session: str) -> list[Json]:
    state = (await http.get(f"/api/sessions/{session}/state")).json()
    return [m["message"] for m in state["messages"]]


def scheduled_texts(shown: list[Json], schedule_id: str) -> list[str]:
    return [
        " ".join(b["text"] for b in m["content"] if b["type"] == "text")
        for m in shown
        if m["role"] == "user" and (m.get("scheduled") or {}).get("schedule_id") == schedule_id
    ]


async def fired(http: Any, schedule_id: str, count: int) -> list[Json]:
    """The schedule's recent firings, once `count` of them are done (with outcomes)."""
    view: Json = {}

    async def done() -> bool:
        nonlocal view
        view = (await http.get(f"/api/schedules/{schedule_id}")).json()
        return len(view["recent"]) >= count and all(f["outcome"] for f in view["recent"])

    await eventually(done, timeout=30)
    return list(view["recent"])


@BOTH_STORES
@pytest.mark.script(SCRIPT)
async def test_a_schedule_fires_into_an_idle_then_a_busy_session_paused_and_resumed(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http)
        made = await http.post(
            f"/api/sessions/{session}/schedules",
            json={"prompt": "tick", "every": f"{EVERY_S}s"},
        )
        assert made.status_code == 201, made.text
        schedule = made.json()
        sid = schedule["id"]
        assert (schedule["every"], schedule["busy"], schedule["paused"]) == ("2s", "queue", False)
        # Missed firings run late within the catch-up window the settings give.
        assert schedule["catchup_window_s"] == stack.settings.schedule_catchup_window_s == 3600
        try:
            # Idle: the firing starts a run of its own.
            await eventually(lambda: run_finished(stack, session), timeout=30)
            paused = await http.post(f"/api/schedules/{sid}/pause", json={"note": "busy day"})
            assert paused.json()["paused"] is True and paused.json()["note"] == "busy day"
            first = await fired(http, sid, 1)
            assert first[0]["outcome"]["outcome"] == "started"
            runs_before = len(await stack.client.runs.list(session))
            shown = await messages(http, session)
            assert scheduled_texts(shown, sid)[:1] == ["tick"]
            assert any(
                m["role"] == "assistant" and m["content"][0]["text"] == "tock" for m in shown
            )

            # Paused: nothing fires for a few intervals (an absence: only time shows it).
            count = len((await http.get(f"/api/schedules/{sid}")).json()["recent"])
            await asyncio.sleep(2.5 * EVERY_S)
            assert len((await http.get(f"/api/schedules/{sid}")).json()["recent"]) == count
            assert len(await stack.client.runs.list(session)) == runs_before

            # Busy: a person's run waits on the model; the resumed schedule's firing waits
            # in the queue and starts the next run when that one ends.
            sent = await http.post(f"/api/sessions/{session}/input", json={"text": "work"})
            assert sent.json()["action"] == "started"
            busy_run = sent.json()["run_id"]
            await eventually(
                lambda: any(
                    user_texts(r.body)[-1:] == ["work"] for r in stack.model.requests_for(session)
                )
            )
            resumed = await http.post(f"/api/schedules/{sid}/resume")
            assert resumed.json()["paused"] is False
            recent = await fired(http, sid, count + 1)
            queued = recent[count]["outcome"]
            assert queued == {
                "outcome": "queued",
                "session_id": session,
                "run_id": None,
                "detail": "it starts the next run when the open one ends",
            }
            await http.post(f"/api/schedules/{sid}/pause")
            stack.model.release("go")
            await eventually(lambda: len(stack.client.sync.runs.list(session)) == runs_before + 2)
            await eventually(lambda: run_finished(stack, session), timeout=30)
            record = await stack.client.runs.get(busy_run)
            assert record is not None and record.status == "completed"
            # The next run, started for the firing's prompt, after the busy run's answer.
            runs = await stack.client.runs.list(session)
            assert (runs[0].kind, runs[0].status) == ("queued", "completed")
            last_request = stack.model.requests_for(session)[-1]
            assert user_texts(last_request.body)[-2:] == ["work", "tick"]
            shown = await messages(http, session)
            texts = [(m["role"], " ".join(b.get("text", "") for b in m["content"])) for m in shown]
            assert texts[-4:] == [
                ("user", "work"),
                ("assistant", "worked"),
                ("user", "tick"),
                ("assistant", "tock"),
            ]
            assert shown[-2]["scheduled"]["schedule_id"] == sid
            assert "scheduled" not in shown[-4]

            # Its list, and another user's view of it: not found.
            listed = (await http.get(f"/api/sessions/{session}/schedules")).json()
            assert [s["id"] for s in listed] == [sid]
            assert [s["id"] for s in (await http.get("/api/schedules")).json()] == [sid]
            async with api.client(ApiServer.OTHER_TOKEN) as bob:
                for method, path in (
                    ("GET", f"/api/schedules/{sid}"),
                    ("POST", f"/api/schedules/{sid}/resume"),
                    ("POST", f"/api/schedules/{sid}/trigger"),
                    ("DELETE", f"/api/schedules/{sid}"),
                ):
                    assert (await bob.request(method, path)).status_code == 404
                assert (await bob.get("/api/schedules")).json() == []
                refused = await bob.post(
                    f"/api/sessions/{session}/schedules", json={"prompt": "x", "every": "1h"}
                )
                assert refused.status_code == 404
        finally:
            await http.delete(f"/api/schedules/{sid}")

    # `duragent history` marks the scheduled run, and the run the queued firing started.
    out = await stack.cli_ok("history", session)
    assert f'(prompt): "tick" (scheduled: {sid})' in out
    assert "input queued meanwhile starts run" in out
    assert "(queued): the input queued while the previous run was open (after " in out


@pytest.mark.script(SCRIPT)
async def test_skip_and_new_session_when_busy_and_bad_schedules(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http, "template")
        sent = await http.post(f"/api/sessions/{session}/input", json={"text": "work"})
        busy_run = sent.json()["run_id"]
        made: dict[str, str] = {}
        for busy in ("skip", "new_session"):
            response = await http.post(
                f"/api/sessions/{session}/schedules",
                json={
                    "prompt": "tick",
                    "cron": ["0 9 * * 1-5"],
                    "timezone": "Europe/Paris",
                    "busy": busy,
                },
            )
            assert response.status_code == 201, response.text
            assert response.json()["cron"] == ["0 9 * * 1-5"]
            made[busy] = response.json()["id"]
        try:
            await eventually(lambda: len(stack.model.requests_for(session)) == 1)
            for sid in made.values():
                assert (await http.post(f"/api/schedules/{sid}/trigger")).status_code == 200
            skipped = (await fired(http, made["skip"], 1))[0]["outcome"]
            assert skipped["outcome"] == "skipped" and skipped["session_id"] == session
            started = (await fired(http, made["new_session"], 1))[0]["outcome"]
            assert started["outcome"] == "started" and started["session_id"] != session
            other = started["session_id"]
            await eventually(lambda: run_finished(stack, other), timeout=30)
            shown = await messages(http, other)
            assert scheduled_texts(shown, made["new_session"]) == ["tick"]
            assert (await http.get(f"/api/sessions/{other}")).status_code == 200  # alice's
            template = await stack.client.sessions.get(session)
            copy = await stack.client.sessions.get(other)
            assert (copy.workspace, copy.config) == (template.workspace, template.config)
            # The busy run saw nothing of either.
            stack.model.release("go")
            await eventually(lambda: run_finished(stack, session), timeout=30)
            assert [r.run_id for r in await stack.client.runs.list(session)] == [busy_run]
            assert scheduled_texts(await messages(http, session), made["skip"]) == []
        finally:
            for sid in made.values():
                assert (await http.delete(f"/api/schedules/{sid}")).status_code == 204
        assert (await http.get(f"/api/sessions/{session}/schedules")).json() == []
        assert (await http.post(f"/api/schedules/{made['skip']}/trigger")).status_code == 404

        # Bad schedules: refused, naming what was wrong, and nothing made.
        for body, says in (
            ({"prompt": "x", "every": "1 hour"}, "--every"),
            ({"prompt": "x", "every": "0s"}, "between 1s and 366d"),
            ({"prompt": "x", "every": "30m1h"}, "largest first"),
            ({"prompt": "x"}, "cron expressions or --every"),
            ({"prompt": "x", "every": "1h", "cron": ["* * * * *"]}, "one of them"),
            ({"prompt": "x", "every": "1h", "timezone": "Mars/Olympus"}, "time zone"),
            ({"prompt": "x", "cron": ["not a cron"]}, "has 3 fields; a cron expression has 5"),
            ({"prompt": "x", "cron": ["0 25 * * *"]}, "the hour field '25' is not from 0 to 23"),
            ({"prompt": " ", "every": "1h"}, "empty"),
        ):
            refused = await http.post(f"/api/sessions/{session}/schedules", json=body)
            assert refused.status_code == 422, (body, refused.text)
            assert says in refused.text, (body, refused.text)
        too_big = await http.post(
            f"/api/sessions/{session}/schedules", json={"prompt": "x" * 300_000, "every": "1h"}
        )
        assert too_big.status_code == 413
        assert (await http.get(f"/api/sessions/{session}/schedules")).json() == []


async def test_the_schedule_commands(stack: Stack) -> None:
    session = (await stack.client.sessions.create(name="cli")).id
    out = await stack.cli_ok("schedule", "add", session, "tick", "--every", "1h30m", "--paused")
    sid = out.split()[1]
    assert "paused  every 1h30m" in out
    listed = await stack.cli_ok("schedule", "list", session)
    assert sid in listed and "busy: queue" in listed
    assert "active" in await stack.cli_ok("schedule", "resume", sid)
    assert "paused" in await stack.cli_ok("schedule", "pause", sid, "--note", "later")
    code, _, err = await stack.cli("schedule", "add", session, "tick", "--every", "soon")
    assert code == 2 and "--every 'soon'" in err
    code, _, err = await stack.cli(
        "schedule", "add", session, "tick", "--every", "1h", "--busy", "wait"
    )
    assert code == 2 and "--busy 'wait'" in err
    assert "deleted" in await stack.cli_ok("schedule", "delete", sid)
    assert "no schedules" in await stack.cli_ok("schedule", "list", session)
    code, _, err = await stack.cli("schedule", "pause", sid)
    assert code == 2 and "does not exist" in err


CRON_FORMS = [
    "0 9 * * 1-5",
    "*/15 * * * *",
    "1-5/2,8 0 * jan-mar mon",
    "0 0 * * * 2030",
    "30 0 0 1 * * *",
    "@hourly",
    "@daily",
    "@weekly",
    "@monthly",
    "@yearly",
    "@every 1h30m",
    "0 9 * * 1-5 # mornings",
]


async def test_every_cron_form_the_check_takes_is_one_temporal_takes(
    stack: Stack, api: ApiServer
) -> None:
    """What `check_cron` (and the page's Schedules form) lets through, Temporal makes."""
    async with api.client() as http:
        session = await new_session(http)
        for expression in CRON_FORMS:
            made = await http.post(
                f"/api/sessions/{session}/schedules",
                json={"prompt": "tick", "cron": [expression], "paused": True},
            )
            assert made.status_code == 201, (expression, made.text)
            assert made.json()["cron"] == [expression]
            assert (await http.delete(f"/api/schedules/{made.json()['id']}")).status_code == 204
