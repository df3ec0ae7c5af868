"""The page's view of a session tree: branches, folded lines, labels, compaction marks."""

from __future__ import annotations

import pytest

from duragent.api.tree_view import compaction_marks, tree_view
from duragent.domain.entries import (
    CompactionEntry,
    CustomMessageEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    SessionEntry,
)
from duragent.domain.messages import AssistantMessage, TextContent, user_text

pytestmark = pytest.mark.fast


def user(entry_id: str, parent: str | None, text: str) -> MessageEntry:
    return MessageEntry(id=entry_id, parent_id=parent, timestamp=1, message=user_text(text, 1))


def assistant(entry_id: str, parent: str, text: str) -> MessageEntry:
    message = AssistantMessage(content=[TextContent(text=text)], timestamp=1)
    return MessageEntry(id=entry_id, parent_id=parent, timestamp=1, message=message)


def branched() -> list[SessionEntry]:
    """u1 → a1 → a2 → u2 → a3, and a second branch u2b → a3b from a2; a label on u1 and
    the leaf moved back to a2 (a leaf entry under it)."""
    return [
        user("u1", None, "first"),
        assistant("a1", "u1", "thinking about it"),
        assistant("a2", "a1", "answer one"),
        user("u2", "a2", "second"),
        assistant("a3", "u2", "answer two"),
        LabelEntry(id="l1", parent_id="a3", timestamp=2, target_id="u1", label="start"),
        user("u2b", "a2", "second, edited"),
        assistant("a3b", "u2b", "answer two b"),
        LeafEntry(id="leaf", parent_id="a3b", timestamp=3, target_id="a3b"),
    ]


def test_branches_are_indented_and_lines_folded() -> None:
    view = tree_view(branched(), "leaf")
    shown = [(n.id, n.depth, n.folded, n.is_leaf, n.on_path) for n in view.nodes]
    assert shown == [
        ("u1", 0, 1, False, True),  # a1 folded into it
        ("a2", 0, 0, False, True),  # the branch point
        ("u2", 1, 0, False, False),
        ("a3", 1, 0, False, False),  # a branch tip
        ("u2b", 1, 0, False, True),
        ("a3b", 1, 0, True, True),  # the leaf entry stands for the message it follows
    ]
    assert view.leaf_id == "a3b"
    assert [n.label for n in view.nodes if n.label] == ["start"]
    assert view.nodes[1].branches == 2


def test_a_label_cleared_later_is_gone() -> None:
    entries = [
        *branched(),
        LabelEntry(id="l2", parent_id="leaf", timestamp=4, target_id="u1", label=None),
    ]
    assert all(n.label is None for n in tree_view(entries, "l2").nodes)


def test_compaction_marks_follow_the_displayed_message_before_them() -> None:
    hidden = CustomMessageEntry(
        id="g1",
        parent_id="a2",
        timestamp=2,
        custom_type="runtime_guidance",
        content=[TextContent(text="hidden")],
        display=False,
    )
    compaction = CompactionEntry(
        id="c1", parent_id="g1", timestamp=3, summary="s", first_kept_entry_id="a2", tokens_before=9
    )
    entries = [*branched()[:3], hidden, compaction]
    (mark,) = compaction_marks(entries)
    assert (mark.entry_id, mark.after_message_id, mark.tokens_before) == ("c1", "a2", 9)
    assert [n.kind for n in tree_view(entries, "c1").nodes] == ["user", "compaction"]
