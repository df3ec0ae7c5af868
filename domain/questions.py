"""Asking the user (docs/SPEC.md, asking the user): the `ask_user` tool's question and its answer.

The model calls `ask_user` with a question and, optionally, choices. The call never runs
as a tool activity: the turn's activity reads the question off the call's arguments
(`UserQuestion`, checked there) and hands the call to the workflow, which waits for the
`answer_question` update as it waits for an approval (no activity, no timer unless the
run's `ask_user_timeout_s` is set, for days if need be). The answer becomes the call's
result. With choices, the answer is one of them unless the question allows other text.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

ASK_USER_TOOL = "ask_user"
STAGE_ANSWER = "stage_answer"
MAX_QUESTION_CHARS = 4000
MAX_CHOICES = 20
MAX_CHOICE_CHARS = 500
MAX_ANSWER_CHARS = 16000
"""An answer is a reply typed by a person, not a document: bounded well below the
input limit, since it travels in the workflow's history."""

AnswerStatus = Literal["answered", "timeout", "withdrawn"]


def question_ended_text(call_id: str, *, answered: bool, by: str | None) -> str:
    """Why an answer to a question that no longer waits is refused: the run's gate says
    it while the run is open, the client from the stored record once the run is over."""
    how = (
        "was already answered" + (f" by {by}" if by else "")
        if answered
        else "no longer waits (it timed out or the run stopped waiting)"
    )
    return f"question {call_id!r} {how}; nothing changed"


class UserQuestion(BaseModel):
    """What the model asks: the `ask_user` tool's arguments, as the workflow sees them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question: str = Field(
        min_length=1,
        max_length=MAX_QUESTION_CHARS,
        description="The question, complete in itself: the user may read it hours later.",
    )
    choices: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_CHOICES,
        description="Answers to pick from, if the question has a few likely ones.",
    )
    allow_other: bool = Field(
        default=True,
        description=(
            "With choices: whether the user may also answer in their own words "
            "(default true); false: the answer is exactly one of the choices."
        ),
    )

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the question must not be blank")
        return value

    @field_validator("choices")
    @classmethod
    def _choices(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        for choice in value:
            if not choice.strip():
                raise ValueError("a choice must not be blank")
            if len(choice) > MAX_CHOICE_CHARS:
                raise ValueError(f"a choice is at most {MAX_CHOICE_CHARS} characters")
        if len(set(value)) != len(value):
            raise ValueError("the choices must differ")
        return value

    def refusal(self, answer: str) -> str | None:
        """Why `answer` does not answer this question, or None if it does."""
        if not answer.strip():
            return "the answer must not be blank"
        if self.choices and not self.allow_other and answer not in self.choices:
            listed = ", ".join(repr(choice) for choice in self.choices)
            return f"the answer must be one of the choices: {listed}"
        return None


class UserAnswer(BaseModel):
    """A person's answer to one waiting question (the `answer_question` update)."""

    model_config = ConfigDict(extra="forbid")

    call_id: str = Field(min_length=1, max_length=200)
    answer: str = Field(min_length=1, max_length=MAX_ANSWER_CHARS)
    by: str | None = Field(default=None, max_length=200)
    """Who answered (an API user), for the record."""


class PendingQuestion(BaseModel):
    """A question waiting for its answer, as clients list it."""

    model_config = ConfigDict(extra="forbid")

    call_id: str
    question: str
    choices: list[str] | None = None
    allow_other: bool = True
    turn: int
    assistant_entry_id: str
    asked_at: int
    """Milliseconds since the epoch."""
    timeout_s: float | None = None


class StageAnswerInput(BaseModel):
    """Stage a question's result: the answer, or that no one answered in time."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    run_id: str
    result_entry_id: str
    call_id: str
    asked_at_ms: int
    answered_at_ms: int
    answer: str | None = None
    """None: the question timed out."""
    by: str | None = None
    timeout_s: float | None = None


class AnswerOutcome(BaseModel):
    """What the update answers when the run took the answer."""

    model_config = ConfigDict(extra="forbid")

    call_id: str
    answer: str
