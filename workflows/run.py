"""A session run: its state (`RunState`) and the steps at its edges, the narrow interface
the loop (`workflows.loop`) and its gates (budgets, approvals, hosts, sub-agents) work
through: start and restore, commit, save, compact, continue as new, abort and finish,
set the phase and emit events, new ids and the time. The save point's workflow side is
here: a finished turn's `commit`, handed to a step that saves it (`saving`), known saved
(`saved`), saved again with an aborted turn (`abort`) or with the last (`finish`).
"""

from __future__ import annotations

import asyncio
from typing import Literal, NoReturn

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from duragent.domain.budgets import Budget, Spent
    from duragent.domain.entries import SessionEntry
    from duragent.domain.events import ContinuedAsNew, PhaseChanged, RunEventPayload
    from duragent.domain.fallbacks import abort_marker, root_message
    from duragent.domain.queues import QueuedMessage
    from duragent.domain.runs import (
        CarriedState,
        Phase,
        RunInput,
        RunResult,
        RunStatus,
        session_workflow_id,
    )
    from duragent.domain.save_points import CommitSlot, TurnCommit
    from duragent.domain.search_attributes import session_attributes
    from duragent.domain.tree_ops import CompactResult, SaveTurnInput
    from duragent.domain.turns import (
        NOTHING_QUEUED,
        FinishRunInput,
        QueueInputInput,
        RecordEventsInput,
        StartRunInput,
    )

from duragent.workflows import patches, steps
from duragent.workflows.approvals import ApprovalGate
from duragent.workflows.compaction import compact
from duragent.workflows.hook_runner import HookError, HookRunner
from duragent.workflows.hosts import HostWaits
from duragent.workflows.inbox import Inbox, queued_entries
from duragent.workflows.questions import QuestionGate
from duragent.workflows.run_state import RunState

# Below Temporal's suggestion (4,096 events, 4 MB) by more than a turn's worth, so every
# execution's history stays under it.
CONTINUE_AT_EVENTS = 3_500
CONTINUE_AT_BYTES = 3_500_000
"""Marks the histories of runs whose compaction summaries count in their usage."""
_REPORTED = {"session_id", "run_id", "status", "turns", "usage", "error"}
"""What a run's result says as its finish recorded it."""


