"""The durable waits of a run as AG-UI interrupts, and the answers that resume them.

A run that waits for a person (phase `awaiting_approval` or `awaiting_input`: an approval,
an `ask_user` question) ends its AG-UI run with the
interrupt outcome, one `Interrupt` per thing it waits for; the workflow itself keeps
waiting, durably. The client answers with `RunAgentInput.resume`, and each entry is taken
by the wait its interrupt id names (`<kind>:<id>@<position>`, the position being the seq
of the last stored event the interrupted AG-UI run told: the answering run goes on from
there, so nothing that happened in between is missed).

A new kind of wait is one `Wait` in `WAITS`: the phase it shows as, the prefix of its
interrupt ids, how to list what waits and how to take an answer.
"""

# No `from __future__ import annotations`: pydantic reads the annotations below.
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ag_ui.core import Interrupt, ResumeEntry
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from duragent.client.api import DuragentClient
from duragent.client.bounds import one_line
from duragent.client.errors import InvalidChange
from duragent.domain.approvals import MAX_REASON_CHARS, PendingApproval
from duragent.domain.questions import MAX_ANSWER_CHARS, PendingQuestion

MAX_RESUME_ENTRIES = 100
"""Each answer is an update the run takes in turn: one input answers at most this many."""
APPROVAL_REASON = "tool_approval"
"""The `reason` of an approval's interrupt."""
QUESTION_REASON = "ask_user"
"""The `reason` of an `ask_user` question's interrupt."""


class ApprovalAnswer(BaseModel):
    """The `payload` of a resume entry that answers an approval."""

    model_config = ConfigDict(extra="forbid")

    approved: bool
    always: bool = False
    """With `approved`: also allow this tool (bash: this exact command) from then on."""
    reason: str | None = Field(default=None, max_length=MAX_REASON_CHARS)
    """Without `approved`: what the model reads as the call's error result."""


APPROVAL_SCHEMA: dict[str, Any] = ApprovalAnswer.model_json_schema()


def expiry(since_ms: int, timeout_s: float | None) -> str | None:
    """When a wait that began at `since_ms` times out (ISO 8601), if it does."""
    if timeout_s is None:
        return None
    return datetime.fromtimestamp(since_ms / 1000 + timeout_s, UTC).isoformat(timespec="seconds")


def approval_interrupt(pending: PendingApproval) -> Interrupt:
    return Interrupt(
        expires_at=expiry(pending.requested_at, pending.timeout_s),  # then denied unanswered
        id=f"approval:{pending.call_id}",
        reason=APPROVAL_REASON,
        message=f"Allow {pending.tool_name}: {pending.args_preview}?",
        tool_call_id=pending.call_id,
        response_schema=APPROVAL_SCHEMA,
        metadata={
            "tool_name": pending.tool_name,
            "arguments": pending.arguments,
            "rule": pending.rule,
            "timeout_s": pending.timeout_s,
        },
    )


async def approval_interrupts(client: DuragentClient, session_id: str) -> list[Interrupt]:
    return [approval_interrupt(p) for p in await client.approvals.pending(session_id)]


async def answer_approval(
    client: DuragentClient, session_id: str, call_id: str, entry: ResumeEntry, by: str
) -> None:
    if entry.status == "cancelled":
        await client.approvals.deny(session_id, call_id, "the person cancelled it", by=by)
        return
    try:
        answer = ApprovalAnswer.model_validate(entry.payload)
    except ValidationError as err:
        raise InvalidChange(f"resume {entry.interrupt_id!r}: {one_line(err)}") from err
    if answer.approved:
        await client.approvals.approve(session_id, call_id, always=answer.always, by=by)
    else:
        await client.approvals.deny(session_id, call_id, answer.reason, by=by)


class QuestionAnswer(BaseModel):
    """The `payload` of a resume entry that answers an `ask_user` question."""

    model_config = ConfigDict(extra="forbid")

    answer: str = Field(min_length=1, max_length=MAX_ANSWER_CHARS)
    """One of the choices, or the person's own words where the question allows them."""


