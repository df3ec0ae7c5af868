"""A reply's text and thinking as streamed AG-UI messages: its deltas as
`TEXT_MESSAGE_START` / `_CONTENT` / `_END` and as one-message reasoning spans, one message
open at a time (`ReplyStream`); and the same events for a message told whole, to a client
that joined after its deltas (`whole_text`, `whole_reasoning`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ag_ui.core import (
    BaseEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

from duragent.api.agui_snapshot import ClientMessages


@dataclass(frozen=True)
class _Open:
    """The streamed message open now: its kind and its AG-UI id."""

    kind: str
    """`text` or `reasoning`."""
    message_id: str
    entry_id: str


class ReplyStream:
    """The deltas of an AG-UI run's replies, as its stored events bring them."""

    def __init__(self) -> None:
        self.open: _Open | None = None
        self.streamed: set[str] = set()
        """The entries whose deltas were streamed (the rest are told whole at their end)."""

    def delta(self, p: dict[str, Any], messages: ClientMessages) -> list[BaseEvent]:
        """The events of one `message_update`: none for a tool call's (calls come whole)
        or for an entry the client has."""
        entry_id = p["entry_id"]
        kind = {"text": "text", "thinking": "reasoning"}.get(p["kind"])
        if kind is None or not p["delta"] or entry_id in messages.done:
            return []  # tool calls come whole with their message's end
        attempt = p.get("attempt", 1)
        message_id = entry_id if attempt == 1 else f"{entry_id}:{attempt}"
        if kind == "reasoning":
            message_id = f"{message_id}:reasoning:{p['content_index']}"
        out: list[BaseEvent] = []
        if self.open is None or self.open.message_id != message_id:
            out += self.close()
            out += _opening(kind, message_id)
            self.open = _Open(kind, message_id, entry_id)
            self.streamed.add(entry_id)
            if kind == "text":
                messages.told_new(message_id)
        if kind == "reasoning":
            out.append(ReasoningMessageContentEvent(message_id=message_id, delta=p["delta"]))
        else:
            out.append(TextMessageContentEvent(message_id=message_id, delta=p["delta"]))
        return out

    def close(self) -> list[BaseEvent]:
        """End the message open now, if any."""
        if self.open is None:
            return []
        message_id, kind = self.open.message_id, self.open.kind
        self.open = None
        if kind == "reasoning":
            return [
                ReasoningMessageEndEvent(message_id=message_id),
                ReasoningEndEvent(message_id=message_id),
            ]
        return [TextMessageEndEvent(message_id=message_id)]


def _opening(kind: str, message_id: str) -> list[BaseEvent]:
    if kind == "reasoning":  # one span of one message
        return [
            ReasoningStartEvent(message_id=message_id),
            ReasoningMessageStartEvent(message_id=message_id, role="reasoning"),
        ]
    return [TextMessageStartEvent(message_id=message_id, role="assistant")]


def whole_reasoning(message_id: str, text: str) -> list[BaseEvent]:
    return [
        *_opening("reasoning", message_id),
        ReasoningMessageContentEvent(message_id=message_id, delta=text),
        ReasoningMessageEndEvent(message_id=message_id),
        ReasoningEndEvent(message_id=message_id),
    ]


def whole_text(message_id: str, role: Any, text: str) -> list[BaseEvent]:
    return [
        TextMessageStartEvent(message_id=message_id, role=role),
        TextMessageContentEvent(message_id=message_id, delta=text),
        TextMessageEndEvent(message_id=message_id),
    ]