class Run:
    """The thin stateful wrapper around the loop: one per workflow run (see the module)."""

    def __init__(self) -> None:
        self.state = RunState()
        self.approvals = ApprovalGate()
        """Tool calls waiting for a person's decision (`workflows.approvals`)."""
        self.questions = QuestionGate()
        """`ask_user` calls waiting for the user's answer (`workflows.questions`)."""
        self.host_waits = HostWaits()
        """Tool calls waiting for their session's host (`workflows.hosts`)."""

    def session_budget(self) -> Budget | None:
        return self.state.session_budget()

    def spent(self) -> Spent:
        return self.state.budgets.run_spent(self.state.turn, self.state.usage, self.now_ms())

    async def start(self, run: RunInput) -> RunResult | None:
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
                    # A queued run's prompt is the input that waited: its ids are its items'.
                    prompt_entry_ids=[]
                    if run.kind == "queued"
                    else [self.new_id() for _ in range(max(1, len(run.prompt)))],
                    timestamp=self.now_ms(),
                )
            )
        except FailureError as err:  # e.g. a skill that does not exist
            if steps.cancelled(err):
                raise asyncio.CancelledError from err
            if steps.failure_type(err) == NOTHING_QUEUED:  # nothing recorded, nothing to do
                self.state.phase = "idle"
                return RunResult(
                    session_id=run.session_id, run_id=run.run_id, status="completed", turns=0
                )
            return await self.finish([], "error", root_message(err), None)
        self.state.leaf = started.leaf_id
        self.state.inbox.config = self.state.inbox.config or started.config
        self.state.hook_paths = started.workflow_hooks
        self.state.host = started.host
        self.state.snapshot, self.state.override = started.snapshot, None
        try:
            self.state.hooks = HookRunner(started.workflow_hooks)
        except HookError as err:
            return await self.finish([], "error", str(err), None)
        return None

    def restore(self, carried: CarriedState) -> None:
        """Pick the run up where its previous execution continued as new."""
        self.state.turn, self.state.first_turn = carried.turn, carried.turn
        self.state.leaf, self.state.usage = carried.leaf_id, carried.usage
        self.state.last_assistant = carried.last_assistant_id
        self.state.executions = carried.executions
        self.state.hook_paths = carried.hooks
        self.state.host = carried.host
        self.state.output_tries = carried.output_tries
        self.state.inbox = Inbox.restore(carried.inbox)
        self.state.snapshot, self.state.override = carried.snapshot, carried.override
        self.state.hooks = HookRunner(carried.hooks)

    async def compact(self, reason: str) -> CompactResult:
        await self.set_phase("compaction")
        try:
            result = await compact(
                session_id=self.state.input.session_id,
                op_id=self.state.input.run_id,
                leaf_id=self.state.leaf,
                settings=self.state.input.options.compaction,
                options=self.state.input.options,
                reason=reason,
                on_summary=self.state.summarizing.append,
            )
        except FailureError as err:  # a step cancelled by an abort: the run aborts
            if steps.cancelled(err):
                raise asyncio.CancelledError from err
            raise
        self.state.summarizing.clear()  # counted below, if it was stored
        if result.compacted and result.entry_id:
            self.state.leaf = result.entry_id
        if result.usage is not None and workflow.patched(patches.SUMMARY_USAGE):
            # The summary is a model call of the run: its tokens and cost count toward
            # the run's usage and budget (not its turns: a turn is a call of the loop).
            self.state.usage = self.state.usage.plus(result.usage)
            self.state.budgets.add_turn(result.cost)
        await self.set_phase("turn")
        return result

    async def save(self, commit: TurnCommit) -> None:
        """A save point on its own, for when no model call follows at once."""
        self.saving(commit)
        await steps.save_turn(
            SaveTurnInput(
                session_id=self.state.input.session_id,
                run_id=self.state.input.run_id,
                parent_id=self.state.leaf,
                commit=commit,
            )
        )
        self.saved(commit)

    def saving(self, commit: TurnCommit | None) -> None:
        """`commit` is handed to a step that saves it: until that returns, an abort saves
        it too (a save point saved before changes nothing the second time)."""
        self.state.unsaved = [commit] if commit else []

    def saved(self, commit: TurnCommit) -> None:
        """`commit` is saved: the session's leaf is its last entry, its pending writes are
        stored."""
        self.state.leaf, self.state.unsaved = commit.leaf_after(self.state.leaf), []
        self.state.inbox.writes_saved()

    def time_to_continue_as_new(self) -> bool:
        """Before Temporal would suggest it (4,096 events or 4 MB), or after the
        configured number of turns in this execution."""
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() >= CONTINUE_AT_EVENTS
            or info.get_current_history_size() >= CONTINUE_AT_BYTES
            or self.state.turn - self.state.first_turn
            >= self.state.input.options.continue_as_new_after_turns
        )

    async def continue_as_new(self) -> NoReturn:
        """Hand the run to a fresh execution at this quiet boundary: the turn is saved,
        no tool runs, no handler is mid-way; queues and config travel with it."""
        await workflow.wait_condition(workflow.all_handlers_finished)
        info = workflow.info()
        await steps.record_events(
            RecordEventsInput(
                session_id=self.state.input.session_id,
                run_id=self.state.input.run_id,
                key=f"{self.state.input.run_id}/continued/{self.state.turn}",
                events=[
                    ContinuedAsNew(
                        turn=self.state.turn,
                        history_events=info.get_current_history_length(),
                        history_bytes=info.get_current_history_size(),
                    )
                ],
            )
        )
        carried = CarriedState(
            turn=self.state.turn,
            leaf_id=self.state.leaf,
            snapshot=self.state.snapshot,
            usage=self.state.usage,
            hooks=self.state.hook_paths,
            override=self.state.override,
            last_assistant_id=self.state.last_assistant,
            executions=self.state.executions + 1,
            inbox=self.state.inbox.export(),
            host=self.state.host,
            budget=self.state.budgets.export(),
            output_tries=self.state.output_tries,
        )
        workflow.continue_as_new(self.state.input.model_copy(update={"carried": carried}))

    def commit(
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
        writes, session_config = self.state.inbox.take_writes()
        entries, consumed = queued_entries(queued or [], queue)
        return TurnCommit(
            turn=self.state.turn,
            slots=slots,
            entries=[*writes, *(extra or []), *entries],
            usage=self.state.usage,
            continues=continues,
            session_config=session_config,
            consumed=consumed,
        )

    async def abort(self) -> RunResult:
        """Save what the aborted turn produced, mark the abort for the model, drop the
        queues (returned to the caller), and end the run as aborted."""
        if not self.state.leaf:  # aborted before the run started: nothing of it is stored
            return await self.finish(
                [], "aborted", None, None, cleared=self.state.inbox.clear_queues()
            )
        commits = list(self.state.unsaved)
        marker = abort_marker(self.new_id(), self.now_ms())
        cleared = self.state.inbox.clear_queues()
        current = self.state.current
        slots = current.aborted_slots(self.now_ms()) if current else []
        commits.append(self.commit(slots, continues=False, extra=[marker]))
        last_assistant = current.assistant_id if current else None
        return await self.finish(
            commits,
            "aborted",
            None,
            last_assistant,
            cleared=cleared,
            # Stopped while compacting: its summary may be stored, its usage not counted.
            compaction_id=self.state.summarizing[-1] if self.state.summarizing else None,
        )

    async def finish(
        self,
        commits: list[TurnCommit],
        status: RunStatus,
        error: str | None,
        last_assistant_id: str | None,
        cleared: tuple[list[QueuedMessage], list[QueuedMessage]] | None = None,
        compaction_id: str | None = None,
    ) -> RunResult:
        run = self.state.input
        writes, session_config = self.state.inbox.take_writes()
        # Queued messages the run never reached start the session's next run, unless the
        # user aborted (then they go back to the caller). Taken from the inbox: what
        # signals bring from now on comes too late for this run (`start_next_run`).
        leftover = [] if cleared else [m for q in self.state.inbox.clear_queues() for m in q]
        data = FinishRunInput(
            session_id=run.session_id,
            run_id=run.run_id,
            kind=run.kind,
            status=status,
            turns=self.state.turn,
            usage=self.state.usage,
            error=error,
            parent_id=self.state.leaf,
            commits=commits,
            entries=writes,
            session_config=session_config,
            leftover=leftover,
            last_assistant_entry_id=last_assistant_id,
            compaction_id=compaction_id,
        )
        finished = await steps.finish_run(data)
        self.state.queued_input = finished.queued_input
        # The stored usage adds the replies of model calls the run stopped.
        self.state.usage = finished.usage or self.state.usage
        self.state.phase = "idle"
        steering, follow_ups = cleared or ([], [])
        return RunResult(
            **data.model_dump(include=_REPORTED - {"usage"}),
            usage=self.state.usage,
            leaf_id=finished.leaf_id,
            final_text=finished.final_text,
            cleared_steering=[item.text for item in steering],
            cleared_follow_ups=[item.text for item in follow_ups],
            cancelled_inputs=finished.cancelled_inputs,
            cost_usd=self.state.budgets.cost_usd,
            unpriced_models=sorted(self.state.budgets.unpriced),
        )

    async def start_next_run(self, result: RunResult) -> RunResult:
        """After the run's end: input sent while it was open (queued in the store, or
        steering and follow-ups that reached it after its end was stored) starts the next
        run, as a new execution of this workflow: the session stays busy in between, and
        the next run takes all the input waiting (`start_run`). Returns `result` when
        nothing waits, or when the session is stopped meanwhile: then what waited is
        cancelled, as a stop cancels it."""
        if (
            result.status == "aborted"
            or workflow.info().parent is not None  # a sub-agent: its parent has its result
            or not workflow.patched(patches.QUEUED_INPUT_RUNS)
        ):
            return result
        session_id = self.state.input.session_id
        try:
            await workflow.wait_condition(workflow.all_handlers_finished)
            late = [m for q in self.state.inbox.clear_queues() for m in q]
            if late:
                await steps.queue_input(QueueInputInput(session_id=session_id, items=late))
        except asyncio.CancelledError:
            await steps.queue_input(
                QueueInputInput(session_id=session_id, items=[], cancel_waiting=True)
            )
            return result
        if not (late or self.state.queued_input):
            return result
        run_id = self.new_id()
        workflow.continue_as_new(
            RunInput(
                session_id=session_id,
                run_id=run_id,
                kind="queued",
                options=self.state.input.options,
                # The input that waited is the same session's: its tools get this run's.
                deps=self.state.input.deps,
            ),
            memo={"kind": "run", "run_id": run_id},
            search_attributes=session_attributes(session_id, "run", run_id),
        )

    async def set_phase(self, phase: Phase, *events: RunEventPayload) -> None:
        self.state.phase = phase
        await steps.record_events(
            RecordEventsInput(
                session_id=self.state.input.session_id,
                run_id=self.state.input.run_id,
                key=f"{self.state.input.run_id}/phase/{self.new_id()}",
                events=[*events, PhaseChanged(phase=phase)],
                phase=phase,
            )
        )

    async def emit(self, kind: str, *events: RunEventPayload) -> None:
        """Events of the run that change no phase (an approval asked for, a host waited
        for), each kind with keys of its own."""
        await steps.record_events(
            RecordEventsInput(
                session_id=self.state.input.session_id,
                run_id=self.state.input.run_id,
                key=f"{self.state.input.run_id}/{kind}/{self.new_id()}",
                events=list(events),
            )
        )

    def new_id(self) -> str:
        return workflow.uuid4().hex

    def now_ms(self) -> int:
        return int(workflow.now().timestamp() * 1000)
