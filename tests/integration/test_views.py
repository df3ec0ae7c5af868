"""What the command line and the API show of a session is what the session is: its tree
past a label, the model it was configured with, the times an import keeps."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from support import ApiServer, Stack

from duragent.domain.entries import MessageEntry

TWO_ANSWERS = {
    "conversations": {
        "*": [{"reply": [{"text": "first answer"}]}, {"reply": [{"text": "second answer"}]}]
    }
}


@pytest.mark.script(TWO_ANSWERS)
async def test_tree_shows_what_follows_a_label_and_marks_the_leaf(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        await (await stack.client.runs.prompt(session.id, "first question")).result()
        question, answer = (e.id[:12] for e in await stack.client.tree.path(session.id))
        # The label entry goes below the leaf, and the next run's prompt below it.
        assert await stack.cli_ok("label", session.id, question, "start") == "labelled\n"
        assert (await stack.cli_ok("tree", session.id)).splitlines() == [
            f"{question} user: first question [start]",
            f"{answer} assistant: first answer <- leaf",
        ]
        await (await stack.client.runs.prompt(session.id, "second question")).result()
    again, reply = (
        e.id[:12]
        for e in (await stack.client.tree.path(session.id))[-2:]
        if isinstance(e, MessageEntry)
    )
    assert (await stack.cli_ok("tree", session.id)).splitlines() == [
        f"{question} user: first question [start]",
        f"{answer} assistant: first answer",
        f"{again} user: second question",
        f"{reply} assistant: second answer <- leaf",
    ]


async def test_a_configured_model_shows_in_the_list_the_header_and_the_export(
    stack: Stack,
) -> None:
    session = await stack.client.sessions.create(name="configured")
    first = session.config.model
    async with stack.worker():
        configured = await stack.cli_ok("configure", session.id, "--model", "claude-other-9")
    assert configured.startswith("model claude-other-9,")
    row = next(line for line in (await stack.cli_ok("sessions")).splitlines() if session.id in line)
    assert "claude-other-9" in row and first not in row, row
    header = (await stack.cli_ok("show", session.id)).splitlines()[1]
    assert header.endswith("model claude-other-9"), header
    exported = await stack.cli_ok("export", session.id)
    assert json.loads(exported.splitlines()[0])["session"]["config"]["model"] == "claude-other-9"


@pytest.mark.script(TWO_ANSWERS)
async def test_an_import_keeping_ids_keeps_the_creation_times(
    stack: Stack, stack_factory: Callable[..., Any]
) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        await (await stack.client.runs.prompt(session.id, "first question")).result()
    exported = await stack.cli_ok("export", session.id)
    lines = [json.loads(line) for line in exported.splitlines()]
    assert lines[0]["session"]["created_at"] == session.created_at
    times = {line["id"]: line["timestamp"] for line in lines[1:]}
    async with stack_factory(TWO_ANSWERS) as there:  # another deployment's store
        file = there.settings.home / "moved.jsonl"
        file.write_text(exported)
        imported = await there.cli_ok("import", str(file), "--keep-ids")
        assert imported.endswith(f"entries: {session.id}\n"), imported
        again = json.loads((await there.cli_ok("export", session.id)).splitlines()[0])
        assert again["session"]["created_at"] == session.created_at
        api = ApiServer(there)
        await api.start()
        try:
            async with api.client(ApiServer.OPERATOR_TOKEN) as http:
                found = (await http.get(f"/api/sessions/{session.id}")).json()["session"]
                shown = (await http.get(f"/api/sessions/{session.id}/messages")).json()
        finally:
            await api.stop()
    assert found["created_at"] == session.created_at
    messages = shown["messages"]
    assert len(messages) == 2
    assert [m["created_at"] for m in messages] == [times[m["id"]] for m in messages]
