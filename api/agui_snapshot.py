"""What an AG-UI client holds of a session's conversation, and the `MESSAGES_SNAPSHOT`s
that give it the transcript's messages in the transcript's order (`api/agui_events.py`,
"The conversation itself", says when and why).

`ClientMessages` keeps, for one AG-UI run, the messages the client sent with its input,
what the stream told it since, and their order in the client's list; `AguiRun` tells it
what it streams and asks it for the snapshot.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import BaseEvent, Message, MessagesSnapshotEvent, ToolMessage
from ag_ui.core import UserMessage as AguiUserMessage


class ClientMessages:
    """The messages an AG-UI client holds: `held` are those it sent with its input, none
    streamed to it again; `sent` the one this input sent, if any."""

    def __init__(self, held: list[Message] | None, sent: Message | None) -> None:
        self.waits_on: set[str] = set()
        """The entry ids of the replies whose calls the run waits on (`interrupt`)."""
        self.held = list(held or [])
        self.held_texts = {user_text(m.content) for m in self.held if m.role == "user"}
        self.sent = sent
        """The message this input sent, until the transcript has it: a run may take it
        later than this AG-UI run ends (the next one, started when the open one ends)."""
        self.told: dict[str, Message] = {}
        """The messages this stream told, by entry id."""
        self.done: set[str] = {m.id for m in held or []}
        """Entries the client has: never told again."""
        self.order: list[str] = [m.id for m in held or []]
        """The ids of the messages the client holds, in its order (as near as the events
        tell: a client may place a tool result by its call)."""

    def snapshots(
        self, conversation: list[Message], queued: list[tuple[str, str]]
    ) -> list[BaseEvent]:
        """The conversation as the client is to hold it (`AguiRun.with_messages`).

        `conversation` is the session's transcript (oldest first); `queued` the id and
        text of each input item waiting for a run. A run that waits on tool calls has
        their turn still waiting for its save point, out of the transcript: its reply and
        the results so far follow it, as the client holds them or this stream told them.
        Then the client's own messages that wait in the queue, under the item's id (the
        id of the entry the run that takes it writes): last, where they will be; and the
        one this input sent, as the client sent it, while it is on its way to a run."""
        told = {m.id for m in conversation}
        turn = [m for m in [*self.held, *self.told.values()] if m.id in self.waits_on]
        calls = {c.id for m in turn for c in getattr(m, "tool_calls", None) or []}
        staged: list[Message] = []
        for message in [*self.held, *self.told.values()]:
            ours = message.id in self.waits_on or (
                isinstance(message, ToolMessage) and message.tool_call_id in calls
            )
            if ours and message.id not in told:
                told.add(message.id)
                staged.append(message)
        waiting = [(item_id, text) for item_id, text in queued if item_id not in told]
        held = {m.id for m in self.held}
        if self.sent is not None and any(
            m.role == "user" and m.id not in held and m.content == user_text(self.sent.content)
            for m in conversation
        ):
            self.sent = None  # taken already (the stream has not told it yet)
        mine: list[Message] = []
        for message in self.held:
            if message.role != "user" or message.id in told:
                continue
            text = user_text(message.content)
            item = next((i for i in waiting if i[1] == text), None)
            if item is not None:
                waiting.remove(item)
                told.add(item[0])
                mine.append(AguiUserMessage(id=item[0], content=text))
            elif message is self.sent:  # on its way to a run: the client keeps its copy
                mine.append(message)
        self.done.update(told)
        snapshot = [*conversation, *staged, *mine]
        out: list[BaseEvent] = [MessagesSnapshotEvent(messages=snapshot)]
        if (cut := self._out_of_order([m.id for m in snapshot])) is not None:
            out.insert(0, MessagesSnapshotEvent(messages=snapshot[:cut]))
        self.order = [m.id for m in snapshot]
        return out

    def _out_of_order(self, ids: list[str]) -> int | None:
        """Where the list a client holds after a snapshot of `ids` would first differ from
        it (None: nowhere). The client keeps what it holds of them in its own order and
        appends the rest; a snapshot cut there first drops what comes after."""
        named = set(ids)
        kept = list(dict.fromkeys(i for i in self.order if i in named))
        held = set(kept)
        result = kept + [i for i in ids if i not in held]
        if result == ids:
            return None
        pairs = zip(result, ids, strict=False)  # as long, unless a snapshot repeats an id
        return next((at for at, (a, b) in enumerate(pairs) if a != b), len(ids))

    def told_new(self, message_id: str) -> None:
        """The client appended a message (one it did not hold) to its list."""
        if message_id not in self.order:
            self.order.append(message_id)


def user_text(content: Any) -> str:
    """The text of an AG-UI user message (its text parts, one per line)."""
    if isinstance(content, str):
        return content
    return "\n".join(part.text for part in content or [] if getattr(part, "type", None) == "text")
