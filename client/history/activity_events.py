"""Activities in a run's history: model calls and tool calls, each from its scheduling
(with the save point a model call carries) to the event that closed it, and a cancel
sent to one. What they say is `summaries`' job, once the history is read."""

from __future__ import annotations

import re
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history import v1 as history_v1
from temporalio.api.history.v1 import HistoryEvent

from duragent.client.history.summaries import ScheduledActivity, activity_label, save_point
from duragent.client.history.timeline import TimelineItem
from duragent.client.history.values import decode, decode_one, event_time, failure_of

_TURN_ID = re.compile(r"^turn-(\d+)-")
_ActivityClosed = (
    history_v1.ActivityTaskCompletedEventAttributes
    | history_v1.ActivityTaskFailedEventAttributes
    | history_v1.ActivityTaskTimedOutEventAttributes
    | history_v1.ActivityTaskCanceledEventAttributes
)
_OUTCOMES = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "completed",
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "failed",
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "timed_out",
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: "cancelled",
}
"""An activity's outcome by the event that closed it."""


class ActivityEvents:
    """`_Reader`'s handlers for activity events (it provides `_add`, `turn`, `activities`
    and `last_model`)."""

    turn: int | None
    activities: dict[int, ScheduledActivity]
    last_model: ScheduledActivity | None

    def _add(self, event: HistoryEvent, kind: str, summary: str, **details: Any) -> TimelineItem:
        raise NotImplementedError

    def _on_activity_task_scheduled(
        self, event: HistoryEvent, attrs: history_v1.ActivityTaskScheduledEventAttributes
    ) -> None:
        activity_type, activity_id = attrs.activity_type.name, attrs.activity_id
        data = decode(attrs.input)
        turn = data.get("turn") if isinstance(data, dict) else None
        if not isinstance(turn, int):
            match = _TURN_ID.match(activity_id)
            turn = int(match.group(1)) if match else self.turn
        self.turn = turn
        model = activity_type in ("model_turn", "take_turn")
        if model and isinstance(data, dict) and data.get("commit"):
            summary, details = save_point(data["commit"], activity_id)
            self._add(event, "save_point", summary, **details)
        kind = {
            "model_turn": "model_call",
            "take_turn": "model_call",  # and its tool calls (`turn_calls`)
            "run_tool": "tool_call",
            "summarize": "summary_call",
        }.get(activity_type, "activity")
        item = self._add(event, kind, "", activity_type=activity_type, activity_id=activity_id)
        if event.HasField("user_metadata") and event.user_metadata.HasField("summary"):
            item.details["ui_summary"] = decode_one(event.user_metadata.summary)
        activity = ScheduledActivity(item, activity_type, activity_id, data, event_time(event))
        self.activities[event.event_id] = activity
        if model:
            self.last_model = activity

    def _on_activity_task_started(
        self, event: HistoryEvent, attrs: history_v1.ActivityTaskStartedEventAttributes
    ) -> None:
        activity = self.activities.get(attrs.scheduled_event_id)
        if activity is None:
            return
        activity.started, activity.attempts = event_time(event), max(1, attrs.attempt)
        if attrs.HasField("last_failure"):
            activity.last_failure = failure_of(attrs.last_failure)

    def _on_activity_task_closed(self, event: HistoryEvent, attrs: _ActivityClosed) -> None:
        """An activity completed, failed, timed out or was cancelled: its outcome."""
        activity = self.activities.get(attrs.scheduled_event_id)
        if activity is None:
            return
        activity.closed, activity.outcome = event_time(event), _OUTCOMES[event.event_type]
        if isinstance(attrs, history_v1.ActivityTaskCompletedEventAttributes):
            activity.result = decode(attrs.result)
        elif not isinstance(attrs, history_v1.ActivityTaskCanceledEventAttributes):
            activity.failure = failure_of(attrs.failure)

    _on_activity_task_completed = _on_activity_task_closed
    _on_activity_task_failed = _on_activity_task_closed
    _on_activity_task_timed_out = _on_activity_task_closed
    _on_activity_task_canceled = _on_activity_task_closed

    def _on_activity_task_cancel_requested(
        self, event: HistoryEvent, attrs: history_v1.ActivityTaskCancelRequestedEventAttributes
    ) -> None:
        activity = self.activities.get(attrs.scheduled_event_id)
        if activity is None:
            self._add(event, "cancel", "cancel sent to an activity")
            return
        activity.item.details["cancel_requested_at"] = event_time(event).isoformat()
        item = self._add(
            event,
            "cancel",
            f"cancel sent to {activity_label(activity)}",
            activity_id=activity.activity_id,
        )
        item.turn = activity.item.turn
