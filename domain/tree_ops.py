"""Contracts of the structural operations on a session's tree: compaction and navigation.

Both run under the session's workflow id (only while idle, or inside a run for
auto-compaction), and both write once, at the end: a crash leaves a whole operation or
none.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from duragent.domain.compaction import CompactionPlan, CompactionSettings
from duragent.domain.cost import TurnCost
from duragent.domain.messages import Usage
from duragent.domain.save_points import TurnCommit

PLAN_COMPACTION = "plan_compaction"
SUMMARIZE = "summarize"
COMMIT_COMPACTION = "commit_compaction"
PLAN_NAVIGATION = "plan_navigation"
COMMIT_NAVIGATION = "commit_navigation"
SAVE_TURN = "save_turn"


class _Contract(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CompactInput(_Contract):
    """Starts a `SessionCompaction` workflow (a manual compaction of an idle session)."""

    session_id: str
    op_id: str
    instructions: str | None = None
    settings: CompactionSettings = Field(default_factory=CompactionSettings)


class CompactResult(_Contract):
    compacted: bool
    entry_id: str | None = None
    tokens_before: int = 0
    reason: str = ""
    """Why nothing was compacted, when nothing was."""
    usage: Usage | None = None
    """What the summary's model calls used (None: nothing was compacted)."""
    cost: TurnCost | None = None
    """What they cost (None also from a worker that does not price)."""


class PlanCompactionInput(_Contract):
    session_id: str
    leaf_id: str | None
    """None: the session's current leaf."""
    keep_recent_tokens: int


class PlanCompactionResult(_Contract):
    plan: CompactionPlan | None
    model: str
    """The model of the path's config, used for the summary."""


class SummarizeInput(_Contract):
    """Summarise entries with the model; the summary is staged under `entry_id`."""

    session_id: str
    op_id: str
    entry_id: str
    kind: Literal["compaction", "branch"]
    model: str
    entry_ids: list[str]
    split_turn_ids: list[str] = Field(default_factory=list)
    previous_summary_entry_id: str | None = None
    instructions: str | None = None
    max_tokens: int = 4096


class SummarizeResult(_Contract):
    summary_chars: int
    preview: str
    usage: Usage
    cost: TurnCost | None = None
    """The summary's usage priced at its model's price (None: a worker that does not
    price), for a run's budget: the workflow never reads prices."""


class CommitCompactionInput(_Contract):
    session_id: str
    op_id: str
    entry_id: str
    plan: CompactionPlan
    reason: str


class NavigateInput(_Contract):
    """Starts a `SessionNavigation` workflow: move the leaf, maybe summarising the branch
    left behind."""

    session_id: str
    op_id: str
    target_entry_id: str
    summarize: bool = False
    instructions: str | None = None


class PlanNavigationResult(_Contract):
    old_leaf_id: str | None
    new_leaf_id: str | None
    abandoned_ids: list[str]
    """Entries on the old branch that the new leaf's path does not include."""
    edit_text: str | None = None
    """The target was a user message: its text, to edit and send again."""
    model: str


class CommitNavigationInput(_Contract):
    session_id: str
    op_id: str
    plan: PlanNavigationResult
    target_entry_id: str
    marker_id: str
    summary_entry_id: str | None = None


class NavigateResult(_Contract):
    leaf_id: str | None
    edit_text: str | None = None
    summary_entry_id: str | None = None


class SaveTurnInput(_Contract):
    """A save point on its own (before compacting or continuing as new mid-run)."""

    session_id: str
    run_id: str
    parent_id: str
    commit: TurnCommit
