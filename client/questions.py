"""Questions the model asks the user (`ask_user`): those that wait, and answers.

An answer is the `answer_question` update of the session's run: the caller learns at
once whether the run took it (a second answer to the same question is refused). An
update needs a worker; when none answers for the run, the answer is refused with
`AnswerNotRecorded` (nothing was sent, so nothing is taken later by surprise), and the
update's wait for a worker is bounded as well.
"""

from __future__ import annotations

from pydantic import ValidationError

from duragent.client.bounds import one_line
from duragent.client.errors import AnswerNotRecorded, AnswerRefused
from duragent.client.part import StoreBackedPart, SyncPart
from duragent.client.waits import ended_event, send_word, waiting
from duragent.domain.events import QuestionAnswered
from duragent.domain.questions import (
    AnswerOutcome,
    PendingQuestion,
    UserAnswer,
    question_ended_text,
)
from duragent.workflows.session_run import SessionRun


class SyncQuestions(SyncPart):
    """What the store says of questions (`client.sync.questions`)."""

    def _ended(self, session_id: str, call_id: str) -> str | None:
        """Why an answer to question `call_id` comes too late, if the store shows that
        question ended (answered, timed out or withdrawn)."""
        ended = ended_event(
            self._client, session_id, "question_answered", call_id, QuestionAnswered
        )
        if ended is None:
            return None
        return question_ended_text(call_id, answered=ended.status == "answered", by=ended.by)


class Questions(StoreBackedPart[SyncQuestions]):
    """The `ask_user` questions of a session's run that wait, and answers to them."""

    async def pending(self, session_id: str) -> list[PendingQuestion]:
        """The questions of the session's run that wait for an answer; empty when none
        waits (or no run is open)."""
        what = "its waiting questions"
        return await waiting(self._client, session_id, SessionRun.questions, what)

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
        return await send_word(
            self._client,
            session_id,
            SessionRun.answer_question,
            checked,
            what=f"answer question {call_id!r}",
            refused=AnswerRefused,
            not_recorded=AnswerNotRecorded,
            too_late=lambda: self._store._ended(session_id, call_id),
        )
