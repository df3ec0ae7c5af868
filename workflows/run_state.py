"""A session run's data, in one place: what the loop reads and changes as the run goes.

Plain state, no I/O and no Temporal calls: the workflow (`session_run.SessionRun`) owns one,
the loop (`workflows.loop`) and the steps at the run's edges (`workflows.run.Run`) change
it, the queries read it.
"""

from __future__ import annotations

from typing import Literal, Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from duragent.domain.budgets import Budget, Spent
    from duragent.domain.config import SnapshotRef
    from duragent.domain.entries import SessionEntry
    from duragent.domain.events import RunEventPayload
    from duragent.domain.hooks import NextTurn
    from duragent.domain.messages import Usage
    from duragent.domain.queues import QueuedMessage
    from duragent.domain.runs import Phase, RunInput, RunResult, RunStatus
    from duragent.domain.save_points import CommitSlot, TurnCommit
    from duragent.domain.turn_in_progress import TurnInProgress

from duragent.workflows.budget_keeper import BudgetKeeper
from duragent.workflows.hook_runner import HookRunner
from duragent.workflows.inbox import Inbox


class RunState:
    input: RunInput
    """The run's input (set as the run starts)."""
    snapshot: SnapshotRef
    """The turn snapshot the next model call uses."""
    hooks: HookRunner
    """The session's workflow hooks, loaded as the run starts."""

    def __init__(self) -> None:
        self.run_id = ""
        self.phase: Phase = "idle"
        self.turn = 0
        self.first_turn = 0
        """The turn this execution began at (continue-as-new counts from it)."""
        self.executions = 1
        self.inbox = Inbox()
        """What signals delivered and the loop has not taken yet."""
        # What an abort must save: the committed leaf, turns handed to an activity but
        # not yet known saved, and the turn in progress.
        self.leaf = ""
        self.unsaved: list[TurnCommit] = []
        self.current: TurnInProgress | None = None
        self.usage = Usage()
        self.override: NextTurn | None = None
        """What a hook's prepare_next_turn asked of the next model call."""
        self.hook_paths: list[str] = []
        self.last_assistant: str | None = None
        self.host: str | None = None
        """The session's host, where tool calls go (`workflows.hosts`); None: shared."""
        self.budgets = BudgetKeeper()
        self.summarizing: list[str] = []
        """The compaction entry whose summary is being asked for and stored, if any."""
        self.queued_input = False
        """The run's end found input sent while it was open: the next run starts for it."""
        self.output_tries = 0
        """Outputs refused, or answers given without the output tool (`workflows.output`)."""

    def session_budget(self) -> Budget | None:
        return self.inbox.config.budget if self.inbox.config else None


class RunSteps(Protocol):
    """What the loop's gates (budgets, approvals, hosts, sub-agents) may do to a run: read
    and change its state, and the steps at its edges (`workflows.run.Run` is the one)."""

    @property
    def state(self) -> RunState: ...

    def commit(
        self,
        slots: list[CommitSlot],
        *,
        continues: bool,
        queued: list[QueuedMessage] | None = None,
        queue: Literal["steering", "follow_up"] = "steering",
        extra: list[SessionEntry] | None = None,
    ) -> TurnCommit: ...

    async def save(self, commit: TurnCommit) -> None: ...

    async def finish(
        self,
        commits: list[TurnCommit],
        status: RunStatus,
        error: str | None,
        last_assistant_id: str | None,
        cleared: tuple[list[QueuedMessage], list[QueuedMessage]] | None = None,
    ) -> RunResult: ...

    async def set_phase(self, phase: Phase, *events: RunEventPayload) -> None: ...

    async def emit(self, kind: str, *events: RunEventPayload) -> None: ...

    def session_budget(self) -> Budget | None: ...

    def spent(self) -> Spent: ...

    def new_id(self) -> str: ...

    def now_ms(self) -> int: ...
