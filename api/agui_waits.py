"""The durable waits of a run as AG-UI interrupts, and the answers that resume them.

A run that waits for a person (phase `awaiting_approval` or `awaiting_input`: an approval,
an `ask_user` question) ends its AG-UI run with the
interrupt outcome, one `Interrupt` per thing it waits for; the workflow itself keeps
waiting, durably. The client answers with `RunAgentInput.resume`, and each entry is taken
by the wait its interrupt id names (`<kind>:<id>@<position>`, the position being the seq
of the last stored event the interrupted AG-UI run told: the answering run goes on from
there, so nothing that happened in between is missed).

What a client holds as an interrupt may have been settled meanwhile by someone else (the
page, the CLI, the REST API, a timeout, Stop). AG-UI's interrupt rules (1.0, "Interrupts
and Resume") say what a producer does with an entry naming an interrupt it does not hold
open: the run proceeds without it and the producer warns. Refusing it instead would wedge
the official client, which keeps an interrupt pending until a run on the thread finishes
and sends nothing else until every pending one is answered. So such an entry is
`Ignored`, the caller surfaces it as a warning event, and the run goes on. An entry for an
interrupt that still waits is checked against the `responseSchema` that interrupt
advertised, strictly (`"yes"` is not a boolean): a payload that does not fit is refused
before anything is decided, and the interrupt stays open for a right answer.

A new kind of wait is one `Wait` in `WAITS`: the phase it shows as, the prefix of its
interrupt ids, how to list what waits and how to take an answer.
"""

# No `from __future__ import annotations`: pydantic reads the annotations below.
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from ag_ui.core import Interrupt, ResumeEntry
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from duragent.client.api import DuragentClient
from duragent.client.bounds import one_line
from duragent.client.errors import AnswerRefused, ApprovalRefused, InvalidChange, SessionIdle
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

    # Strict: the payload is JSON checked against the schema the interrupt advertised,
    # where `"yes"` is no boolean and `1` no string.
    model_config = ConfigDict(extra="forbid", strict=True)

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


class _Pending(Protocol):
    """What every kind of wait lists of a call that waits (`PendingApproval`,
    `PendingQuestion`)."""

    @property
    def call_id(self) -> str: ...
    @property
    def assistant_entry_id(self) -> str: ...
    @property
    def timeout_s(self) -> float | None: ...


def wait_interrupt(
    pending: _Pending,
    *,
    prefix: str,
    since_ms: int,
    reason: str,
    message: str,
    schema: dict[str, Any],
    **metadata: Any,
) -> Interrupt:
    """The interrupt of a call that waits: its id `<prefix>:<call id>`, when it times out,
    the `responseSchema` an answer must fit, and `metadata` for a client to show (with the
    assistant message that made the call, and the timeout)."""
    return Interrupt(
        expires_at=expiry(since_ms, pending.timeout_s),
        id=f"{prefix}:{pending.call_id}",
        reason=reason,
        message=message,
        tool_call_id=pending.call_id,
        response_schema=schema,
        metadata={
            "message_id": pending.assistant_entry_id,
            **metadata,
            "timeout_s": pending.timeout_s,
        },
    )


def approval_interrupt(pending: PendingApproval) -> Interrupt:
    return wait_interrupt(  # once it expires, the call is denied unanswered
        pending,
        prefix="approval",
        since_ms=pending.requested_at,
        reason=APPROVAL_REASON,
        message=f"Allow {pending.tool_name}: {pending.args_preview}?",
        schema=APPROVAL_SCHEMA,
        tool_name=pending.tool_name,
        arguments=pending.arguments,
        rule=pending.rule,
    )


async def approval_interrupts(client: DuragentClient, session_id: str) -> list[Interrupt]:
    return [approval_interrupt(p) for p in await client.approvals.pending(session_id)]


def check_approval(entry: ResumeEntry, interrupt: Interrupt) -> ApprovalAnswer | None:
    """The answer an entry gives a waiting approval (None: cancelled, which denies it);
    `InvalidChange` when its payload does not fit the interrupt's `responseSchema`."""
    if entry.status == "cancelled":
        return None
    try:
        return ApprovalAnswer.model_validate(entry.payload)
    except ValidationError as err:
        raise InvalidChange(f"resume {entry.interrupt_id!r}: {_schema_error(err)}") from err


async def answer_approval(
    client: DuragentClient, session_id: str, call_id: str, answer: Any, by: str
) -> None:
    if answer is None:
        await client.approvals.deny(session_id, call_id, "the person cancelled it", by=by)
    elif answer.approved:
        await client.approvals.approve(session_id, call_id, always=answer.always, by=by)
    else:
        await client.approvals.deny(session_id, call_id, answer.reason, by=by)


class QuestionAnswer(BaseModel):
    """The `payload` of a resume entry that answers an `ask_user` question."""

    model_config = ConfigDict(extra="forbid", strict=True)

    answer: str = Field(min_length=1, max_length=MAX_ANSWER_CHARS)
    """One of the choices, or the person's own words where the question allows them."""


def question_interrupt(pending: PendingQuestion) -> Interrupt:
    schema: dict[str, Any] = QuestionAnswer.model_json_schema()
    if pending.choices and not pending.allow_other:
        schema["properties"]["answer"]["enum"] = pending.choices
    return wait_interrupt(  # once it expires, the call's result says no one answered
        pending,
        prefix="question",
        since_ms=pending.asked_at,
        reason=QUESTION_REASON,
        message=pending.question,
        schema=schema,
        choices=pending.choices,
        allow_other=pending.allow_other,
    )


