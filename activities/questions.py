"""The store step after an `ask_user` question: stage the call's result.

The question waits in the workflow (`workflows/questions.py`); once it is answered or
timed out, this short transaction (a local activity) stages the result under the id
the workflow chose and emits the call's end. Idempotent: a retry stages the same entry
and its events carry dedup keys.
"""

from __future__ import annotations

from temporalio import activity

from duragent.activities.decided_calls import finish_decided_call
from duragent.domain.questions import ASK_USER_TOOL, STAGE_ANSWER, StageAnswerInput
from duragent.domain.tools import ToolResult
from duragent.domain.turns import ToolCallOutcome
from duragent.store.db import Database


class Questions:
    def __init__(self, db: Database) -> None:
        self._db = db

    @activity.defn(name=STAGE_ANSWER)
    def stage_answer(self, data: StageAnswerInput) -> ToolCallOutcome:
        """Stage the call's result (the answer, or that none came in time) and emit its
        end (`finish_decided_call`)."""
        return finish_decided_call(
            self._db,
            data,
            kind="question",
            call_id=data.call_id,
            tool_name=ASK_USER_TOOL,
            result=question_result(data),
            started_at_ms=data.asked_at_ms,
            ended_at_ms=data.answered_at_ms,
        )


def question_result(data: StageAnswerInput) -> ToolResult:
    """What the model reads: the answer as the user wrote it, or an error saying that no
    answer came within the run's timeout."""
    if data.answer is not None:
        details = {"answered_by": data.by} if data.by else {}
        return ToolResult.text(data.answer, **details)
    return ToolResult.error(
        f"No answer: the user did not answer within {data.timeout_s or 0:g} s (the run's "
        "ask_user timeout). Go on without the answer if you can, saying what you assumed; "
        "else stop and say what you need.",
        timed_out=True,
    )
