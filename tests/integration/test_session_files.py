"""Portable sessions: `duragent export` and `import` (and their HTTP routes) move a whole
session tree to another deployment, where the model's next request is the same; pi's
session files import; bad files are refused by line, with nothing stored."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from support import BOTH_STORES, ApiServer, Stack, eventually, run_finished

from duragent.api.app import MAX_BODY_BYTES
from duragent.client.errors import IdsInUse
from duragent.domain.compaction import CompactionSettings
from duragent.domain.config import SessionConfig
from duragent.domain.entries import MessageEntry
from duragent.domain.messages import ToolResultMessage, UserMessage, text_of
from duragent.domain.session_file import read_session_file, stored_entries
from duragent.domain.session_file_checks import MAX_FILE_BYTES, SessionFileRefused
from duragent.store.session_files import IdsTaken, store_imported
from duragent.store.tables import DisplayMessageRow, EntryRow, SessionRow

BIG = "0123456789 " * 400  # about 4.4 KB, some 1100 tokens
NEXT = {"match": "^next$", "repeat": True, "reply": [{"text": "next answer"}]}
"""The reply to the prompt whose request the tests compare, for any session."""
SOURCE_SCRIPT = {
    "conversations": {
        "*": [
            NEXT,
            {"match": "You are compacting", "reply": [{"text": "## Goal\nRead the parts."}]},
            {"match": "left the following branch", "reply": [{"text": "Tried approach C."}]},
            *(
                {"reply": [{"tool_use": {"name": "read", "input": {"path": f"part{i}.txt"}}}]}
                for i in range(3)
            ),
            {"reply": [{"text": "read them"}]},
            {"reply": [{"thinking": "the parts are alike"}, {"text": "second answer"}]},
            {"reply": [{"text": "third answer"}]},
            {"reply": [{"text": "fourth answer"}]},
        ]
    }
}


async def build_session(stack: Stack) -> str:
    """A session with every kind of entry: tool calls and results, thinking, config
    changes, a compaction, a branch left with a summary, a label and a name."""
    session = (await stack.client.sessions.create(name="original")).id
    workspace = Path((await stack.client.sessions.get(session)).workspace)
    for i in range(3):
        (workspace / f"part{i}.txt").write_text(BIG)
    async with stack.worker():
        await (await stack.client.runs.prompt(session, "read the parts")).result()
        await stack.client.config.set_thinking_level(session, "low")
        await stack.client.config.set_active_tools(session, ["read", "ls", "bash"])
        await (await stack.client.runs.prompt(session, "second")).result()
        compacted = await stack.client.tree.compact(
            session, settings=CompactionSettings(keep_recent_tokens=2000)
        )
        assert compacted.compacted
        await (await stack.client.runs.prompt(session, "approach C")).result()
        third = (await stack.client.tree.path(session))[-2]
        assert isinstance(third, MessageEntry) and isinstance(third.message, UserMessage)
        await stack.client.tree.navigate(session, third.id, summarize=True)
        await (await stack.client.runs.prompt(session, "approach D")).result()
        await stack.client.tree.label(session, third.id, "approach C asked")
        await stack.client.sessions.rename(session, "moved session")
    return session


async def next_request(stack: Stack, session: str) -> dict[str, Any]:
    """The request body the model receives for the session's next turn (prompt `next`)."""
    async with stack.worker():
        await (await stack.client.runs.prompt(session, "next")).result()
    return stack.model.requests_for(session)[-1].body


def without_session(body: dict[str, Any]) -> dict[str, Any]:
    """A request without the one field that names the session (`metadata.user_id`)."""
    return {key: value for key, value in body.items() if key != "metadata"}


def store_counts(stack: Stack) -> tuple[int, int, int]:
    """How many sessions, entries and display messages the store holds."""
    with stack.db.transaction() as db:
        return tuple(  # type: ignore[return-value]
            db.scalar(select(func.count()).select_from(table)) or 0
            for table in (SessionRow, EntryRow, DisplayMessageRow)
        )


