"""The portable session file and pi's session files: pure functions over hand-built lines."""

from __future__ import annotations

import json
from typing import Any

import pytest

from duragent.domain.config import SessionConfig
from duragent.domain.context import build_context
from duragent.domain.entries import (
    CompactionEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    SessionEntry,
)
from duragent.domain.messages import AssistantMessage, CustomMessage, ThinkingContent, user_text
from duragent.domain.session_file import (
    ExportedSession,
    ExportHeader,
    ExportSource,
    StoredEntry,
    export_lines,
    file_ids,
    read_session_file,
    stored_entries,
)
from duragent.domain.session_file_checks import SessionFileRefused
from duragent.domain.transcript import llm_transcript

pytestmark = pytest.mark.fast

CONFIG = SessionConfig(model="claude-sonnet-5-5")


def tree() -> list[StoredEntry]:
    """root - answer - compaction (keeping the answer) - label; a leaf move from it."""
    entries: list[tuple[SessionEntry, str | None]] = [
        (MessageEntry(id="u1", parent_id=None, timestamp=1, message=user_text("hi", 1)), "r1"),
        (
            MessageEntry(
                id="a1",
                parent_id="u1",
                timestamp=2,
                message=AssistantMessage(
                    content=[ThinkingContent(thinking="hm", signature="s")], timestamp=2
                ),
            ),
            "r1",
        ),
        (
            CompactionEntry(
                id="c1", parent_id="a1", timestamp=3, summary="said hi", first_kept_entry_id="a1"
            ),
            "op1",
        ),
        (LabelEntry(id="l1", parent_id="c1", timestamp=4, target_id="u1", label="start"), None),
        (LeafEntry(id="m1", parent_id="l1", timestamp=5, target_id="u1"), None),
    ]
    return [StoredEntry(entry=entry, run_id=run) for entry, run in entries]


def file_of(entries: list[StoredEntry], leaf: str | None = "l1") -> bytes:
    header = ExportHeader(
        version=1,
        source=ExportSource(app_version="0", session_id="s1", exported_at=0),
        session=ExportedSession(name="n", config=CONFIG, leaf_id=leaf, created_at=0),
        entries=len(entries),
    )
    return "".join(export_lines(header, entries)).encode()


def test_a_file_reads_back_as_it_was_written() -> None:
    written = tree()
    read = read_session_file(file_of(written))
    assert read.kind == "duragent" and read.source_id == "s1" and read.leaf_id == "l1"
    assert read.config == CONFIG and read.name == "n"
    assert stored_entries(read) == written
    assert [e.line for e in read.entries] == [2, 3, 4, 5, 6]


def test_new_ids_keep_every_link_and_the_context() -> None:
    read = read_session_file(file_of(tree()))
    entry_ids, run_ids = file_ids(read)
    assert run_ids == ["r1", "op1"]
    ids = {old: f"new-{old}" for old in entry_ids}
    renamed = stored_entries(read, ids, {"r1": "R", "op1": "OP"})
    by_id = {s.entry.id: s.entry for s in renamed}
    assert set(by_id) == {f"new-{i}" for i in entry_ids}
    compaction, label, leaf = by_id["new-c1"], by_id["new-l1"], by_id["new-m1"]
    assert isinstance(compaction, CompactionEntry) and compaction.first_kept_entry_id == "new-a1"
    assert isinstance(label, LabelEntry) and label.target_id == "new-u1"
    assert isinstance(leaf, LeafEntry) and leaf.target_id == "new-u1"
    assert [s.run_id for s in renamed] == ["R", "R", "OP", None, None]
    path = [s.entry for s in stored_entries(read)][:4]
    renamed_path = [s.entry for s in renamed][:4]
    assert build_context(renamed_path, CONFIG).messages == build_context(path, CONFIG).messages


PI_HEADER = {"type": "session", "version": 3, "id": "p1", "timestamp": "2026-01-01T00:00:00Z"}


def pi(*entries: dict[str, Any]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in (PI_HEADER, *entries)).encode()


def pi_entry(entry_id: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {"id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:01Z", **fields}


def pi_message(entry_id: str, parent: str | None, message: dict[str, Any]) -> dict[str, Any]:
    return pi_entry(entry_id, parent, type="message", message={"timestamp": 1, **message})


def test_pi_thinking_keeps_only_anthropic_signatures() -> None:
    block = {"type": "thinking", "thinking": "t", "thinkingSignature": "rs_1"}
    read = read_session_file(
        pi(
            pi_message("a", None, {"role": "assistant", "content": [block], "provider": "openai"}),
            pi_message(
                "b", "a", {"role": "assistant", "content": [block], "api": "anthropic-messages"}
            ),
        )
    )
    signatures = []
    for numbered in read.entries:
        assert isinstance(numbered.entry, MessageEntry)
        message = numbered.entry.message
        assert isinstance(message, AssistantMessage)
        assert isinstance(message.content[0], ThinkingContent)
        signatures.append(message.content[0].signature)
    assert signatures == [None, "rs_1"]
    assert read.leaf_id == "b"


def test_a_pi_bang_bang_command_is_kept_but_not_sent() -> None:
    bash = {"role": "bashExecution", "command": "ls", "output": "a", "exitCode": 1}
    read = read_session_file(
        pi(
            pi_message("a", None, {**bash}),
            pi_message("b", "a", {**bash, "excludeFromContext": True}),
        )
    )
    messages = [e.entry.message for e in read.entries if isinstance(e.entry, MessageEntry)]
    assert all(isinstance(m, CustomMessage) for m in messages)
    sent = llm_transcript(messages)
    assert len(sent) == 1
    assert sent[0].content[0].text == "Ran `ls`\n```\na\n```\n\nCommand exited with code 1"  # type: ignore[union-attr]


def test_a_pi_leaf_entry_last_names_the_leaf() -> None:
    read = read_session_file(
        pi(
            pi_message("a", None, {"role": "user", "content": "one"}),
            pi_message("b", "a", {"role": "user", "content": "two"}),
            pi_entry("m", "b", type="leaf", targetId="a"),
        )
    )
    assert read.leaf_id == "a"
    back = read_session_file(
        pi(
            pi_message("a", None, {"role": "user", "content": "x"}),
            pi_entry("m", "a", type="leaf", targetId=None),
        )
    )
    assert back.leaf_id is None


@pytest.mark.parametrize(
    ("entries", "line", "reason"),
    [
        (
            [
                pi_entry(
                    "c",
                    None,
                    type="compaction",
                    summary="s",
                    firstKeptEntryId="c",
                    tokensBefore=1,
                    retainedTail=[{"role": "user"}],
                )
            ],
            2,
            "retainedTail",
        ),
        ([pi_entry("t", None, type="thinking_level_change", thinkingLevel="ultra")], 2, "ultra"),
        ([pi_entry("l", None, type="label", targetId="nowhere")], 2, "target_id 'nowhere'"),
        ([pi_message("a", None, {"role": "user", "content": [{"type": "video"}]})], 2, "video"),
    ],
)
def test_pi_entries_that_do_not_map_are_refused_by_line(
    entries: list[dict[str, Any]], line: int, reason: str
) -> None:
    with pytest.raises(SessionFileRefused) as refusal:
        read_session_file(pi(*entries))
    assert refusal.value.line == line and reason in str(refusal.value)