async def question_interrupts(client: DuragentClient, session_id: str) -> list[Interrupt]:
    return [question_interrupt(q) for q in await client.questions.pending(session_id)]


def check_question(entry: ResumeEntry, interrupt: Interrupt) -> QuestionAnswer:
    """The answer an entry gives a waiting question; `InvalidChange` when it is cancelled or
    its payload does not fit the interrupt's `responseSchema` (its choices included)."""
    if entry.status == "cancelled":  # a question has no refusal: it waits on
        raise InvalidChange(
            f"resume {entry.interrupt_id!r}: a question is answered, not cancelled"
            " (stop the run to withdraw it)"
        )
    try:
        answer = QuestionAnswer.model_validate(entry.payload)
    except ValidationError as err:
        raise InvalidChange(f"resume {entry.interrupt_id!r}: {_schema_error(err)}") from err
    schema = interrupt.response_schema or {}
    choices = schema.get("properties", {}).get("answer", {}).get("enum")
    if choices is not None and answer.answer not in choices:
        listed = ", ".join(repr(choice) for choice in choices)
        raise InvalidChange(
            f"resume {entry.interrupt_id!r}: the payload does not fit the interrupt's"
            f" responseSchema: answer must be one of the choices ({listed}),"
            f" not {answer.answer!r}"
        )
    return answer


async def answer_question(
    client: DuragentClient, session_id: str, call_id: str, answer: Any, by: str
) -> None:
    await client.questions.answer(session_id, call_id, answer.answer, by=by)


def _schema_error(err: ValidationError) -> str:
    return f"the payload does not fit the interrupt's responseSchema: {one_line(err)}"


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
    check: Callable[[ResumeEntry, Interrupt], Any]
    """The answer a resume entry gives the interrupt it names, checked against the
    interrupt's `responseSchema` (`InvalidChange` when it does not fit)."""
    answer: Callable[[DuragentClient, str, str, Any, str], Awaitable[None]]
    """Take a checked answer for the thing of this id (the user is the last argument)."""


WAITS = (
    Wait("awaiting_approval", "approval", approval_interrupts, check_approval, answer_approval),
    Wait("awaiting_input", "question", question_interrupts, check_question, answer_question),
)
WAIT_PHASES = {wait.phase: wait for wait in WAITS}
KNOWN_IDS = ", ".join(f"{wait.prefix}:<id>" for wait in WAITS)
NO_LONGER_WAITS = (
    "no longer waits (decided or answered elsewhere, timed out, or its run ended or was"
    " stopped); this answer was not used"
)


async def waiting_interrupts(
    client: DuragentClient, session_id: str, phase: str
) -> list[Interrupt]:
    """What the run waits for in `phase` (none when it is no wait). Every kind is listed:
    a turn may wait for an approval and a question at once, and the phase names one."""
    if phase not in WAIT_PHASES:
        return []
    return [found for wait in WAITS for found in await wait.interrupts(client, session_id)]


@dataclass(frozen=True)
class Ignored:
    """A resume entry that answered nothing, and why: the AG-UI run warns of it and goes
    on (AG-UI 1.0: an entry for an interrupt the producer does not hold open)."""

    interrupt_id: str
    why: str


@dataclass(frozen=True)
class Resumed:
    positions: list[int]
    """Where the answered interrupts were raised (`at_position`)."""
    ignored: list[Ignored]


@dataclass(frozen=True)
class _Answer:
    wait: Wait
    key: str
    interrupt_id: str
    answer: Any
    entry_id: str


async def resume(
    client: DuragentClient, session_id: str, entries: list[ResumeEntry], by: str
) -> Resumed:
    """Take the answers, in order, once every entry for an interrupt that still waits has
    been checked (a payload that does not fit its schema refuses the whole input, nothing
    decided). Entries for interrupts that no longer wait, or that this API never raises,
    are ignored; so is one whose interrupt was settled elsewhere while it was taken."""
    if len(entries) > MAX_RESUME_ENTRIES:
        raise InvalidChange(f"resume: at most {MAX_RESUME_ENTRIES} entries, not {len(entries)}")
    positions: list[int] = []
    ignored: list[Ignored] = []
    answers: list[_Answer] = []
    waiting: dict[str, dict[str, Interrupt]] = {}
    for entry in entries:
        interrupt_id, position = position_of(entry.interrupt_id)
        prefix, _, key = interrupt_id.partition(":")
        wait = next((w for w in WAITS if w.prefix == prefix), None)
        if wait is None or not key:
            why = f"not an interrupt of this API ({KNOWN_IDS}); this answer was not used"
            ignored.append(Ignored(entry.interrupt_id, why))
            continue
        if position is not None:
            positions.append(position)  # the run goes on from there, answered or not
        if prefix not in waiting:
            waiting[prefix] = {i.id: i for i in await wait.interrupts(client, session_id)}
        interrupt = waiting[prefix].get(interrupt_id)
        if interrupt is None:
            ignored.append(Ignored(entry.interrupt_id, NO_LONGER_WAITS))
            continue
        answer = wait.check(entry, interrupt)
        answers.append(_Answer(wait, key, interrupt_id, answer, entry.interrupt_id))
    for item in answers:
        try:
            await item.wait.answer(client, session_id, item.key, item.answer, by)
        except (ApprovalRefused, AnswerRefused, SessionIdle) as err:
            # Settled meanwhile (or answered twice in this input): ignored, as above. One
            # that still waits was refused for another reason, which the caller hears.
            still = await item.wait.interrupts(client, session_id)
            if any(i.id == item.interrupt_id for i in still):
                raise
            ignored.append(Ignored(item.entry_id, f"{NO_LONGER_WAITS}: {err}"))
    return Resumed(positions, ignored)
