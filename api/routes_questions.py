"""`ask_user` questions over HTTP: those that wait, and answers.

An answer returns once the run took it (200), or says why not: no such question waits,
it was answered already, or the answer is not one of its choices (409); or no worker
answers for the run (503: nothing was recorded).
"""

# No `from __future__ import annotations`: FastAPI must see the local `User` dependency
# in the route signatures as an object, not as a name to look up in this module.
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from duragent.api.ownership import owned_session
from duragent.api.routes_waits import waiting_router
from duragent.client.api import DuragentClient
from duragent.domain.questions import MAX_ANSWER_CHARS, AnswerOutcome, PendingQuestion


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: str = Field(min_length=1, max_length=MAX_ANSWER_CHARS)
    """The call's result, as the model reads it (with choices: one of them, unless the
    question allows other answers)."""


def question_routes(client: DuragentClient, current_user: Callable[..., str]) -> APIRouter:
    router = waiting_router(
        client, current_user, "questions", client.questions.pending, PendingQuestion
    )
    User = Annotated[str, Depends(current_user)]

    @router.post("/sessions/{session_id}/questions/{call_id}/answer")
    async def answer(session_id: str, call_id: str, body: Answer, owner: User) -> AnswerOutcome:
        await owned_session(client, session_id, owner)
        return await client.questions.answer(session_id, call_id, body.answer, by=owner)

    return router
