"""Questions the model asks the user (`ask_user`): those that wait, and answers.

An answer is the `answer_question` update of the session's run: the caller learns at
once whether the run took it (a second answer to the same question is refused). An
update needs a worker; when none answers for the run, the answer is refused with
`AnswerNotRecorded` (nothing was sent, so nothing is taken later by surprise), and the
update's wait for a worker is bounded as well.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from pydantic import ValidationError
from temporalio.service import RPCError

from duragent.client.bounds import one_line
from duragent.client.errors import (
    AnswerNotRecorded,
    AnswerRefused,
    WorkerNotAnswering,
)
from duragent.client.part import StoreBackedPart, SyncPart
from duragent.domain.events import QuestionAnswered
from duragent.domain.questions import (
    AnswerOutcome,
    PendingQuestion,
    UserAnswer,
    question_ended_text,
)
from duragent.store import events
from duragent.workflows.session_run import SessionRun

ANSWER_TIMEOUT = timedelta(seconds=10)
"""How long an answer (or a listing) waits for the run's worker to take it."""


class SyncQuestions(SyncPart):
    """What the store says of questions (`client.sync.questions`)."""

    def _ended(self, session_id: str, call_id: str) -> str | None:
        """Why an answer to question `call_id` comes too late, if the store shows that
        question ended (answered, timed out or withdrawn)."""
        with self._client.db.transaction() as db:
            payload = events.latest_for_call(db, session_id, "question_answered", call_id)
        if payload is None:
            return None
        ended = QuestionAnswered.model_validate(payload)
        return question_ended_text(call_id, answered=ended.status == "answered", by=ended.by)


class Questions(StoreBackedPart[SyncQuestions]):
    """The `ask_user` questions of a session's run that wait, and answers to them."""

    async def pending(self, session_id: str) -> list[PendingQuestion]:
        """The questions of the session's run that wait for an answer; empty when none
        waits (or no run is open)."""
        handle = await self._client.workflows.open_run(session_id)
        if handle is None:
            return []
        try:
            return await asyncio.wait_for(
                handle.query(SessionRun.questions, rpc_timeout=ANSWER_TIMEOUT),
                timeout=ANSWER_TIMEOUT.total_seconds(),
            )
        except (RPCError, TimeoutError) as err:
            raise WorkerNotAnswering(session_id, "its waiting questions cannot be listed") from err

    async def answer(
        self, session_id: str, call_id: str, answer: str, *, by: str | None = None
    ) -> AnswerOutcome:
        """Answer a waiting question: the text becomes the `ask_user` call's result. With
        choices, the text is one of them unless the question allows other answers."""
        try:
            checked = UserAnswer(call_id=call_id, answer=answer, by=by)
        except ValidationError as err:
            raise AnswerRefused(one_line(err)) from err
        if not answer.strip():
            raise AnswerRefused("the answer must not be blank")
        return await self._client.workflows.update_open_run(
            session_id,
            SessionRun.answer_question,
            checked,
            what=f"answer question {call_id!r}",
            timeout=ANSWER_TIMEOUT,
            refused=AnswerRefused,
            not_taken=lambda detail: AnswerNotRecorded(session_id, detail),
            settled=lambda: self._store._ended(session_id, call_id),
        )
