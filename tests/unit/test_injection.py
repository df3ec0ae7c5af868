"""Which injection point guidance takes, and what the save point then carries."""

from __future__ import annotations

import pytest

from duragent.domain.events import RuntimeGuidanceInjected, RuntimeGuidanceReplanBeforeTools
from duragent.domain.guidance import GuidanceItem
from duragent.domain.injection import inject, inject_replan, injection_point
from duragent.domain.messages import Usage
from duragent.domain.save_points import CommitSlot, TurnCommit

pytestmark = pytest.mark.fast

T = 1_700_000_000_000


@pytest.mark.parametrize(
    ("arrived", "had_calls", "interrupted", "skipped", "point"),
    [
        ("tools", True, True, False, "during_tool_interrupted"),
        ("model", False, True, True, "during_tool_interrupted"),
        ("tools", True, False, False, "after_tool"),
        ("between", True, False, True, "after_tool"),
        ("model", False, False, False, "before_finish"),
        ("model", True, False, False, "before_model"),
        ("between", False, False, False, "before_model"),
    ],
)
def test_the_injection_point(
    arrived: str, had_calls: bool, interrupted: bool, skipped: bool, point: str
) -> None:
    assert injection_point(arrived, had_calls, interrupted, skipped) == point


def commit() -> TurnCommit:
    return TurnCommit(turn=3, slots=[CommitSlot(entry_id="a1")], usage=Usage())


ITEMS = [
    GuidanceItem(id="g1", text="use the cache", intent="interrupt"),
    GuidanceItem(id="g2", text="also the docs", intent="supplement"),
]


def test_injected_guidance_follows_the_turn_as_hidden_messages_for_the_next() -> None:
    before = commit()
    after = inject(before, ITEMS, "after_tool", T, interrupted=["c1"], skipped=["c2"])
    assert before.entries == [] and before.events == []  # the input is left as it was
    entries = [e.model_dump() for e in after.entries]
    assert [e["id"] for e in entries] == ["g1", "g2"]
    assert [e["display"] for e in entries] == [False, False]
    assert [e["details"] for e in entries] == [
        {"point": "after_tool", "intent": "interrupt"},
        {"point": "after_tool", "intent": "supplement"},
    ]
    assert "use the cache" in entries[0]["content"][0]["text"]
    assert after.events == [
        RuntimeGuidanceInjected(
            point="after_tool", turn=4, item_ids=["g1", "g2"], interrupted=["c1"], skipped=["c2"]
        )
    ]


def test_a_replan_says_which_calls_were_held_back_then_injects_before_tools() -> None:
    after = inject_replan(commit(), ITEMS[:1], ["c1", "c2"], T)
    assert after.events == [
        RuntimeGuidanceReplanBeforeTools(turn=3, item_ids=["g1"], skipped=["c1", "c2"]),
        RuntimeGuidanceInjected(point="before_tools", turn=4, item_ids=["g1"]),
    ]
    (entry,) = [e.model_dump() for e in after.entries]
    assert (entry["id"], entry["details"]) == (
        "g1",
        {"point": "before_tools", "intent": "interrupt"},
    )