@BOTH_STORES
@pytest.mark.script(SOURCE_SCRIPT)
async def test_a_session_moved_to_another_deployment_sends_the_model_the_same_request(
    stack: Stack, stack_factory: Callable[..., Any], api: ApiServer, tmp_path: Path
) -> None:
    session = await build_session(stack)
    file = tmp_path / "session.jsonl"
    file.write_text(await stack.cli_ok("export", session))
    shown = [m.role for m in await stack.client.display.messages(session)]
    spent = (await stack.client.sessions.costs(session)).session
    before = await next_request(stack, session)
    sent = json.dumps(before["messages"])
    assert "was compacted" in sent and "Tried approach C." in sent and "approach D" in sent
    assert "thinking" in before and len(before["tools"]) == 3

    lines = file.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["format"] == "duragent-session" and header["version"] == 1
    assert header["source"]["session_id"] == session
    assert header["session"]["name"] == "moved session" and header["entries"] == len(lines) - 1
    kinds = {json.loads(line)["type"] for line in lines[1:]}
    assert kinds >= {
        "message",
        "thinking_level_change",
        "active_tools_change",
        "compaction",
        "branch_summary",
        "leaf",
        "label",
        "session_info",
    }
    # Nothing of the deployment: no owner, workspace, or token.
    text = file.read_text()
    assert (await stack.client.sessions.get(session)).workspace not in text
    assert ApiServer.TOKEN not in text and '"owner"' not in text

    # Another deployment (its own store and model; the same Temporal server): the ids kept.
    async with stack_factory({"conversations": {"*": [NEXT]}}) as elsewhere:
        out = await elsewhere.cli_ok("import", str(file), "--keep-ids")
        assert out.strip().endswith(session)
        moved = await elsewhere.client.sessions.get(session)
        assert moved.name == "moved session" and moved.leaf_id == header["session"]["leaf_id"]
        assert [m.role for m in await elsewhere.client.display.messages(session)] == shown
        assert (await elsewhere.client.sessions.costs(session)).session.usage == spent.usage
        again = await elsewhere.cli_ok("export", session)
        assert again.splitlines()[1:] == lines[1:]
        # Kept ids are refused where they are taken, and nothing is stored.
        counts = store_counts(elsewhere)
        code, _, err = await elsewhere.cli("import", str(file), "--keep-ids")
        assert code == 2 and f"session {session} exists here already" in err
        assert store_counts(elsewhere) == counts
        after = await next_request(elsewhere, session)
    assert after == before

    # The same deployment, over HTTP: new ids, the same context.
    async with api.client(ApiServer.OPERATOR_TOKEN) as http:
        response = await http.post("/api/sessions/import", content=file.read_bytes())
        assert response.status_code == 201, response.text
        imported = response.json()
        assert imported["entries"] == len(lines) - 1 and imported["format"] == "duragent"
        copy = imported["session"]["id"]
        assert copy != session
        exported = await http.get(f"/api/sessions/{copy}/export")
        assert exported.headers["content-type"] == "application/x-ndjson"
        assert len(exported.text.splitlines()) == len(lines)
    old_ids = {json.loads(line)["id"] for line in lines[1:]}
    assert old_ids.isdisjoint(e.id for e in await stack.client.tree.entries(copy))
    assert list((await stack.client.tree.labels(copy)).values()) == ["approach C asked"]
    assert (await stack.client.sessions.costs(copy)).session.usage == spent.usage
    assert without_session(await next_request(stack, copy)) == without_session(before)


