"""Cut points and context building over hand-built trees (pure functions)."""

from __future__ import annotations

import pytest

from duragent.domain.compaction import estimate_context_tokens, plan_compaction
from duragent.domain.config import SessionConfig
from duragent.domain.context import build_context
from duragent.domain.entries import (
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    ThinkingLevelChangeEntry,
)
from duragent.domain.messages import (
    AgentMessage,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    text_of,
    user_text,
)

pytestmark = pytest.mark.fast

BIG = "x" * 4000  # about 1000 tokens


class Tree:
    """Builds a chain of entries; `branch` starts a new chain from any entry."""

    def __init__(self) -> None:
        self.entries: list[SessionEntry] = []

    def add(self, message: AgentMessage, parent: str | None = None) -> str:
        entry_id = f"e{len(self.entries)}"
        if parent is None and self.entries:
            parent = self.entries[-1].id
        self.entries.append(
            MessageEntry(id=entry_id, parent_id=parent, timestamp=0, message=message)
        )
        return entry_id

    def path(self, leaf: str) -> list[SessionEntry]:
        by_id = {e.id: e for e in self.entries}
        out: list[SessionEntry] = []
        current: str | None = leaf
        while current is not None:
            out.append(by_id[current])
            current = by_id[current].parent_id
        return out[::-1]


def tool_turn(tree: Tree, n: int) -> None:
    tree.add(user_text(f"task {n}", 0))
    call = ToolCall(id=f"call{n}", name="read", arguments={"path": f"f{n}"})
    tree.add(AssistantMessage(content=[call], stop_reason="toolUse", timestamp=0))
    tree.add(
        ToolResultMessage(
            tool_call_id=call.id, tool_name="read", content=[TextContent(text=BIG)], timestamp=0
        )
    )
    tree.add(AssistantMessage(content=[TextContent(text=f"done {n}")], timestamp=0))


def test_the_cut_keeps_recent_tokens_and_never_separates_a_call_from_its_result() -> None:
    tree = Tree()
    for n in range(6):
        tool_turn(tree, n)
    path = tree.path(tree.entries[-1].id)
    for keep in (500, 1000, 1500, 2500, 3500):
        plan = plan_compaction(path, keep)
        assert plan is not None
        first_kept = next(e for e in path if e.id == plan.first_kept_entry_id)
        assert isinstance(first_kept, MessageEntry)
        assert not isinstance(first_kept.message, ToolResultMessage)
        kept = path[path.index(first_kept) :]
        kept_ids = {e.id for e in kept}
        for entry in kept:  # every kept result's call is kept too
            if isinstance(entry, MessageEntry) and isinstance(entry.message, ToolResultMessage):
                caller = path[path.index(entry) - 1]
                assert caller.id in kept_ids


def test_a_cut_inside_a_turn_summarises_the_turn_start_on_its_own() -> None:
    tree = Tree()
    for n in range(3):
        tool_turn(tree, n)
    path = tree.path(tree.entries[-1].id)
    plan = plan_compaction(path, keep_recent_tokens=10)
    assert plan is not None
    # The 10 tokens end inside the last tool result; the kept part starts at its call.
    # That turn's start (the user's message) gets its own summary; earlier turns are
    # the history.
    assert plan.first_kept_entry_id == "e9"
    assert plan.split_turn_ids == ["e8"]
    assert plan.summarized_ids == [f"e{i}" for i in range(8)]


def test_repeated_compaction_summarises_only_what_came_after_the_last_one() -> None:
    tree = Tree()
    for n in range(3):
        tool_turn(tree, n)
    compaction = CompactionEntry(
        id="c1", parent_id="e11", timestamp=0, summary="earlier", first_kept_entry_id="e8"
    )
    tree.entries.append(compaction)
    for n in range(3, 6):
        tool_turn(tree, n)
    path = tree.path(tree.entries[-1].id)
    plan = plan_compaction(path, keep_recent_tokens=2500)
    assert plan is not None
    assert plan.previous_summary_entry_id == "c1"
    assert plan.summarized_ids[0] == "e8"  # from the previous first kept entry on
    assert "e0" not in plan.summarized_ids and "c1" not in plan.summarized_ids


def test_nothing_to_compact_when_everything_fits() -> None:
    tree = Tree()
    tool_turn(tree, 0)
    assert plan_compaction(tree.path(tree.entries[-1].id), keep_recent_tokens=100_000) is None


