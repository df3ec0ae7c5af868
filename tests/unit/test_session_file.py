"""The portable session file and pi's session files: pure functions over hand-built lines."""

from __future__ import annotations

import json
from typing import Any

import pytest

from duragent.domain.config import SessionConfig
from duragent.domain.context import build_context
from duragent.domain.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    SessionEntry,
)
from duragent.domain.messages import (
    AssistantMessage,
    CustomMessage,
    ThinkingContent,
    text_of,
    user_text,
)
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


def test_pi_entries_and_roles_of_no_known_kind_are_kept_as_custom_entries() -> None:
    """A later pi's (or an extension's) entry types and message roles: kept whole in
    custom entries, in the tree, never sent to the model, and reported."""
    system = {"role": "system", "content": "You are pi.", "timestamp": 1}
    read = read_session_file(
        pi(
            pi_entry("s", None, type="message", message=system),
            pi_entry("w", "s", type="usage", input=900, cacheWrite=900),
            pi_message("u", "w", {"role": "user", "content": "hi"}),
            pi_entry("e", "u", type="context_edit", cleared=["s"]),
            pi_entry("x", "e", type="context_edit", cleared=[]),
            pi_message(
                "a", "x", {"role": "assistant", "content": [{"type": "text", "text": "yo"}]}
            ),
        )
    )
    entries = [numbered.entry for numbered in read.entries]
    custom = [(e.id, e.custom_type, e.data) for e in entries if isinstance(e, CustomEntry)]
    assert custom == [
        ("s", "pi_system_message", {"message": system}),
        ("w", "pi_usage", {"input": 900, "cacheWrite": 900}),
        ("e", "pi_context_edit", {"cleared": ["s"]}),
        ("x", "pi_context_edit", {"cleared": []}),
    ]
    assert [e.parent_id for e in entries] == [None, "s", "w", "u", "e", "x"]
    sent = build_context(entries, CONFIG).messages
    assert [(m.role, text_of(m.content)) for m in sent] == [("user", "hi"), ("assistant", "yo")]
    assert [note.text() for note in read.notes] == [
        "dropped: `timestamp` of the session header (1)",
        "kept as custom: pi `system` messages, as `pi_system_message` (not sent to the model) (1)",
        "kept as custom: pi `usage` entries, as `pi_usage` (1)",
        "kept as custom: pi `context_edit` entries, as `pi_context_edit` (2)",
    ]


def test_a_pi_compaction_that_keeps_nothing_names_itself() -> None:
    """pi keeps from `firstKeptEntryId` only when it is on the path before the compaction:
    the compaction itself, or an id of no earlier entry, keeps nothing."""

    def compaction(entry_id: str, parent: str, first_kept: str) -> dict[str, Any]:
        return pi_entry(
            entry_id, parent, type="compaction", summary="S", firstKeptEntryId=first_kept
        )

    for first_kept, note in [("c", None), ("gone", "keeps nothing")]:
        read = read_session_file(
            pi(
                pi_message("u", None, {"role": "user", "content": "old"}),
                compaction("c", "u", first_kept),
                pi_message("v", "c", {"role": "user", "content": "new"}),
            )
        )
        entries = [numbered.entry for numbered in read.entries]
        kept = entries[1]
        assert isinstance(kept, CompactionEntry) and kept.first_kept_entry_id == "c"
        texts = [text_of(m.content) for m in build_context(entries, CONFIG).messages]
        assert len(texts) == 2 and texts[0].endswith("S") and texts[1] == "new"
        changed = [n.what for n in read.notes if n.kind == "changed"]
        assert (note in changed[0]) if note else not changed
        # Exported as ours, it reads back: the one link that may name its own entry.
        again = read_session_file(file_of(stored_entries(read), leaf="v"))
        assert stored_entries(again) == stored_entries(read)


def test_a_pi_import_reports_the_fields_it_drops() -> None:
    """Each field we do not keep is named, with how often; one that held nothing is not."""
    reply = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "a", "textSignature": "ts"},
            {"type": "toolCall", "id": "c|1", "name": "ls", "thoughtSignature": "g"},
            {"type": "thinking", "thinking": "t", "thinkingSignature": "rs"},
        ],
        "provider": "openai",
        "usage": {"input": 1, "totalTokens": 1, "cost": {"total": 0.1}},
        "responseId": "r1",
    }
    read = read_session_file(
        pi(
            pi_message("a", None, reply),
            pi_message("b", "a", {**reply, "responseId": None}),
            pi_entry("s", "b", type="branch_summary", fromId="b", summary="x", fromHook=True),
            pi_entry("t", "s", type="branch_summary", fromId="root", summary="y", fromHook=False),
        )
    )
    assert [note.text() for note in read.notes] == [
        "dropped: `timestamp` of the session header (1)",
        "dropped: `responseId` of assistant messages (1)",
        "dropped: `textSignature` of text blocks (2)",
        "dropped: `thoughtSignature` of toolCall blocks (2)",
        "dropped: `usage.cost` of assistant messages (2)",
        "changed: tool call ids with characters Anthropic's API refuses (each as `_`) (2)",
        "dropped: thinking signatures not from Anthropic's API (2)",
        "dropped: `fromHook` of branch_summary entries (1)",
    ]
    summary = read.entries[3].entry
    assert isinstance(summary, BranchSummaryEntry) and summary.from_entry_id == "t"
