"""The `ask_user` gate: a question the model asks waits here for the user's answer.

Like an approval (`workflows.approvals`), a waiting question runs no activity and sets no
timer (unless the run's `ask_user_timeout_s` is set): it is a `wait_condition` on the
workflow's own state, so it survives worker and server restarts and may wait for days.
Answers arrive as the `answer_question` update; its validator and handler run on the
workflow's thread, and the handler records the answer before it returns, so of two
racing answers exactly one is taken and the other's update is refused. Once answered
(or timed out), the `stage_answer` local activity stages the call's result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from duragent.domain.events import QuestionAnswered, QuestionAsked, RunEventPayload
    from duragent.domain.questions import (
        AnswerOutcome,
        PendingQuestion,
        StageAnswerInput,
        UserAnswer,
        UserQuestion,
        question_ended_text,
    )
    from duragent.domain.tools import ToolCallRef
    from duragent.domain.turn_in_progress import TurnInProgress
    from duragent.domain.turns import ToolCallOutcome

from duragent.workflows import steps
from duragent.workflows.run_state import RunSteps

"""Marks the histories of runs in which the model asked the user a question."""

Record = Callable[[RunEventPayload], Awaitable[None]]
"""Records a run event (and the phase it leaves the run in)."""


class AnswerRefused(ValueError):
    """An answer the gate cannot take: the update is rejected with this message."""


class QuestionGate:
    def __init__(self) -> None:
        self._waiting: dict[str, tuple[PendingQuestion, UserQuestion]] = {}
        self._answered: dict[str, UserAnswer | None] = {}
        """Every question ended in this execution: its answer (None: timed out or
        withdrawn)."""

    def pending(self) -> list[PendingQuestion]:
        return [pending for pending, _ in self._waiting.values()]

    @property
    def waiting(self) -> bool:
        return bool(self._waiting)

    def check(self, answer: UserAnswer) -> None:
        """`AnswerRefused` unless the answer can be taken now."""
        call_id = answer.call_id
        if call_id in self._answered:
            earlier = self._answered[call_id]
            by = earlier.by if earlier is not None else None
            raise AnswerRefused(question_ended_text(call_id, answered=earlier is not None, by=by))
        waiting = self._waiting.get(call_id)
        if waiting is None:
            listed = ", ".join(self._waiting) or "none"
            raise AnswerRefused(
                f"no question {call_id!r} waits for an answer in this run (waiting: {listed})"
            )
        refusal = waiting[1].refusal(answer.answer)
        if refusal is not None:
            raise AnswerRefused(f"question {call_id!r}: {refusal}")

    def answer(self, answer: UserAnswer) -> AnswerOutcome:
        """Take an answer (checked again: a racing update may have taken one since its
        validator ran)."""
        try:
            self.check(answer)
        except AnswerRefused as err:
            raise ApplicationError(str(err), type="AnswerRefused", non_retryable=True) from err
        self._answered[answer.call_id] = answer
        return AnswerOutcome(call_id=answer.call_id, answer=answer.answer)

    async def wait(
        self, run: RunSteps, turn: TurnInProgress, call: ToolCallRef, record: Record
    ) -> ToolCallOutcome:
        """The call's outcome once answered (or timed out), its result staged.
        Cancellation (abort, interrupting guidance) withdraws the question and
        propagates: the batch then answers the call as stopped."""
        question = call.question
        assert question is not None
        timeout_s = run.state.input.options.ask_user_timeout_s
        asked_at = run.now_ms()
        pending = PendingQuestion(
            call_id=call.id,
            question=question.question,
            choices=question.choices,
            allow_other=question.allow_other,
            turn=run.state.turn,
            assistant_entry_id=turn.assistant_id,
            asked_at=asked_at,
            timeout_s=timeout_s,
        )
        self._waiting[call.id] = (pending, question)
        # A new question: an id the model used before (a provider replaying a reply) does
        # not take that question's answer.
        self._answered.pop(call.id, None)
        await record(
            QuestionAsked(
                call_id=call.id,
                question=question.question,
                choices=question.choices,
                allow_other=question.allow_other,
                turn=run.state.turn,
                assistant_entry_id=turn.assistant_id,
                timeout_s=timeout_s,
            )
        )
        timeout = timedelta(seconds=timeout_s) if timeout_s else None
        try:
            await workflow.wait_condition(lambda: call.id in self._answered, timeout=timeout)
        except TimeoutError:
            self._answered[call.id] = None
        except asyncio.CancelledError:
            self._waiting.pop(call.id, None)
            self._answered.setdefault(call.id, None)
            await record(QuestionAnswered(call_id=call.id, status="withdrawn"))
            raise
        self._waiting.pop(call.id, None)
        answer = self._answered[call.id]
        stage = StageAnswerInput(
            session_id=run.state.input.session_id,
            run_id=run.state.input.run_id,
            result_entry_id=turn.result_id(call.id),
            call_id=call.id,
            asked_at_ms=asked_at,
            answered_at_ms=run.now_ms(),
            answer=answer.answer if answer else None,
            by=answer.by if answer else None,
            timeout_s=timeout_s,
        )
        outcome = await steps.stage_answer(stage)
        if answer is None:
            await record(QuestionAnswered(call_id=call.id, status="timeout"))
        else:
            ended = QuestionAnswered(
                call_id=call.id, status="answered", answer=answer.answer, by=answer.by
            )
            await record(ended)
        return outcome
