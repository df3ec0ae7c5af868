"""Request and response bodies of the HTTP API."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from duragent.api.subagent_links import SessionLinks
from duragent.domain.budgets import BudgetView, waiting_text
from duragent.domain.cost import Cost, TurnCost, message_turn_cost, model_name
from duragent.domain.guidance import GuidanceIntent
from duragent.domain.prices import PriceTable
from duragent.store.records import DisplayMessage, QueueItem, RunRecord, SessionRecord, StoredEvent


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateSession(_Body):
    name: str | None = None
    workspace: str | None = None
    """A folder in your own area (a relative path such as `project`), or one under a root
    the operator allows (`DURAGENT_WORKSPACE_ROOTS`); default: a new folder for the session."""
    model: str | None = None
    system_prompt: str | None = None
    agent: str | None = None
    """Make it a session of this agent (`GET /api/agents` lists them): its model (unless
    `model` is given), instructions and tools."""


class SendInput(_Body):
    text: str = Field(min_length=1)
    guidance: bool = False
    """Busy session: send it to the run as guidance instead of queueing it."""
    intent: GuidanceIntent | None = None
    """For guidance: `interrupt` or `supplement`; default: classified from the text."""

    @model_validator(mode="after")
    def _intent_needs_guidance(self) -> SendInput:
        if self.intent is not None and not self.guidance:
            raise ValueError("intent is for guidance: send it with guidance true")
        return self


class InputResult(_Body):
    action: Literal["started", "queued"]
    run_id: str | None = None
    item: QueueItem | None = None


class QueueInput(_Body):
    text: str = Field(min_length=1)
    kind: Literal["next_turn", "guidance"] = "next_turn"
    intent: GuidanceIntent | None = None

    @model_validator(mode="after")
    def _intent_needs_guidance(self) -> QueueInput:
        if self.intent is not None and self.kind != "guidance":
            raise ValueError("intent is for guidance: send it with kind guidance")
        return self


class QueueAction(_Body):
    action: Literal["edit", "guide"]
    """edit: cancel the item and get its text back; guide: send it to the run in progress."""
    intent: GuidanceIntent | None = None

    @model_validator(mode="after")
    def _intent_needs_guide(self) -> QueueAction:
        if self.intent is not None and self.action != "guide":
            raise ValueError("intent is for guidance: send it with action guide")
        return self


class QueueActionResult(_Body):
    item: QueueItem
    text: str | None = None
    """For edit: the text to put back in the input box."""


class SessionView(_Body):
    session: SessionRecord
    phase: str


class RunView(_Body):
    phase: str
    latest: RunRecord | None
    cost: Cost | None = None
    """What the latest run cost so far (its stored turns, each at its model's price)."""
    awaiting_host: str | None = None
    """The host the run waits for (phase `awaiting_host`): its worker is gone."""


class ShownTurnCost(TurnCost):
    """What a shown message's model call cost, and whether the scripted offline model
    answered it (in `model`'s name: the page then names the offline model, as its header
    does)."""

    offline: bool = False


class ShownMessage(DisplayMessage):
    """A display message with, for an assistant message, what its model call cost."""

    turn_cost: ShownTurnCost | None = None
    """None for messages other than an assistant's."""


def shown_turn_cost(
    message: dict[str, object], prices: PriceTable, offline_for: Callable[[str], bool]
) -> ShownTurnCost | None:
    """`message_turn_cost` of a stored message, marked `offline` when its model is one the
    offline model stands in for on this server (`Settings.offline_for`)."""
    cost = message_turn_cost(message, prices)
    if cost is None:
        return None
    provider = message.get("provider")
    name = model_name(provider if isinstance(provider, str) else None, cost.model)
    return ShownTurnCost(**dict(cost), offline=bool(name) and offline_for(name or ""))


CURSOR_MAX = 2**53 - 1
"""The largest cursor: JSON numbers are exact up to here in every client (JavaScript)."""
CURSOR_RULE = f"a cursor is an integer from 0 to {CURSOR_MAX} (2^53 - 1)"


def _cursor(value: object) -> int:
    """Digits only (no sign, exponent or blank), at most `CURSOR_MAX`: anything else is
    refused rather than read as 0, which would replay a session from its start."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.isascii() and value.isdigit():
        number = int(value)
    else:
        raise PydanticCustomError("cursor", CURSOR_RULE)
    if not 0 <= number <= CURSOR_MAX:
        raise PydanticCustomError("cursor", CURSOR_RULE)
    return number


Cursor = Annotated[
    int,
    BeforeValidator(_cursor),
    WithJsonSchema({"type": "integer", "minimum": 0, "maximum": CURSOR_MAX}),
]
"""A per-session `seq` sent by a client (query parameter or `Last-Event-ID`)."""


class BudgetState(BudgetView):
    """A session's budget and spending, with what a run that waits for a raise says of
    its wait (the page shows it after a reload, as it showed the live event's)."""

    waiting_message: str | None = None
    """The `message` of the run's `budget_reached` events; None when it does not wait."""

    @classmethod
    def of(cls, view: BudgetView) -> BudgetState:
        message = waiting_text(view.waiting) if view.waiting else None
        return cls(**dict(view), waiting_message=message)


class SessionState(_Body):
    """Everything a UI needs to rebuild itself: the newest page of messages and events,
    or the page after each cursor sent; the cursors to ask for what comes next."""

    messages: list[ShownMessage]
    activity_events: list[StoredEvent]
    run: RunView
    session_cost: Cost
    """What all the session's runs cost (`cost_usd` None: a model without a price)."""
    input_queue: list[QueueItem]
    messages_cursor: int
    """The seq of the last message returned (or the cursor sent, when none was)."""
    events_cursor: int
    messages_more: bool
    """More messages after `messages_cursor` exist now: ask again from it."""
    events_more: bool
    messages_earlier: bool
    """Messages before the first one returned exist (`GET .../messages?before=`)."""
    links: SessionLinks = Field(default_factory=SessionLinks)
    """The session's sub-agents and, for a sub-agent, its parent (to open either)."""
    budget: BudgetState | None = None
    """The session's budget and spending (and the open run's), when either has one or the
    run waits for a raise."""


class MessagesPage(_Body):
    messages: list[ShownMessage]
    """Oldest first."""
    earlier: bool
    """Messages before the first one returned exist."""


class StopResult(_Body):
    run_id: str
    status: str
    cancelled_inputs: list[str]
    cleared_steering: list[str]
    cleared_follow_ups: list[str]


class ErrorBody(_Body):
    detail: str | dict[str, Any]
