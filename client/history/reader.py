"""Reads one workflow execution's history into its `RunTimeline`.

`_Reader` walks the events in order and hands each to the method for its type; those
methods live with their kind of event (`executions`, `activity_events`,
`markers_and_timers`, `signals`, `child_workflows`), and `_Reader` brings them together
with the state that links events (an activity's scheduled, started and closed events, a
retry's marker and timer, a signal and the save point that delivered it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory

from duragent.client.history.activity_events import ActivityEvents
from duragent.client.history.child_workflows import ChildWorkflows
from duragent.client.history.executions import Executions
from duragent.client.history.markers_and_timers import MarkersAndTimers, Retry
from duragent.client.history.signals import Signals
from duragent.client.history.summaries import ScheduledActivity, summarize_activity, turn_calls
from duragent.client.history.timeline import RunTimeline, TimelineItem
from duragent.client.history.values import decode_one, event_time, preview

_QUIET = {
    "workflow_task_scheduled_event_attributes",
    "workflow_task_started_event_attributes",
    "workflow_task_completed_event_attributes",
}
"""Events that only say the workflow code ran: nothing of the run's story."""


def timeline_from_history(history: WorkflowHistory) -> RunTimeline:
    """The timeline of one execution's history. Pure: no I/O; a running execution's
    history gives the timeline so far (no `run_ended` item yet)."""
    return _Reader(history).read()


@dataclass
class _Reader(Executions, ActivityEvents, MarkersAndTimers, Signals, ChildWorkflows):
    """Reads one history in event order: one `_on_<event>` method per event type it
    understands (its bases', by kind of event; `_on_other` for the rest), keeping the state
    that links events."""

    history: WorkflowHistory
    items: list[TimelineItem] = field(default_factory=list)
    activities: dict[int, ScheduledActivity] = field(default_factory=dict)
    timers: dict[str, TimelineItem] = field(default_factory=dict)
    retries: dict[str, Retry] = field(default_factory=dict)
    pending_retry: Retry | None = None
    last_model: ScheduledActivity | None = None
    turn: int | None = None
    workflow_type: str = ""
    run_id: str | None = None
    children: dict[int, TimelineItem] = field(default_factory=dict)
    """Child workflows (sub-agents) by the event that started them."""

    def read(self) -> RunTimeline:
        for event in self.history.events:
            name = event.WhichOneof("attributes")
            if name is None or name in _QUIET:
                continue
            handler = getattr(self, "_on_" + name.removesuffix("_event_attributes"), None)
            if handler is not None:
                handler(event, getattr(event, name))
            else:
                self._on_other(event)
        for activity in self.activities.values():
            summarize_activity(activity)
            self.items += turn_calls(activity)
        if self.run_id is not None:
            self._match_deliveries()
        items = sorted(self.items, key=lambda item: item.at)  # stable: same-time order kept
        return RunTimeline(
            workflow_id=self.history.workflow_id,
            temporal_run_id=self.history.run_id if self.history.events else "",
            workflow_type=self.workflow_type,
            run_id=self.run_id,
            items=items,
        )

    def _add(self, event: HistoryEvent, kind: str, summary: str, **details: Any) -> TimelineItem:
        item = TimelineItem(at=event_time(event), kind=kind, turn=self.turn, summary=summary)
        item.details = {k: v for k, v in details.items() if v is not None}
        self.items.append(item)
        return item

    def _on_other(self, event: HistoryEvent) -> None:
        name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_").lower()
        summary = name.replace("_", " ")
        if event.HasField("user_metadata") and event.user_metadata.HasField("summary"):
            summary += f": {decode_one(event.user_metadata.summary)}"
        self._add(event, "event", preview(summary, 200), event_type=name)
