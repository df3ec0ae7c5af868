"""A session run's state and the steps at its edges: start and restore, save points,
compaction, continue-as-new, abort and finish. `SessionRun` builds the agent loop on it.
"""

from __future__ import annotations

import asyncio
from typing import Literal, NoReturn

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from duragent.domain.budgets import Budget, Spent
    from duragent.domain.config import SnapshotRef
    from duragent.domain.entries import SessionEntry
    from duragent.domain.events import ContinuedAsNew, PhaseChanged, RunEventPayload
    from duragent.domain.fallbacks import TurnInProgress, abort_marker, root_message
    from duragent.domain.hooks import NextTurn
    from duragent.domain.messages import Usage
    from duragent.domain.queues import QueuedMessage
    from duragent.domain.runs import (
        CarriedState,
        Phase,
        RunInput,
        RunResult,
        RunStatus,
        session_workflow_id,
    )
    from duragent.domain.tree_ops import CompactResult, SaveTurnInput
    from duragent.domain.turns import (
        CommitSlot,
        FinishRunInput,
        RecordEventsInput,
        StartRunInput,
        TurnCommit,
    )

from duragent.workflows import steps
from duragent.workflows.budgets import BudgetKeeper
from duragent.workflows.compaction import compact
from duragent.workflows.hook_runner import HookError, HookRunner
from duragent.workflows.inbox import Inbox, queued_entries

# Below Temporal's suggestion (4,096 events, 4 MB) by more than a turn's worth, so every
# execution's history stays under it.
CONTINUE_AT_EVENTS = 3_500
CONTINUE_AT_BYTES = 3_500_000
SUMMARY_USAGE_PATCH = "summary-usage"
"""Marks the histories of runs whose compaction summaries count in their usage."""
_REPORTED = {"session_id", "run_id", "status", "turns", "usage", "error"}
"""What a run's result says as its finish recorded it."""


