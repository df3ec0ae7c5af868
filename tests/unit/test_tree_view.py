"""The page's view of a session tree: branches, folded lines, labels, compaction and
guidance marks."""

from __future__ import annotations

import pytest

from duragent.api.tree_view import compaction_marks, guidance_marks, tree_view
from duragent.domain.approvals import ApprovalPolicy
from duragent.domain.entries import (
    ApprovalPolicyChangeEntry,
    CompactionEntry,
    CustomMessageEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    SessionEntry,
)
from duragent.domain.fallbacks import STOPPED_TEXT
from duragent.domain.guidance import GuidanceItem, InjectionPoint, guidance_entry
from duragent.domain.messages import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    user_text,
)
from duragent.store.append import chain

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


def a_turn(turn: str, parent: str | None) -> list[SessionEntry]:
    """An assistant message with one bash call, and the call's result: stopped by guidance."""
    call = ToolCall(id=f"call_{turn}", name="bash", arguments={"command": "make test"})
    reply = AssistantMessage(content=[call], timestamp=1)
    result = ToolResultMessage(
        tool_call_id=call.id,
        tool_name="bash",
        content=[TextContent(text=STOPPED_TEXT)],
        is_error=True,
        timestamp=2,
    )
    return [
        MessageEntry(id=f"a_{turn}", parent_id=parent, timestamp=1, message=reply),
        MessageEntry(id=f"r_{turn}", parent_id=None, timestamp=2, message=result),
    ]


def guidance(
    item_id: str, text: str, point: InjectionPoint = "during_tool_interrupted"
) -> CustomMessageEntry:
    return guidance_entry(GuidanceItem(id=item_id, text=text, intent="interrupt"), point, 5)


def test_guidance_keeps_the_call_it_interrupted_whatever_the_commit_holds_between() -> None:
    """A turn's commit stores its results, then the pending writes (here the policy an
    "Always" changed) and the steering sent meanwhile, then the guidance items taken
    together: each item names the call it interrupted."""
    policy = ApprovalPolicyChangeEntry(id="p", parent_id=None, timestamp=3, policy=ApprovalPolicy())
    steering = MessageEntry(
        id="s", parent_id=None, timestamp=4, message=user_text("mind the logs", 4)
    )
    entries = chain(
        "u",
        [*a_turn("1", None), policy, steering, guidance("g1", "wait"), guidance("g2", "stop")],
    )
    marks = guidance_marks([user("u", None, "run the tests"), *entries])
    assert [(m.entry_id, m.text) for m in marks] == [("g1", "wait"), ("g2", "stop")]
    for mark in marks:
        assert [(c.tool_call_id, c.outcome) for c in mark.calls] == [("call_1", "interrupted")]
        assert mark.after_message_id == "s"  # the steering message, shown


def test_later_guidance_claims_no_call_of_an_earlier_turn() -> None:
    """Guidance taken before the next model call, or after a later turn, names only its
    own turn's calls: never the call earlier guidance interrupted."""
    first = chain("u", [*a_turn("1", None), guidance("g1", "stop")])
    later = guidance_entry(
        GuidanceItem(id="g2", text="also", intent="supplement"), "before_model", 9
    )
    steering = MessageEntry(id="s", parent_id=None, timestamp=8, message=user_text("go on", 8))
    second = chain("g1", [steering, later])
    third = chain("g2", [*a_turn("2", None), guidance("g3", "no, stop")])
    marks = guidance_marks([user("u", None, "run"), *first, *second, *third])
    assert {m.entry_id: [c.tool_call_id for c in m.calls] for m in marks} == {
        "g1": ["call_1"],
        "g2": [],
        "g3": ["call_2"],
    }