def test_build_context_follows_the_branch_and_its_config() -> None:
    tree = Tree()
    tree.add(user_text("root", 0))
    tree.entries.append(
        ModelChangeEntry(id="m1", parent_id="e0", timestamp=0, model="claude-branch-a")
    )
    a = tree.add(user_text("branch a", 0), parent="m1")
    b = tree.add(user_text("branch b", 0), parent="e0")
    defaults = SessionConfig(model="claude-default")
    on_a = build_context(tree.path(a), defaults)
    on_b = build_context(tree.path(b), defaults)
    assert [text_of(m.content) for m in on_a.messages] == ["root", "branch a"]
    assert on_a.model == "claude-branch-a"
    assert [text_of(m.content) for m in on_b.messages] == ["root", "branch b"]
    assert on_b.model == "claude-default"


def test_build_context_over_compactions_branches_and_config_changes() -> None:
    tree = Tree()

    def put(entry: SessionEntry) -> str:
        tree.entries.append(entry)
        return entry.id

    def summary_of(message: AgentMessage) -> str:
        return text_of(message.content).rsplit("\n\n", 1)[-1]

    tree.add(user_text("start", 0))
    put(ModelChangeEntry(id="model", parent_id="e0", timestamp=0, model="claude-opus"))
    put(ThinkingLevelChangeEntry(id="think", parent_id="model", timestamp=0, thinking_level="high"))
    tree.add(user_text("old 1", 0), parent="think")
    tree.add(AssistantMessage(content=[TextContent(text="a1")], timestamp=0))
    kept = tree.add(user_text("old 2", 0))
    fork_point = tree.add(AssistantMessage(content=[TextContent(text="a2")], timestamp=0))
    put(
        CompactionEntry(
            id="c1", parent_id=fork_point, timestamp=0, summary="S1", first_kept_entry_id=kept
        )
    )
    put(ActiveToolsChangeEntry(id="tools", parent_id="c1", timestamp=0, active_tools=["read"]))
    put(
        CustomMessageEntry(
            id="note",
            parent_id="tools",
            timestamp=0,
            custom_type="note",
            content=[TextContent(text="a note")],
        )
    )
    put(LabelEntry(id="label", parent_id="note", timestamp=0, target_id=kept, label="here"))
    put(CustomEntry(id="state", parent_id="label", timestamp=0, custom_type="ext", data={"k": 1}))
    latest = tree.add(user_text("new", 0), parent="state")
    # The other branch leaves from before the compaction, with a summary of the first.
    put(
        BranchSummaryEntry(
            id="bs", parent_id=fork_point, timestamp=0, from_entry_id=latest, summary="B"
        )
    )
    put(ThinkingLevelChangeEntry(id="think2", parent_id="bs", timestamp=0, thinking_level="low"))
    other = tree.add(user_text("other", 0), parent="think2")

    main = build_context(tree.path(latest), SessionConfig(model="claude-default"))
    assert summary_of(main.messages[0]) == "S1"
    assert [text_of(m.content) for m in main.messages[1:]] == ["old 2", "a2", "a note", "new"]
    assert (main.model, main.thinking_level, main.active_tools) == ("claude-opus", "high", ["read"])

    branch = build_context(tree.path(other), SessionConfig(model="claude-default"))
    texts = [text_of(m.content) for m in branch.messages]
    assert texts[:5] == ["start", "old 1", "a1", "old 2", "a2"]
    assert summary_of(branch.messages[5]) == "B" and texts[6] == "other"
    assert (branch.model, branch.thinking_level, branch.active_tools) == (
        "claude-opus",
        "low",
        None,
    )

    # A second compaction replaces the first: its summary, then what it kept.
    put(
        CompactionEntry(
            id="c2", parent_id=latest, timestamp=0, summary="S2", first_kept_entry_id=latest
        )
    )
    again = tree.add(user_text("after", 0), parent="c2")
    compacted = build_context(tree.path(again), SessionConfig(model="claude-default"))
    assert summary_of(compacted.messages[0]) == "S2"
    assert [text_of(m.content) for m in compacted.messages[1:]] == ["new", "after"]
    assert compacted.active_tools == ["read"]  # config entries count from the whole path


def test_token_estimate_uses_the_last_reported_usage() -> None:
    messages: list[AgentMessage] = [
        user_text("hello", 0),
        AssistantMessage(
            content=[TextContent(text="hi")],
            usage=Usage(input_tokens=1000, output_tokens=50),
            timestamp=0,
        ),
        user_text("y" * 400, 0),
    ]
    assert estimate_context_tokens(messages) == 1050 + 100 + 4 + 3
