"""What clients send a running session, held in the workflow until a save point.

Signal handlers only record: steering and follow-ups go to their queues (deduplicated by
the sender's id), config changes update the config getters return and become pending
writes. The loop drains all of it at its boundaries.
"""

from __future__ import annotations

from typing import Literal

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from duragent.domain.changes import SessionChange
    from duragent.domain.config import QueueMode, SessionConfig
    from duragent.domain.entries import MessageEntry, SessionEntry
    from duragent.domain.guidance import GuidanceIntent, GuidanceItem
    from duragent.domain.queues import QueuedMessage, drain, enqueue
    from duragent.domain.runs import InboxState
    from duragent.domain.save_points import QueueConsumption


SEEN_CARRIED = 1000
"""How many recent message ids a continued run keeps for deduplication."""


class Inbox:
    def __init__(self) -> None:
        self.steering: list[QueuedMessage] = []
        self.follow_ups: list[QueuedMessage] = []
        self.pending_writes: list[SessionEntry] = []
        self.saving: list[SessionEntry] = []
        """Writes taken for a save point the run has not yet seen finish."""
        self.config: SessionConfig | None = None
        self.session_config_changed = False
        self.guidance: list[GuidanceItem] = []
        self.arrivals: dict[str, str] = {}
        """When each guidance item arrived: during the `model` call, the `tools`, or `between`."""
        self.activity = "between"
        self._seen: dict[str, None] = {}

    def steer(self, item: QueuedMessage) -> None:
        enqueue(self.steering, item, self._seen)

    def follow_up(self, item: QueuedMessage) -> None:
        enqueue(self.follow_ups, item, self._seen)

    def guide(self, item: GuidanceItem) -> None:
        if item.id in self._seen:
            return
        self._seen[item.id] = None
        self.guidance.append(item)
        self.arrivals[item.id] = self.activity

    def guidance_intent(self) -> GuidanceIntent | None:
        """`interrupt` if any pending guidance interrupts, else `supplement` if any."""
        if any(item.intent == "interrupt" for item in self.guidance):
            return "interrupt"
        return "supplement" if self.guidance else None

    def drop_taken(self, item_ids: list[str]) -> None:
        """Guidance a turn's activity took from the store: never taken again here, even
        if its signal comes later."""
        for item_id in item_ids:
            self._seen[item_id] = None
        self.guidance = [item for item in self.guidance if item.id not in item_ids]

    def take_guidance(self) -> list[GuidanceItem]:
        items, self.guidance = self.guidance, []
        return items

    def change(self, change: SessionChange) -> None:
        if change.id in self._seen:
            return
        self._seen[change.id] = None
        self.pending_writes += change.all_entries()
        if change.config is not None and self.config is not None:
            self.config = change.config.apply(self.config)
            self.session_config_changed |= change.config.session_wide()

    def take_steering(self) -> list[QueuedMessage]:
        return drain(self.steering, self._mode("steering"))

    def take_follow_ups(self) -> list[QueuedMessage]:
        return drain(self.follow_ups, self._mode("follow_up"))

    def take_writes(self) -> tuple[list[SessionEntry], SessionConfig | None]:
        """Pending writes and (if changed) the session config, for a save point."""
        writes, self.pending_writes = self.pending_writes, []
        self.saving += writes
        config = self.config if self.session_config_changed else None
        self.session_config_changed = False
        return writes, config

    def writes_saved(self) -> None:
        """The save point that took the writes has finished: session reads show them."""
        self.saving = []

    def unsaved_writes(self) -> list[SessionEntry]:
        """Writes a session read may not show yet: those of a save point in progress,
        then those waiting for the next one."""
        return [*self.saving, *self.pending_writes]

    def clear_queues(self) -> tuple[list[QueuedMessage], list[QueuedMessage]]:
        steering, follow_ups = self.steering, self.follow_ups
        self.steering, self.follow_ups = [], []
        return steering, follow_ups

    def export(self) -> InboxState:
        """Everything held, for the run's next execution (continue-as-new)."""
        return InboxState(
            steering=self.steering,
            follow_ups=self.follow_ups,
            pending_writes=self.pending_writes,
            config=self.config,
            session_config_changed=self.session_config_changed,
            guidance=self.guidance,
            arrivals={i.id: self.arrivals.get(i.id, "between") for i in self.guidance},
            seen=list(self._seen)[-SEEN_CARRIED:],
        )

    @classmethod
    def restore(cls, state: InboxState) -> Inbox:
        inbox = cls()
        inbox.steering, inbox.follow_ups = list(state.steering), list(state.follow_ups)
        inbox.pending_writes, inbox.config = list(state.pending_writes), state.config
        inbox.session_config_changed = state.session_config_changed
        inbox.guidance, inbox.arrivals = list(state.guidance), dict(state.arrivals)
        inbox._seen = dict.fromkeys(state.seen)
        return inbox

    def _mode(self, queue: str) -> QueueMode:
        if self.config is None:
            return "one-at-a-time"
        return self.config.steering_mode if queue == "steering" else self.config.follow_up_mode


def queued_entries(
    items: list[QueuedMessage], queue: Literal["steering", "follow_up"]
) -> tuple[list[SessionEntry], list[QueueConsumption]]:
    """Queued messages as entries (their ids are the senders'), and their consumption."""
    made: list[SessionEntry] = [
        MessageEntry(id=i.id, parent_id=None, timestamp=i.message.timestamp, message=i.message)
        for i in items
    ]
    consumed = [QueueConsumption(entry_id=i.id, queue=queue) for i in items]
    return made, consumed
