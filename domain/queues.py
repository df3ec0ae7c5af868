"""Steering and follow-up queues (docs/SPEC.md): what was sent, and how much a drain takes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from duragent.domain.config import QueueMode
from duragent.domain.messages import AgentMessage, text_of


class QueuedMessage(BaseModel):
    """A message sent to a running session. The id is the sender's: sending the same
    message twice (a retried call) queues it once, and it becomes the entry's id."""

    model_config = ConfigDict(extra="forbid")

    id: str
    message: AgentMessage

    @property
    def text(self) -> str:
        return text_of(self.message.content)


def drain(queue: list[QueuedMessage], mode: QueueMode) -> list[QueuedMessage]:
    """Take from the front of `queue` (in place): everything, or one message."""
    taken = queue[:] if mode == "all" else queue[:1]
    del queue[: len(taken)]
    return taken


def enqueue(queue: list[QueuedMessage], item: QueuedMessage, seen: dict[str, None]) -> bool:
    """Append unless an item with this id was ever queued; True if appended. `seen` is a
    dict (ordered, unlike a set) so that workflow code iterating it is deterministic."""
    if item.id in seen:
        return False
    seen[item.id] = None
    queue.append(item)
    return True