PI_SESSION: list[dict[str, Any]] = [
    {
        "type": "session",
        "version": 3,
        "id": "0c9a6b7e-5f1d-4c39-9f0e-2b8f3d1f7a10",
        "timestamp": "2026-11-30T10:00:00.000Z",
        "cwd": "/home/someone/project",
    },
    {
        "type": "model_change",
        "id": "a0000001",
        "parentId": None,
        "timestamp": "2026-11-30T10:00:00.100Z",
        "provider": "anthropic",
        "modelId": "claude-haiku-4-5",
    },
    {
        "type": "thinking_level_change",
        "id": "a0000002",
        "parentId": "a0000001",
        "timestamp": "2026-11-30T10:00:00.200Z",
        "thinkingLevel": "xhigh",
    },
    {
        "type": "message",
        "id": "a0000003",
        "parentId": "a0000002",
        "timestamp": "2026-11-30T10:00:01.000Z",
        "message": {"role": "user", "content": "list the files", "timestamp": 1796032801000},
    },
    {
        "type": "message",
        "id": "a0000004",
        "parentId": "a0000003",
        "timestamp": "2026-11-30T10:00:02.000Z",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "ls it", "thinkingSignature": "sig-1"},
                {"type": "toolCall", "id": "call|42", "name": "ls", "arguments": {"path": "."}},
            ],
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": "claude-haiku-4-5",
            "usage": {
                "input": 120,
                "output": 30,
                "cacheRead": 0,
                "cacheWrite": 0,
                "totalTokens": 150,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
            },
            "stopReason": "toolUse",
            "timestamp": 1796032802000,
        },
    },
    {
        "type": "message",
        "id": "a0000005",
        "parentId": "a0000004",
        "timestamp": "2026-11-30T10:00:03.000Z",
        "message": {
            "role": "toolResult",
            "toolCallId": "call|42",
            "toolName": "ls",
            "content": [{"type": "text", "text": "README.md\nsrc/"}],
            "isError": False,
            "timestamp": 1796032803000,
        },
    },
    {
        "type": "message",
        "id": "a0000006",
        "parentId": "a0000005",
        "timestamp": "2026-11-30T10:00:04.000Z",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": "A README and src/."}],
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": "claude-haiku-4-5",
            "usage": {"input": 200, "output": 10, "cacheRead": 0, "cacheWrite": 0},
            "stopReason": "stop",
            "timestamp": 1796032804000,
        },
    },
    # A branch left behind: the model must not see it.
    {
        "type": "message",
        "id": "b0000001",
        "parentId": "a0000006",
        "timestamp": "2026-11-30T10:01:00.000Z",
        "message": {"role": "user", "content": "delete src", "timestamp": 1796032860000},
    },
    {
        "type": "branch_summary",
        "id": "a0000007",
        "parentId": "a0000006",
        "timestamp": "2026-11-30T10:02:00.000Z",
        "fromId": "b0000001",
        "summary": "The user thought about deleting src, then did not.",
    },
    {
        "type": "message",
        "id": "a0000008",
        "parentId": "a0000007",
        "timestamp": "2026-11-30T10:02:01.000Z",
        "message": {
            "role": "bashExecution",
            "command": "git status",
            "output": "nothing to commit",
            "exitCode": 0,
            "cancelled": False,
            "truncated": False,
            "timestamp": 1796032921000,
        },
    },
    {
        "type": "custom_message",
        "id": "a0000009",
        "parentId": "a0000008",
        "timestamp": "2026-11-30T10:02:02.000Z",
        "customType": "note",
        "content": "Remember: the tests live in src/tests.",
        "display": True,
    },
    {
        "type": "active_tools_change",
        "id": "a000000a",
        "parentId": "a0000009",
        "timestamp": "2026-11-30T10:02:03.000Z",
        "activeToolNames": ["ls", "read"],
    },
    {
        "type": "label",
        "id": "a000000b",
        "parentId": "a000000a",
        "timestamp": "2026-11-30T10:02:04.000Z",
        "targetId": "a0000003",
        "label": "the start",
    },
    {
        "type": "session_info",
        "id": "a000000c",
        "parentId": "a000000b",
        "timestamp": "2026-11-30T10:02:05.000Z",
        "name": "pi's session",
    },
]


def jsonl(lines: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(line) + "\n" for line in lines)