class RunBase:
    _run: RunInput
    _snapshot: SnapshotRef
    """The turn snapshot the next model call uses."""
    _hooks: HookRunner
    _override: NextTurn | None
    """What a hook's prepare_next_turn asked of the next model call."""

    def __init__(self) -> None:
        self._phase: Phase = "idle"
        self._turn = 0
        self._inbox = Inbox()
        self._run_id = ""
        # What an abort must save: the committed leaf, turns handed to an activity but
        # not yet known saved, and the turn in progress.
        self._leaf = ""
        self._unsaved: list[TurnCommit] = []
        self._current: TurnInProgress | None = None
        self._usage = Usage()
        self._first_turn = 0
        self._executions = 1
        self._hook_paths: list[str] = []
        self._last_assistant: str | None = None
        self._host: str | None = None
        """The session's host, where tool calls go (`workflows.hosts`); None: shared."""
        self._budgets = BudgetKeeper()

    def _session_budget(self) -> Budget | None:
        return self._inbox.config.budget if self._inbox.config else None

    def _budget_spent(self) -> Spent:
        return self._budgets.run_spent(self._turn, self._usage, self._now_ms())

    async def _start(self, run: RunInput) -> RunResult | None:
        """Record the run and its prompt; the first snapshot and the workflow hooks."""
        try:
            started = await steps.start_run(
                StartRunInput(
                    session_id=run.session_id,
                    run_id=run.run_id,
                    workflow_id=session_workflow_id(run.session_id),
                    kind=run.kind,
                    prompt=run.prompt,
                    invocation=run.invocation,
                    prompt_entry_ids=[self._new_id() for _ in range(max(1, len(run.prompt)))],
                    timestamp=self._now_ms(),
                )
            )
        except FailureError as err:  # e.g. a skill that does not exist
            if steps.cancelled(err):
                raise asyncio.CancelledError from err
            return await self._finish([], "error", root_message(err), None)
        self._leaf = started.leaf_id
        self._inbox.config = self._inbox.config or started.config
        self._hook_paths = started.workflow_hooks
        self._host = started.host
        self._snapshot, self._override = started.snapshot, None
        try:
            self._hooks = HookRunner(started.workflow_hooks)
        except HookError as err:
            return await self._finish([], "error", str(err), None)
        return None

    def _restore(self, carried: CarriedState) -> None:
        """Pick the run up where its previous execution continued as new."""
        self._turn, self._first_turn = carried.turn, carried.turn
        self._leaf, self._usage = carried.leaf_id, carried.usage
        self._last_assistant = carried.last_assistant_id
        self._executions = carried.executions
        self._hook_paths = carried.hooks
        self._host = carried.host
        self._inbox = Inbox.restore(carried.inbox)
        self._snapshot, self._override = carried.snapshot, carried.override
        self._hooks = HookRunner(carried.hooks)

    async def _compact(self, reason: str) -> CompactResult:
        await self._set_phase("compaction")
        result = await compact(
            session_id=self._run.session_id,
            op_id=self._run.run_id,
            leaf_id=self._leaf,
            settings=self._run.options.compaction,
            options=self._run.options,
            reason=reason,
        )
        if result.compacted and result.entry_id:
            self._leaf = result.entry_id
        if result.usage is not None and workflow.patched(SUMMARY_USAGE_PATCH):
            # The summary is a model call of the run: its tokens and cost count toward
            # the run's usage and budget (not its turns: a turn is a call of the loop).
            self._usage = self._usage.plus(result.usage)
            self._budgets.add_turn(result.cost)
        await self._set_phase("turn")
        return result

    async def _save(self, commit: TurnCommit) -> None:
        """A save point on its own, for when no model call follows at once."""
        self._unsaved = [commit]
        await steps.save_turn(
            SaveTurnInput(
                session_id=self._run.session_id,
                run_id=self._run.run_id,
                parent_id=self._leaf,
                commit=commit,
            )
        )
        self._leaf, self._unsaved = commit.leaf_after(self._leaf), []
        self._inbox.writes_saved()

    def _time_to_continue_as_new(self) -> bool:
        """Before Temporal would suggest it (4,096 events or 4 MB), or after the
        configured number of turns in this execution."""
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() >= CONTINUE_AT_EVENTS
            or info.get_current_history_size() >= CONTINUE_AT_BYTES
            or self._turn - self._first_turn >= self._run.options.continue_as_new_after_turns
        )

    async def _continue_as_new(self) -> NoReturn:
        """Hand the run to a fresh execution at this quiet boundary: the turn is saved,
        no tool runs, no handler is mid-way; queues and config travel with it."""
        await workflow.wait_condition(workflow.all_handlers_finished)
        info = workflow.info()
        await steps.record_events(
            RecordEventsInput(
                session_id=self._run.session_id,
                run_id=self._run.run_id,
                key=f"{self._run.run_id}/continued/{self._turn}",
                events=[
                    ContinuedAsNew(
                        turn=self._turn,
                        history_events=info.get_current_history_length(),
                        history_bytes=info.get_current_history_size(),
                    )
                ],
            )
        )
        carried = CarriedState(
            turn=self._turn,
            leaf_id=self._leaf,
            snapshot=self._snapshot,
            usage=self._usage,
            hooks=self._hook_paths,
            override=self._override,
            last_assistant_id=self._last_assistant,
            executions=self._executions + 1,
            inbox=self._inbox.export(),
            host=self._host,
            budget=self._budgets.export(),
        )
        workflow.continue_as_new(self._run.model_copy(update={"carried": carried}))

    def _commit(
        self,
        slots: list[CommitSlot],
        *,
        continues: bool,
        queued: list[QueuedMessage] | None = None,
        queue: Literal["steering", "follow_up"] = "steering",
        extra: list[SessionEntry] | None = None,
    ) -> TurnCommit:
        """The finished turn: its messages, pending writes, then the queued messages that
        start the next turn."""
        writes, session_config = self._inbox.take_writes()
        entries, consumed = queued_entries(queued or [], queue)
        return TurnCommit(
            turn=self._turn,
            slots=slots,
            entries=[*writes, *(extra or []), *entries],
            usage=self._usage,
            continues=continues,
            session_config=session_config,
            consumed=consumed,
        )

    async def _abort(self) -> RunResult:
        """Save what the aborted turn produced, mark the abort for the model, drop the
        queues (returned to the caller), and end the run as aborted."""
        if not self._leaf:  # aborted before the run started: nothing of it is stored
            return await self._finish([], "aborted", None, None, cleared=self._inbox.clear_queues())
        commits = list(self._unsaved)
        marker = abort_marker(self._new_id(), self._now_ms())
        cleared = self._inbox.clear_queues()
        current = self._current
        slots = current.aborted_slots(self._now_ms()) if current else []
        commits.append(self._commit(slots, continues=False, extra=[marker]))
        last_assistant = current.assistant_id if current else None
        return await self._finish(commits, "aborted", None, last_assistant, cleared=cleared)

    async def _finish(
        self,
        commits: list[TurnCommit],
        status: RunStatus,
        error: str | None,
        last_assistant_id: str | None,
        cleared: tuple[list[QueuedMessage], list[QueuedMessage]] | None = None,
    ) -> RunResult:
        run = self._run
        writes, session_config = self._inbox.take_writes()
        # Queued messages the run never reached wait for the session's next run, unless
        # the user aborted (then they go back to the caller).
        leftover = [] if cleared else [*self._inbox.steering, *self._inbox.follow_ups]
        data = FinishRunInput(
            session_id=run.session_id,
            run_id=run.run_id,
            status=status,
            turns=self._turn,
            usage=self._usage,
            error=error,
            parent_id=self._leaf,
            commits=commits,
            entries=writes,
            session_config=session_config,
            leftover=leftover,
            last_assistant_entry_id=last_assistant_id,
        )
        finished = await steps.finish_run(data)
        # The stored usage adds the replies of model calls the run stopped.
        self._usage = finished.usage or self._usage
        self._phase = "idle"
        steering, follow_ups = cleared or ([], [])
        return RunResult(
            **data.model_dump(include=_REPORTED - {"usage"}),
            usage=self._usage,
            leaf_id=finished.leaf_id,
            final_text=finished.final_text,
            cleared_steering=[item.text for item in steering],
            cleared_follow_ups=[item.text for item in follow_ups],
            cancelled_inputs=finished.cancelled_inputs,
            cost_usd=self._budgets.cost_usd,
            unpriced_models=sorted(self._budgets.unpriced),
        )

    async def _set_phase(self, phase: Phase, *events: RunEventPayload) -> None:
        self._phase = phase
        await steps.record_events(
            RecordEventsInput(
                session_id=self._run.session_id,
                run_id=self._run.run_id,
                key=f"{self._run.run_id}/phase/{self._new_id()}",
                events=[*events, PhaseChanged(phase=phase)],
                phase=phase,
            )
        )

    def _new_id(self) -> str:
        return workflow.uuid4().hex

    def _now_ms(self) -> int:
        return int(workflow.now().timestamp() * 1000)