def question_interrupt(pending: PendingQuestion) -> Interrupt:
    schema: dict[str, Any] = QuestionAnswer.model_json_schema()
    if pending.choices and not pending.allow_other:
        schema["properties"]["answer"]["enum"] = pending.choices
    return Interrupt(
        expires_at=expiry(pending.asked_at, pending.timeout_s),  # then it answers no one did
        id=f"question:{pending.call_id}",
        reason=QUESTION_REASON,
        message=pending.question,
        tool_call_id=pending.call_id,
        response_schema=schema,
        metadata={
            "choices": pending.choices,
            "allow_other": pending.allow_other,
            "timeout_s": pending.timeout_s,
        },
    )


async def question_interrupts(client: DuragentClient, session_id: str) -> list[Interrupt]:
    return [question_interrupt(q) for q in await client.questions.pending(session_id)]


async def answer_question(
    client: DuragentClient, session_id: str, call_id: str, entry: ResumeEntry, by: str
) -> None:
    if entry.status == "cancelled":  # a question has no refusal: it waits on
        raise InvalidChange(
            f"resume {entry.interrupt_id!r}: a question is answered, not cancelled"
            " (stop the run to withdraw it)"
        )
    try:
        answer = QuestionAnswer.model_validate(entry.payload)
    except ValidationError as err:
        raise InvalidChange(f"resume {entry.interrupt_id!r}: {one_line(err)}") from err
    await client.questions.answer(session_id, call_id, answer.answer, by=by)


def at_position(interrupt_id: str, position: int) -> str:
    """The id an interrupt has in an AG-UI run that stopped after the stored event
    `position`: a resume answering it goes on from there."""
    return f"{interrupt_id}@{position}"


def position_of(interrupt_id: str) -> tuple[str, int | None]:
    """An interrupt id without its `@position`, and the position (None without one)."""
    head, at, seq = interrupt_id.rpartition("@")
    if at and seq.isascii() and seq.isdigit() and len(seq) <= 16:
        return head, int(seq)
    return interrupt_id, None


@dataclass(frozen=True)
class Wait:
    """One kind of durable wait of a run."""

    phase: str
    """The run's phase while it waits."""
    prefix: str
    """Its interrupts' ids are `<prefix>:<id of what waits>`."""
    interrupts: Callable[[DuragentClient, str], Awaitable[list[Interrupt]]]
    """What waits now, as interrupts (asks the run)."""
    answer: Callable[[DuragentClient, str, str, ResumeEntry, str], Awaitable[None]]
    """Take a resume entry for the thing of this id (the user is the last argument)."""


WAITS = (
    Wait("awaiting_approval", "approval", approval_interrupts, answer_approval),
    Wait("awaiting_input", "question", question_interrupts, answer_question),
)
WAIT_PHASES = {wait.phase: wait for wait in WAITS}


async def waiting_interrupts(
    client: DuragentClient, session_id: str, phase: str
) -> list[Interrupt]:
    """What the run waits for in `phase` (none when it is no wait). Every kind is listed:
    a turn may wait for an approval and a question at once, and the phase names one."""
    if phase not in WAIT_PHASES:
        return []
    return [found for wait in WAITS for found in await wait.interrupts(client, session_id)]


async def resume(
    client: DuragentClient, session_id: str, entries: list[ResumeEntry], by: str
) -> list[int]:
    """Take the answers, in order; an interrupt id no wait knows is refused. The positions
    the answered interrupts were raised at (`at_position`)."""
    if len(entries) > MAX_RESUME_ENTRIES:
        raise InvalidChange(f"resume: at most {MAX_RESUME_ENTRIES} entries, not {len(entries)}")
    positions = []
    for entry in entries:
        interrupt_id, position = position_of(entry.interrupt_id)
        if position is not None:
            positions.append(position)
        prefix, _, key = interrupt_id.partition(":")
        wait = next((w for w in WAITS if w.prefix == prefix), None)
        if wait is None or not key:
            known = ", ".join(f"{w.prefix}:<id>" for w in WAITS)
            raise InvalidChange(
                f"resume: interrupt id {entry.interrupt_id!r} is not one of this API's ({known})"
            )
        await wait.answer(client, session_id, key, entry, by)
    return positions
