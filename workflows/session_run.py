"""A session's run as a Temporal workflow: the agent loop (`workflows.loop`) over the
run's state, and the handlers clients reach it through. Steering, follow-ups, guidance
and config changes arrive as signals (recorded in the run's inbox, taken by the loop at
its boundaries), approvals, answers and budget raises as updates, abort as cancellation; queries
read the run's state.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from duragent.domain.approvals import ApprovalDecision, ApprovalOutcome, PendingApproval
    from duragent.domain.budgets import BudgetRaise, BudgetView
    from duragent.domain.changes import SessionChange
    from duragent.domain.guidance import GuidanceItem
    from duragent.domain.questions import AnswerOutcome, PendingQuestion, UserAnswer
    from duragent.domain.queues import QueuedMessage
    from duragent.domain.runs import Phase, RunInput, RunResult, RunView

from duragent.workflows.loop import run_until_idle
from duragent.workflows.run import Run


@workflow.defn(name="SessionRun")
class SessionRun:
    """A session's run: the loop (`workflows.loop`) over its `Run`, and the handlers
    clients reach it through."""

    def __init__(self) -> None:
        self._run = Run()
        self._state = self._run.state

    @workflow.signal
    def steer(self, item: QueuedMessage) -> None:
        """Delivered after the current turn's tool calls, before the next model call."""
        self._state.inbox.steer(item)

    @workflow.signal
    def follow_up(self, item: QueuedMessage) -> None:
        """Delivered when the agent would otherwise stop."""
        self._state.inbox.follow_up(item)

    @workflow.signal
    def guidance(self, item: GuidanceItem) -> None:
        """Runtime guidance: taken at the nearest safe point (docs/SPEC.md, runtime guidance)."""
        self._state.inbox.guide(item)

    @workflow.signal
    def change(self, change: SessionChange) -> None:
        """Config setters and session writes: pending until the next save point."""
        self._state.inbox.change(change)

    @workflow.update
    def decide_approval(self, decision: ApprovalDecision) -> ApprovalOutcome:
        """Approve or deny a waiting tool call (docs/SPEC.md, tool approval)."""
        outcome, change = self._run.approvals.decide(
            decision, self._state.inbox.pending_writes, self._run.new_id(), self._run.now_ms()
        )
        if change is not None:  # "always": saved with the turn, like any config change
            self._state.inbox.change(change)
        return outcome

    @decide_approval.validator
    def _check_approval(self, decision: ApprovalDecision) -> None:
        self._run.approvals.check(decision)

    @workflow.query
    def approvals(self) -> list[PendingApproval]:
        """The tool calls waiting for a decision."""
        return self._run.approvals.pending()

    @workflow.update
    def answer_question(self, answer: UserAnswer) -> AnswerOutcome:
        """Answer a waiting `ask_user` question (docs/SPEC.md, asking the user); a second
        answer to the same question is refused."""
        return self._run.questions.answer(answer)

    @answer_question.validator
    def _check_answer(self, answer: UserAnswer) -> None:
        self._run.questions.check(answer)

    @workflow.query
    def questions(self) -> list[PendingQuestion]:
        """The `ask_user` questions waiting for an answer."""
        return self._run.questions.pending()

    @workflow.update
    def raise_budget(self, change: BudgetRaise) -> BudgetView:
        """Raise the run's (or the session's) budget; a run waiting on it goes on
        (docs/SPEC.md, budgets)."""
        made = self._state.budgets.take_raise(change, self._run.new_id(), self._run.now_ms())
        if made is not None:  # the session's: saved with the turn, like any config change
            self._state.inbox.change(made)
        return self.budget()

    @raise_budget.validator
    def _check_raise(self, change: BudgetRaise) -> None:
        self._state.budgets.check_raise(change, self._run.spent(), self._run.session_budget())

    @workflow.query
    def budget(self) -> BudgetView:
        """The run's budgets, what it and its session spent, the limits it waits on."""
        return self._state.budgets.view(self._run.spent(), self._run.session_budget())

    @workflow.query
    def phase(self) -> Phase:
        return self._state.phase

    @workflow.query
    def state(self) -> RunView:
        return RunView(
            run_id=self._state.run_id,
            phase=self._state.phase,
            turn=self._state.turn,
            config=self._state.inbox.config,
            steering=self._state.inbox.steering,
            follow_ups=self._state.inbox.follow_ups,
            pending_writes=self._state.inbox.unsaved_writes(),
            guidance=self._state.inbox.guidance,
            awaiting_host=self._state.host if self._state.phase == "awaiting_host" else None,
            budget=self.budget()
            if self._state.budgets.in_force(
                self._state.budgets.run_budget, self._run.session_budget()
            )
            else None,
        )

    # The run.

    @workflow.run
    async def run(self, data: RunInput) -> RunResult:
        self._state.input, self._state.run_id, self._state.phase = data, data.run_id, "turn"
        self._state.budgets.begin(data, self._run.now_ms())
        try:
            if data.carried is not None:
                self._run.restore(data.carried)
                result = await run_until_idle(self._run)
            elif (failed := await self._run.start(data)) is not None:
                result = failed
            else:
                result = await run_until_idle(self._run)
        except asyncio.CancelledError:
            return await self._run.abort()
        return await self._run.start_next_run(result)