@pytest.mark.script({"conversations": {"*": [NEXT]}})
async def test_a_pi_session_file_imports_and_the_model_reads_its_branch(
    stack: Stack, tmp_path: Path
) -> None:
    file = tmp_path / "pi.jsonl"
    file.write_text(jsonl(PI_SESSION))
    out = await stack.cli_ok("import", str(file))
    assert out.startswith("imported pi session with 13 entries")
    session = out.split()[-1]
    record = await stack.client.sessions.get(session)
    assert record.name == "pi's session" and record.leaf_id is not None
    assert list((await stack.client.tree.labels(session)).values()) == ["the start"]
    assert "/home/someone" not in record.workspace

    body = await next_request(stack, session)
    assert body["model"] == "claude-haiku-4-5"
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 16384}  # xhigh: high
    assert sorted(tool["name"] for tool in body["tools"]) == ["ls", "read"]
    blocks = [block for message in body["messages"] for block in message["content"]]
    texts = [block.get("text", "") for block in blocks]
    assert texts[0] == "list the files"
    thinking, call = blocks[1], blocks[2]
    assert thinking == {"type": "thinking", "thinking": "ls it", "signature": "sig-1"}
    assert call["type"] == "tool_use" and call["id"] == "call_42"
    assert blocks[3]["tool_use_id"] == "call_42"
    sent = "\n".join(texts)
    assert "The user thought about deleting src" in sent
    assert "Ran `git status`\n```\nnothing to commit\n```" in sent
    assert "Remember: the tests live in src/tests." in sent
    assert "delete src" not in sent.replace("deleting src", "")
    assert texts[-1] == "next"


PI_FIXTURES = Path(__file__).parents[1] / "fixtures" / "pi"
PI_FILES = ["v2-session", "v2-compactions", "v3-session", "v3-compactions"]
"""Files pi's own session writer made (tests/fixtures/pi/README.md), each beside what pi
had: the leaf's path and the messages of the request pi would send Anthropic."""
SUMMARIES = [
    # pi's wording, then ours, around the same summary text.
    (
        "compaction",
        r"The conversation history before this point was compacted into the "
        r"following summary:\n\n<summary>\n(.*)\n</summary>",
    ),
    (
        "branch",
        r"The following is a summary of a branch that this conversation came back "
        r"from:\n\n<summary>\n(.*)</summary>",
    ),
    (
        "compaction",
        r"The conversation before this point was compacted\. Summary of what "
        r"happened:\n\n(.*)",
    ),
    (
        "branch",
        r"The user left another branch of this conversation\. Summary of that "
        r"branch:\n\n(.*)",
    ),
]


def pi_fixture(name: str) -> tuple[Path, list[dict[str, Any]], dict[str, Any]]:
    """A fixture's path, its lines (the header first) and what pi had."""
    file = PI_FIXTURES / f"{name}.jsonl"
    lines = [json.loads(line) for line in file.read_text().splitlines()]
    return file, lines, json.loads((PI_FIXTURES / f"{name}.expected.json").read_text())


