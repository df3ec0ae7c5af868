"""Cursors and pages over HTTP: per-session numbers, validated cursors, bounded pages.

Bulk content is written through the store (as workers write it), so a test can hold
more than a page without running hundreds of turns; the runs here are real.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from support import BOTH_STORES, ApiServer, Stack, eventually, run_finished

from duragent.domain.events import ToolExecutionUpdate, TurnStart
from duragent.domain.messages import user_text
from duragent.store import display, events
from duragent.store.paging import PAGE_BYTES

Json = dict[str, Any]
CURSOR_MAX = 2**53 - 1
NOT_CURSORS = [str(2**63), str(2**53), "-5", "abc", "1e3", ""]
ONE_REPLY = {"conversations": {"*": [{"reply": [{"text": "hi"}]}]}}


async def new_session(http: Any) -> str:
    created = await http.post("/api/sessions", json={"name": "s"})
    assert created.status_code == 201, created.text
    return str(created.json()["session"]["id"])


def add_messages(stack: Stack, session: str, texts: list[str]) -> None:
    with stack.db.transaction() as db:
        display.append_display(
            db, session, None, [(f"{session}-{text[:12]}", user_text(text, 0)) for text in texts]
        )


def add_events(stack: Stack, session: str, turns: range) -> None:
    with stack.db.transaction() as db:
        events.append_events(db, session, "r", [TurnStart(turn=turn) for turn in turns])


async def sse_ids(stream: Any, until: str) -> list[tuple[int, str]]:
    """(id, type) of each event read from an open SSE response, up to the `until` type."""
    seen: list[tuple[int, str]] = []
    event_id = 0
    async for line in stream.aiter_lines():
        if line.startswith("id: "):
            event_id = int(line[4:])
        elif line.startswith("event: "):
            seen.append((event_id, line[7:]))
            if line[7:] == until:
                return seen
    raise AssertionError(f"the stream ended before {until}")


async def test_a_cursor_outside_0_to_2_53_is_refused_with_the_rule(
    stack: Stack, api: ApiServer
) -> None:
    async with api.client() as http:
        session = await new_session(http)
        base = f"/api/sessions/{session}"
        for path, parameter in (
            ("state", "messages_after"),
            ("state", "events_after"),
            ("messages", "before"),
            ("events", "after"),
        ):
            for value in NOT_CURSORS:
                response = await http.get(f"{base}/{path}", params={parameter: value})
                assert response.status_code == 422, (path, parameter, value, response.text)
                (error,) = response.json()["detail"]
                assert error["loc"] == ["query", parameter]
                assert f"integer from 0 to {CURSOR_MAX}" in error["msg"]
        for value in NOT_CURSORS:
            response = await http.get(f"{base}/events", headers={"Last-Event-ID": value})
            assert response.status_code == 422, (value, response.text)
            (error,) = response.json()["detail"]
            assert error["loc"] == ["header", "last-event-id"]
            assert f"integer from 0 to {CURSOR_MAX}" in error["msg"]
        # The largest cursor is fine: nothing after it yet.
        edge = str(CURSOR_MAX)
        state = await http.get(
            f"{base}/state", params={"messages_after": edge, "events_after": edge}
        )
        assert state.status_code == 200, state.text
        assert state.json()["messages_cursor"] == CURSOR_MAX
        assert (await http.get(f"{base}/messages", params={"before": edge})).status_code == 200
        async with http.stream("GET", f"{base}/events", headers={"Last-Event-ID": edge}) as stream:
            assert stream.status_code == 200
        for path, parameter, limit in (
            ("state", "messages_limit", 0),
            ("state", "messages_limit", 501),
            ("state", "events_limit", 2001),
            ("messages", "limit", 501),
        ):
            response = await http.get(f"{base}/{path}", params={parameter: limit})
            assert response.status_code == 422
            assert response.json()["detail"][0]["loc"] == ["query", parameter]


@BOTH_STORES
@pytest.mark.script(ONE_REPLY)
async def test_a_second_users_session_numbers_from_one(stack: Stack, api: ApiServer) -> None:
    """Cursors tell a user nothing about anyone else's activity."""
    async with stack.worker(), api.client() as alice, api.client(ApiServer.OTHER_TOKEN) as bob:
        busy = [await new_session(alice), await new_session(alice)]
        for session in busy:
            await alice.post(f"/api/sessions/{session}/input", json={"text": "hello"})
            await eventually(functools.partial(run_finished, stack, session))
            add_events(stack, session, range(300))
            add_messages(stack, session, [f"busy {n}" for n in range(50)])
        mine = await new_session(bob)
        await bob.post(f"/api/sessions/{mine}/input", json={"text": "hello"})
        await eventually(lambda: run_finished(stack, mine))
        state = (await bob.get(f"/api/sessions/{mine}/state")).json()
        event_seqs = [e["seq"] for e in state["activity_events"]]
        assert event_seqs == list(range(1, len(event_seqs) + 1)) and len(event_seqs) > 3
        assert [m["seq"] for m in state["messages"]] == [1, 2]
        assert state["events_cursor"] == event_seqs[-1] and state["messages_cursor"] == 2
        async with bob.stream("GET", f"/api/sessions/{mine}/events") as stream:
            streamed = await sse_ids(stream, "agent_end")
        assert [seq for seq, _ in streamed] == event_seqs


