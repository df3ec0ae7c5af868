"""Where runtime guidance enters a run (its injection points), and how.

The workflow decides when guidance is taken (at a safe point, after the store agreed
the items are still this run's to take); these functions decide which point that is and
what the save point then carries: the hidden guidance messages and the event saying so.
"""

from __future__ import annotations

from duragent.domain.events import (
    RunEventPayload,
    RuntimeGuidanceInjected,
    RuntimeGuidanceReplanBeforeTools,
)
from duragent.domain.guidance import GuidanceItem, InjectionPoint, guidance_entry
from duragent.domain.save_points import TurnCommit

Arrival = str
"""What the run was doing when an item arrived: `model`, `tools` or `between`."""


def injection_point(
    arrived: Arrival, had_calls: bool, interrupted: bool, skipped: bool
) -> InjectionPoint:
    """The point guidance takes after a turn's tool calls: `arrived` is when its first
    item came; `interrupted` and `skipped` say whether it cut the batch short."""
    if interrupted:
        return "during_tool_interrupted"
    if arrived == "tools" or skipped:
        return "after_tool"
    if arrived == "model" and not had_calls:
        return "before_finish"
    return "before_model"


def inject(
    commit: TurnCommit,
    items: list[GuidanceItem],
    point: InjectionPoint,
    timestamp: int,
    interrupted: list[str] | None = None,
    skipped: list[str] | None = None,
) -> TurnCommit:
    """`commit` with the guidance appended, for the model's next turn."""
    event = RuntimeGuidanceInjected(
        point=point,
        turn=commit.turn + 1,
        item_ids=[item.id for item in items],
        interrupted=interrupted or [],
        skipped=skipped or [],
    )
    return _with(commit, items, point, timestamp, [event])


def inject_replan(
    commit: TurnCommit, items: list[GuidanceItem], skipped: list[str], timestamp: int
) -> TurnCommit:
    """before_tools: `commit` answers the planned calls (`skipped`) as not run; the
    guidance follows, and the model re-plans with it."""
    ids = [item.id for item in items]
    events: list[RunEventPayload] = [
        RuntimeGuidanceReplanBeforeTools(turn=commit.turn, item_ids=ids, skipped=skipped),
        RuntimeGuidanceInjected(point="before_tools", turn=commit.turn + 1, item_ids=ids),
    ]
    return _with(commit, items, "before_tools", timestamp, events)


def _with(
    commit: TurnCommit,
    items: list[GuidanceItem],
    point: InjectionPoint,
    timestamp: int,
    events: list[RunEventPayload],
) -> TurnCommit:
    entries = [guidance_entry(item, point, timestamp) for item in items]
    return commit.model_copy(
        update={"entries": [*commit.entries, *entries], "events": [*commit.events, *events]}
    )