def request_blocks(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """A request's messages as (role, block) pairs: what the model reads, whoever sends
    it. Without cache markers; a text content as a text block; a tool result's text as
    one string; a summary as its text alone (pi's wording around it is not ours)."""
    blocks: list[tuple[str, Any]] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content:
            block = {k: v for k, v in block.items() if k != "cache_control"}
            if block["type"] == "tool_result":
                inner = block.get("content", "")
                if isinstance(inner, list):
                    inner = "".join(part.get("text", "") for part in inner)
                block = {**block, "content": inner, "is_error": block.get("is_error", False)}
            if block["type"] == "text":
                for kind, wording in SUMMARIES:
                    if match := re.fullmatch(wording, block["text"], re.DOTALL):
                        block = {"type": f"{kind} summary", "text": match[1]}
                        break
            blocks.append((message["role"], block))
    return blocks


def message_texts(lines: list[dict[str, Any]], branch: list[str]) -> list[str]:
    """The texts of the user and assistant messages on the path, in order."""
    by_id = {line.get("id"): line for line in lines}
    texts = []
    for entry_id in branch:
        message = by_id[entry_id].get("message", {})
        content = message.get("content") if message.get("role") in ("user", "assistant") else None
        if isinstance(content, str):
            texts.append(content)
        elif content:
            texts += [block["text"] for block in content if block["type"] == "text"]
    return texts


@pytest.mark.parametrize("name", PI_FILES)
@pytest.mark.script({"conversations": {"*": [NEXT]}})
async def test_a_file_pi_wrote_imports_as_pi_had_it(stack: Stack, name: str) -> None:
    file, lines, pi_had = pi_fixture(name)
    session = lines[0]["id"]
    code, out, err = await stack.cli("import", str(file), "--keep-ids")
    assert code == 0, err
    assert out.strip() == f"imported pi session with {len(lines) - 1} entries: {session}"
    # The report: what of the file has no place here.
    replies = sum(1 for line in lines if line.get("message", {}).get("role") == "assistant")
    assert f"dropped: `usage.cost` of assistant messages ({replies})" in err
    assert "dropped: `cwd` of the session header (1)" in err
    if name.endswith("-session"):
        assert "changed: thinking level `xhigh`, as `high` (1)" in err
        assert "dropped: `details` of branch_summary entries (1)" in err

    # The transcript `show` prints is the leaf's path as pi had it.
    shown = json.loads(await stack.cli_ok("show", session, "--json"))
    assert [entry["id"] for entry in shown] == pi_had["branch"]
    printed = " ".join((await stack.cli_ok("show", session, "--full")).split())
    at = 0
    for text in message_texts(lines, pi_had["branch"]):
        found = printed.find(" ".join(text.split()), at)
        assert found >= 0, f"{text!r} is not shown (after {printed[at - 80 : at]!r})"
        at = found + len(text)

    # The model reads what pi would have sent it.
    body = await next_request(stack, session)
    assert body["model"] == pi_had["model"]["modelId"]
    on_path = {line.get("id"): line["type"] for line in lines[1:]}
    if "thinking_level_change" in (on_path[i] for i in pi_had["branch"]):
        # (Without one pi resumes with its user's default, as we do with the deployment's.)
        assert ("thinking" in body) == (pi_had["thinking_level"] != "off")
    assert request_blocks(body["messages"]) == [
        *request_blocks(pi_had["request"]),
        ("user", {"type": "text", "text": "next"}),
    ]


@pytest.mark.parametrize("name", ["v2-compactions", "v3-session"])
@pytest.mark.script({"conversations": {"*": [NEXT]}})
async def test_a_pi_file_imports_over_http_and_its_export_moves_on(
    stack: Stack, stack_factory: Callable[..., Any], api: ApiServer, name: str
) -> None:
    file, lines, pi_had = pi_fixture(name)
    async with api.client() as http:
        response = await http.post("/api/sessions/import", content=file.read_bytes())
        assert response.status_code == 201, response.text
        imported = response.json()
        assert imported["format"] == "pi" and imported["entries"] == len(lines) - 1
        replies = sum(1 for line in lines if line.get("message", {}).get("role") == "assistant")
        assert {
            "kind": "dropped",
            "what": "`usage.cost` of assistant messages",
            "count": replies,
        } in imported["notes"]
        session = imported["session"]["id"]
        exported = (await http.get(f"/api/sessions/{session}/export")).text
    assert len(await stack.client.tree.path(session)) == len(pi_had["branch"])
    before = await next_request(stack, session)
    assert request_blocks(before["messages"])[:-1] == request_blocks(pi_had["request"])

    # Exported, it moves to another deployment as any session does, ids and all.
    moved = stack.settings.home / "moved.jsonl"
    moved.write_text(exported)
    async with stack_factory({"conversations": {"*": [NEXT]}}) as elsewhere:
        code, out, err = await elsewhere.cli("import", str(moved), "--keep-ids")
        assert code == 0 and out.strip().endswith(session) and err == "", err
        again = await elsewhere.cli_ok("export", session)
        assert again.splitlines()[1:] == exported.splitlines()[1:]
        after = await next_request(elsewhere, session)
    assert after == before


def refused(stack: Stack, data: str | bytes) -> SessionFileRefused:
    """The refusal of importing `data`; the store must be as it was."""
    counts = store_counts(stack)
    with pytest.raises(SessionFileRefused) as refusal:
        stack.client.sync.session_files.import_file(
            data.encode() if isinstance(data, str) else data
        )
    assert store_counts(stack) == counts
    return refusal.value


HEADER: dict[str, Any] = {
    "format": "duragent-session",
    "version": 1,
    "source": {"app": "duragent", "app_version": "0.1.0", "session_id": "s1", "exported_at": 1},
    "session": {
        "name": None,
        "config": {"model": "claude-sonnet-5-5"},
        "leaf_id": None,
        "created_at": 1,
    },
}


def message(entry_id: str, parent: str | None, text: str = "hi") -> dict[str, Any]:
    return {
        "id": entry_id,
        "parent_id": parent,
        "timestamp": 1,
        "type": "message",
        "message": {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1},
    }


def ours(*entries: dict[str, Any], count: int | None = None, leaf: str | None = None) -> str:
    header = {**HEADER, "entries": len(entries) if count is None else count}
    header["session"] = {**HEADER["session"], "leaf_id": leaf}
    return jsonl([header, *entries])


BAD_FILES: list[tuple[str, str | bytes, int | None, str]] = [
    ("empty", "", None, "the file is empty"),
    ("not a session", '{"hello": 1}\n', 1, "not a session file"),
    ("newer version", jsonl([{**HEADER, "version": 2, "entries": 0}]), 1, "version 2"),
    ("not JSON", ours(message("e1", None)) + "{oops\n", 3, "not valid JSON"),
    ("an array", ours(message("e1", None), count=2) + "[1, 2]\n", 3, "JSON object"),
    ("unknown type", ours({**message("e1", None), "type": "teleport"}), 2, "teleport"),
    ("dangling parent", ours(message("e1", None), message("e2", "zz")), 3, "parent_id 'zz'"),
    (
        "a cycle",
        ours(message("e1", "e2"), message("e2", "e1")),
        2,
        "parent_id 'e2' is not the id of an entry on an earlier line",
    ),
    ("own parent", ours(message("e1", "e1")), 2, "parent_id 'e1'"),
    ("duplicate id", ours(message("e1", None), message("e1", None)), 3, "earlier entry"),
    ("bad id", ours(message("../etc", None)), 2, "is not an id"),
    ("long id", ours(message("e" * 65, None)), 2, "is not an id"),
    (
        "label of nothing",
        ours(
            message("e1", None),
            {
                "id": "l1",
                "parent_id": "e1",
                "timestamp": 1,
                "type": "label",
                "target_id": "x9",
                "label": "x",
            },
        ),
        3,
        "target_id 'x9'",
    ),
    ("cut short", ours(message("e1", None), count=2), None, "says 2 entries"),
    ("leaf elsewhere", ours(message("e1", None), leaf="e7"), 1, "the leaf 'e7'"),
    ("NaN", ours({**message("e1", None), "timestamp": float("nan")}), 2, "NaN"),
    ("huge number", ours({**message("e1", None), "timestamp": 10**30}), 2, "out of range"),
    ("NUL", ours(message("e1", None, "a\x00b")), 2, "NUL"),
    ("deep", ours({**message("e1", None), "x": json.loads("[" * 100 + "]" * 100)}), 2, "deep"),
    ("extra field", ours({**message("e1", None), "secret": 1}), 2, "secret"),
    ("bad run id", ours({**message("e1", None), "run_id": "a b"}), 2, "run_id"),
    ("not UTF-8", ours(message("e1", None), count=2).encode() + b"\xff\xfe\n", 3, "UTF-8"),
    ("pi version 1", jsonl([{"type": "session", "id": "p1", "timestamp": "x"}]), 1, "version 1"),
    (
        "pi bad timestamp",
        jsonl([PI_SESSION[0], {**PI_SESSION[1], "timestamp": "yesterday"}]),
        2,
        "ISO 8601",
    ),
    (
        "pi role not a name",
        jsonl(
            [
                PI_SESSION[0],
                {**PI_SESSION[3], "parentId": None, "message": {"role": "or acle", "timestamp": 1}},
            ]
        ),
        2,
        "or acle",
    ),
    (
        "pi type not a name",
        jsonl([PI_SESSION[0], {**PI_SESSION[1], "type": "context edit"}]),
        2,
        "context edit",
    ),
]


@pytest.mark.parametrize(
    ("data", "line", "reason"),
    [pytest.param(data, line, reason, id=name) for name, data, line, reason in BAD_FILES],
)
async def test_a_bad_file_is_refused_with_its_line_and_nothing_is_stored(
    stack: Stack, data: str | bytes, line: int | None, reason: str
) -> None:
    refusal = refused(stack, data)
    assert refusal.line == line, str(refusal)
    assert reason in str(refusal)
    assert str(refusal).endswith("nothing was imported")


async def test_oversized_files_are_refused_before_they_are_read_whole(
    stack: Stack, api: ApiServer, tmp_path: Path
) -> None:
    huge = tmp_path / "huge.jsonl"
    with huge.open("wb") as out:
        out.truncate(MAX_FILE_BYTES + 1)  # sparse: no time to write
    counts = store_counts(stack)
    code, _, err = await stack.cli("import", str(huge))
    assert code == 2 and f"the file is {MAX_FILE_BYTES + 1} bytes" in err
    line = refused(stack, ours(message("e1", None, "x" * (8 * 1024 * 1024))))
    assert line.line == 2 and "the most an entry may be" in str(line)
    async with api.client() as http:
        body = b"x" * (MAX_FILE_BYTES + 1)

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
            for start in range(0, len(body), 1024 * 1024):
                yield body[start : start + 1024 * 1024]

        for content in (body, chunks()):
            response = await http.post("/api/sessions/import", content=content)
            assert response.status_code == 413, response.text[:200]
            assert "the most a session file may be" in response.json()["detail"]
        bad = await http.post("/api/sessions/import", content=ours(message("e1", "zz")))
        assert bad.status_code == 422
        assert bad.json()["detail"].startswith("line 2: parent_id 'zz'")
        assert store_counts(stack) == counts
        # Past the limit on one text (a whole file may be larger), a file goes in.
        large = ours(message("e1", None, "y" * (2 * MAX_BODY_BYTES)), leaf="e1")
        response = await http.post("/api/sessions/import", content=large)
        assert response.status_code == 201, response.text[:300]


@pytest.mark.script({"conversations": {"*": [{"reply": [{"text": "hello"}]}]}})
async def test_export_and_import_over_http_are_the_owners_only(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as alice, api.client(ApiServer.OTHER_TOKEN) as bob:
        session = (await alice.post("/api/sessions", json={})).json()["session"]["id"]
        await alice.post(f"/api/sessions/{session}/input", json={"text": "hi"})
        await eventually(lambda: run_finished(stack, session))
        assert (await bob.get(f"/api/sessions/{session}/export")).status_code == 404
        async with api.client(None) as nobody:
            assert (await nobody.get(f"/api/sessions/{session}/export")).status_code == 401
        file = (await alice.get(f"/api/sessions/{session}/export")).content
        mine = await bob.post("/api/sessions/import", content=file, params={"name": "bob's"})
        assert mine.status_code == 201, mine.text
        copy = mine.json()["session"]
        assert copy["owner"] == "bob" and copy["name"] == "bob's"
        assert (await alice.get(f"/api/sessions/{copy['id']}/export")).status_code == 404
        kept = await bob.post("/api/sessions/import", content=file, params={"keep_ids": True})
        assert kept.status_code == 409 and "exists here already" in kept.json()["detail"]
    texts = [
        text_of(e.message.content)
        for e in await stack.client.tree.path(copy["id"])
        if isinstance(e, MessageEntry) and not isinstance(e.message, ToolResultMessage)
    ]
    assert texts == ["hi", "hello"]
    with pytest.raises(IdsInUse):
        await stack.client.session_files.import_file(file, keep_ids=True)


@BOTH_STORES
async def test_an_id_taken_while_importing_fails_the_whole_import(stack: Stack) -> None:
    """Kept ids are looked up first; one stored by another import between that look and
    the write (here: asked not to look) fails the transaction, never leaves a hole."""
    file = ours(message("e1", None), leaf="e1").encode()
    await stack.client.session_files.import_file(file, keep_ids=True)
    taken = read_session_file(ours(message("e0", None), message("e1", "e0")).encode())
    counts = store_counts(stack)
    with pytest.raises(IdsTaken), stack.db.transaction() as db:
        store_imported(
            db,
            session_id="s-new",
            workspace=str(stack.settings.home),
            config=SessionConfig(model="claude-sonnet-5-5"),
            name=None,
            owner=None,
            host=None,
            leaf_id="e1",
            stored=stored_entries(taken),
            check_ids=False,
        )
    assert store_counts(stack) == counts