@BOTH_STORES
@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"tool_use": {"name": "bash", "input": {"command": "echo one"}}}]},
                {"wait_for": "go", "reply": [{"text": "done"}]},
            ]
        }
    }
)
async def test_the_event_stream_resumes_from_last_event_id_without_gaps_or_doubles(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as http:
        other = await new_session(http)
        add_events(stack, other, range(100))  # another session's events never show
        session = await new_session(http)
        await http.post(f"/api/sessions/{session}/input", json={"text": "go"})
        url = f"/api/sessions/{session}/events"
        async with http.stream("GET", url) as stream:
            before = await sse_ids(stream, "tool_execution_end")
        # Disconnected while the run goes on: what it writes meanwhile comes on resume.
        stack.model.release("go")
        await eventually(lambda: run_finished(stack, session))
        async with http.stream("GET", url, headers={"Last-Event-ID": str(before[-1][0])}) as stream:
            after = await sse_ids(stream, "agent_end")
    seen = before + after
    with stack.db.transaction() as db:
        stored = events.read_events(db, session, limit=2000)
    assert [seq for seq, _ in seen] == list(range(1, len(seen) + 1))
    assert seen == [(e.seq, e.type) for e in stored]


def seqs(items: list[Json]) -> list[int]:
    return [item["seq"] for item in items]


@BOTH_STORES
async def test_state_opens_on_the_newest_page_and_pages_see_every_item_once(
    stack: Stack, api: ApiServer
) -> None:
    async with api.client() as http:
        session = await new_session(http)
        base = f"/api/sessions/{session}"
        add_messages(stack, session, [f"message {n:04}" for n in range(1, 451)])
        add_events(stack, session, range(1, 1201))
        opened = (await http.get(f"{base}/state")).json()
        assert seqs(opened["messages"]) == list(range(251, 451))  # the latest 200
        assert opened["messages_earlier"] and not opened["messages_more"]
        assert seqs(opened["activity_events"]) == list(range(701, 1201))  # the latest 500
        assert not opened["events_more"]
        assert (opened["messages_cursor"], opened["events_cursor"]) == (450, 1200)
        messages = opened["messages"]
        activity = opened["activity_events"]

        # Back through the history, a page at a time.
        earlier, first = opened["messages_earlier"], messages[0]["seq"]
        while earlier:
            page = (await http.get(f"{base}/messages", params={"before": first})).json()
            assert len(page["messages"]) <= 200
            messages = page["messages"] + messages
            earlier, first = page["earlier"], page["messages"][0]["seq"]

        # Meanwhile the session goes on; follow it from the cursors.
        add_messages(stack, session, [f"message {n:04}" for n in range(451, 751)])
        add_events(stack, session, range(1201, 1901))
        state = opened
        while True:
            state = (
                await http.get(
                    f"{base}/state",
                    params={
                        "messages_after": state["messages_cursor"],
                        "events_after": state["events_cursor"],
                    },
                )
            ).json()
            assert len(state["messages"]) <= 200 and len(state["activity_events"]) <= 500
            assert state["messages_earlier"]
            messages += state["messages"]
            activity += state["activity_events"]
            if not (state["messages_more"] or state["events_more"]):
                break
        assert seqs(messages) == list(range(1, 751))
        assert [m["message"]["content"][0]["text"] for m in messages] == [
            f"message {n:04}" for n in range(1, 751)
        ]
        assert seqs(activity) == list(range(701, 1901))
        assert [e["payload"]["turn"] for e in activity] == list(range(701, 1901))

        # Every event, from the start.
        cursor, everything = 0, []
        while True:
            page = (
                await http.get(
                    f"{base}/state", params={"events_after": cursor, "events_limit": 2000}
                )
            ).json()
            everything += page["activity_events"]
            cursor = page["events_cursor"]
            if not page["events_more"]:
                break
        assert seqs(everything) == list(range(1, 1901))


def size(items: list[Json]) -> int:
    return len(json.dumps(items, separators=(",", ":")).encode())


@BOTH_STORES
async def test_pages_stay_within_the_byte_bound_with_large_messages(
    stack: Stack, api: ApiServer
) -> None:
    async with api.client() as http:
        session = await new_session(http)
        base = f"/api/sessions/{session}"
        texts = [f"{n:03} " + "x" * 300_000 for n in range(12)]
        texts.insert(6, "big " + "y" * 1_500_000)  # larger than a page: a page of its own
        add_messages(stack, session, texts)
        with stack.db.transaction() as db:
            updates = [
                ToolExecutionUpdate(tool_call_id=f"c{n}", tool_name="bash", partial="z" * 200_000)
                for n in range(20)
            ]
            events.append_events(db, session, "r", updates)

        response = await http.get(f"{base}/state")
        assert len(response.content) < 2 * PAGE_BYTES + 50_000
        state = response.json()
        assert 1 <= len(state["messages"]) < 13 and state["messages_earlier"]
        assert size(state["messages"]) <= PAGE_BYTES
        assert 1 <= len(state["activity_events"]) < 20
        assert size(state["activity_events"]) <= PAGE_BYTES

        pages = [state["messages"]]
        while True:
            first = pages[0][0]["seq"]
            page = (await http.get(f"{base}/messages", params={"before": first})).json()
            pages.insert(0, page["messages"])
            if not page["earlier"]:
                break
        for page in pages:
            assert len(page) == 1 or size(page) <= PAGE_BYTES
        assert [m["message"]["content"][0]["text"] for page in pages for m in page] == texts
        (big,) = [page for page in pages if any(m["seq"] == 7 for m in page)]
        assert len(big) == 1

        cursor, activity = 0, []
        while True:
            state = (await http.get(f"{base}/state", params={"events_after": cursor})).json()
            assert size(state["activity_events"]) <= PAGE_BYTES
            activity += state["activity_events"]
            cursor = state["events_cursor"]
            if not state["events_more"]:
                break
        assert seqs(activity) == list(range(1, 21))
