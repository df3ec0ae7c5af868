"""Reads one workflow execution's history into its `RunTimeline`.

One job, in one class: `_Reader` walks the events in order with a method per event type
and keeps the state that links them (an activity's scheduled, started and closed events, a
retry's marker and timer, a signal and the save point that delivered it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from temporalio.api.enums.v1 import EventType, TimeoutType
from temporalio.api.history import v1 as history_v1
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory

from duragent.client.history.child_workflows import ChildWorkflows
from duragent.client.history.summaries import (
    ScheduledActivity,
    activity_label,
    local_activity,
    run_result,
    save_point,
    signal_content,
    summarize_activity,
    turn_calls,
)
from duragent.client.history.timeline import RunTimeline, TimelineItem
from duragent.client.history.values import (
    MODEL_CALL_ID,
    compact,
    decode,
    decode_one,
    duration_text,
    event_time,
    failure_of,
    first_user_text,
    millis,
    preview,
    provider_kind,
    provider_of,
    scheduled_by,
    short_run_id,
)

_TURN_ID = re.compile(r"^turn-(\d+)-")
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


@dataclass
class _Retry:
    """A provider retry: the record_events marker, then the backoff timer it waits on."""

    item: TimelineItem
    started: datetime | None = None


@dataclass
class _Reader(ChildWorkflows):
    """Reads one history in event order: one `_on_<event>` method per event type it
    understands (`_on_other` for the rest), keeping the state that links events."""

    history: WorkflowHistory
    items: list[TimelineItem] = field(default_factory=list)
    activities: dict[int, ScheduledActivity] = field(default_factory=dict)
    timers: dict[str, TimelineItem] = field(default_factory=dict)
    retries: dict[str, _Retry] = field(default_factory=dict)
    pending_retry: _Retry | None = None
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

    # The execution's start and end.

    def _on_workflow_execution_started(
        self, event: HistoryEvent, attrs: history_v1.WorkflowExecutionStartedEventAttributes
    ) -> None:
        self.workflow_type = attrs.workflow_type.name
        data = decode(attrs.input)
        started = self._add(
            event,
            "run_started",
            "",
            workflow_type=self.workflow_type,
            continued_from=attrs.continued_execution_run_id or None,
            attempt=attrs.attempt if attrs.attempt > 1 else None,
            task_queue=attrs.task_queue.name,
        )
        if isinstance(data, dict) and isinstance(data.get("run_id"), str):  # a RunInput
            self.run_id = data["run_id"]
            kind = str(data.get("kind") or "prompt")
            invocation = data.get("invocation") or None
            prompt = first_user_text(data.get("prompt"))
            started.details.update(
                run_id=self.run_id,
                kind=kind,
                prompt_preview=prompt,
                invocation=invocation,
                max_turns=data.get("max_turns"),
            )
            what = (
                f"{invocation.get('name')} {' '.join(invocation.get('args') or [])}".strip()
                if isinstance(invocation, dict)
                else "the input queued while the previous run was open"
                if kind == "queued"
                else f'"{prompt}"'
            )
            run = short_run_id(self.run_id)
            started.summary = f"{self.workflow_type} run {run} ({kind}): {what}"
            schedule = scheduled_by(data.get("prompt"))
            if schedule:
                started.details["scheduled_by"] = schedule
                started.summary += f" (scheduled: {schedule})"
        else:
            started.details["input"] = preview(compact(data))
            started.summary = f"{self.workflow_type} started: {preview(compact(data))}"
        if attrs.continued_execution_run_id:
            after = "after" if started.details.get("kind") == "queued" else "continues"
            started.summary += f" ({after} {attrs.continued_execution_run_id})"

    def _on_workflow_execution_completed(
        self, event: HistoryEvent, attrs: history_v1.WorkflowExecutionCompletedEventAttributes
    ) -> None:
        result = decode(attrs.result)
        if isinstance(result, dict) and "status" in result and "turns" in result:  # RunResult
            summary, details = run_result(result)
            self._end(event, summary, status="completed", **details)
        else:
            self._end(event, f"completed: {preview(compact(result))}", status="completed")

    def _on_workflow_execution_failed(
        self, event: HistoryEvent, attrs: history_v1.WorkflowExecutionFailedEventAttributes
    ) -> None:
        failure = failure_of(attrs.failure)
        self._end(event, f"failed: {failure['message']}", status="failed", failure=failure)

    def _on_workflow_execution_canceled(
        self, event: HistoryEvent, attrs: history_v1.WorkflowExecutionCanceledEventAttributes
    ) -> None:
        self._end(event, "cancelled", status="cancelled")

    def _on_workflow_execution_terminated(
        self, event: HistoryEvent, attrs: history_v1.WorkflowExecutionTerminatedEventAttributes
    ) -> None:
        reason = f": {attrs.reason}" if attrs.reason else ""
        self._end(event, f"terminated{reason}", status="terminated", reason=attrs.reason or None)

    def _on_workflow_execution_timed_out(
        self, event: HistoryEvent, attrs: history_v1.WorkflowExecutionTimedOutEventAttributes
    ) -> None:
        self._end(event, "timed out", status="timed_out")

    def _end(self, event: HistoryEvent, summary: str, **details: Any) -> None:
        self.turn = None
        self._add(event, "run_ended", summary, **details)

    def _on_workflow_execution_continued_as_new(
        self, event: HistoryEvent, attrs: history_v1.WorkflowExecutionContinuedAsNewEventAttributes
    ) -> None:
        self.turn = None
        data = decode(attrs.input)
        chained = isinstance(data, dict) and data.get("kind") == "queued"
        summary = (
            f"run ended; input queued meanwhile starts run {short_run_id(str(data['run_id']))} "
            f"in {attrs.new_execution_run_id}"
            if chained and isinstance(data, dict)
            else f"continued as new: {attrs.workflow_type.name} {attrs.new_execution_run_id}"
        )
        self._add(
            event,
            "continued_as_new",
            summary,
            new_execution_run_id=attrs.new_execution_run_id,
            workflow_type=attrs.workflow_type.name,
            input=preview(compact(data)),
        )

    # Workflow tasks: only their failures and timeouts tell something (a bad hook, a
    # non-deterministic change, a worker that went away).

    def _on_workflow_task_failed(
        self, event: HistoryEvent, attrs: history_v1.WorkflowTaskFailedEventAttributes
    ) -> None:
        failure = failure_of(attrs.failure)
        self._add(
            event, "workflow_task", f"workflow task failed: {failure['message']}", failure=failure
        )

    def _on_workflow_task_timed_out(
        self, event: HistoryEvent, attrs: history_v1.WorkflowTaskTimedOutEventAttributes
    ) -> None:
        kind = TimeoutType.Name(attrs.timeout_type).removeprefix("TIMEOUT_TYPE_").lower()
        self._add(
            event,
            "workflow_task",
            f"workflow task timed out ({kind}): its worker stopped answering",
            timeout=kind,
        )

    # Activities: model calls and tool calls.

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

    # Local activities, timers, signals, cancellation.

    def _on_marker_recorded(
        self, event: HistoryEvent, attrs: history_v1.MarkerRecordedEventAttributes
    ) -> None:
        if attrs.marker_name != "core_local_activity":
            self._add(
                event,
                "marker",
                f"marker {attrs.marker_name}",
                marker=attrs.marker_name,
                details={k: compact(decode(v)) for k, v in attrs.details.items()},
            )
            return
        data = decode(attrs.details["data"]) if "data" in attrs.details else None
        data = data if isinstance(data, dict) else {}
        result = decode(attrs.details["result"]) if "result" in attrs.details else None
        activity_type = str(data.get("activity_type", "?"))
        summary = ""
        if event.HasField("user_metadata") and event.user_metadata.HasField("summary"):
            summary = str(decode_one(event.user_metadata.summary))
        failure = failure_of(attrs.failure) if attrs.HasField("failure") else None
        details: dict[str, Any] = {
            "activity_type": activity_type,
            "attempt": data.get("attempt"),
            "ui_summary": summary or None,
            "result": result,
            "failure": failure,
        }
        if activity_type == "record_events":
            # Summaries list the events: "retry turn 1 attempt 1 in 200 ms: ...; phase ->
            # retry" (older histories: "retry_scheduled, phase_changed").
            parts = [p.strip() for p in summary.replace(",", ";").split(";") if p.strip()]
            if any(p == "retry_scheduled" or p.startswith("retry turn ") for p in parts):
                self._retry(event)
                return
            if all(p == "phase_changed" or p.startswith("phase -> ") for p in parts):
                return  # the phase itself is not in history; the retry item covers it
            line = f"record events: {summary}"
            kind = "local_activity"
        else:
            kind, line = local_activity(activity_type, summary, result)
        if failure is not None:
            line += f"; failed: {failure['message']}"
        if isinstance(data.get("attempt"), int) and data["attempt"] > 1:
            line += f" ({data['attempt']} attempts)"
        self._add(event, kind, preview(line, 200), **details)

    def _retry(self, event: HistoryEvent) -> None:
        model = self.last_model
        error = model.failure if model else None
        provider = provider_of(error)
        match = MODEL_CALL_ID.match(model.activity_id) if model else None
        attempt = int(match.group(2)) if match else None
        message = (provider or {}).get("message") or (error or {}).get("message") or "?"
        item = self._add(
            event,
            "retry",
            f"model call attempt {attempt} failed ({provider_kind(provider)}): {message}",
            attempt=attempt,
            error=message,
            provider=provider,
        )
        self.pending_retry = _Retry(item)

    def _on_timer_started(
        self, event: HistoryEvent, attrs: history_v1.TimerStartedEventAttributes
    ) -> None:
        delay = attrs.start_to_fire_timeout.ToTimedelta()
        retry, self.pending_retry = self.pending_retry, None
        if retry is not None:
            retry.started = event_time(event)
            retry.item.details["delay_ms"] = millis(delay)
            retry.item.summary += f"; retry in {duration_text(millis(delay))}"
            self.retries[attrs.timer_id] = retry
            return
        self.timers[attrs.timer_id] = self._add(
            event,
            "timer",
            f"timer {duration_text(millis(delay))}",
            timer_id=attrs.timer_id,
            delay_ms=millis(delay),
        )

    def _on_timer_fired(
        self, event: HistoryEvent, attrs: history_v1.TimerFiredEventAttributes
    ) -> None:
        self._timer_done(event, attrs.timer_id, "fired")

    def _on_timer_canceled(
        self, event: HistoryEvent, attrs: history_v1.TimerCanceledEventAttributes
    ) -> None:
        self._timer_done(event, attrs.timer_id, "cancelled")

    def _timer_done(self, event: HistoryEvent, timer_id: str, outcome: str) -> None:
        retry = self.retries.get(timer_id)
        item = retry.item if retry else self.timers.get(timer_id)
        if item is None:
            return
        item.duration_ms = millis(
            event_time(event) - (retry.started if retry and retry.started else item.at)
        )
        item.details["timer"] = outcome
        if outcome != "fired":
            item.summary += f" ({outcome})"

    def _on_workflow_execution_signaled(
        self, event: HistoryEvent, attrs: history_v1.WorkflowExecutionSignaledEventAttributes
    ) -> None:
        name = attrs.signal_name
        payload = decode(attrs.input)
        details: dict[str, Any] = {"signal": name, "identity": attrs.identity or None}
        what, carried = signal_content(payload)
        details.update(carried)
        self._add(event, "signal", f"{name} {what}".rstrip(), **details)

    def _on_workflow_execution_cancel_requested(
        self, event: HistoryEvent, attrs: history_v1.WorkflowExecutionCancelRequestedEventAttributes
    ) -> None:
        reason = f": {attrs.cause}" if attrs.cause else ""
        self._add(
            event,
            "cancel",
            f"cancellation requested (abort){reason}",
            identity=attrs.identity or None,
            reason=attrs.cause or None,
        )

    def _on_other(self, event: HistoryEvent) -> None:
        name = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_").lower()
        summary = name.replace("_", " ")
        if event.HasField("user_metadata") and event.user_metadata.HasField("summary"):
            summary += f": {decode_one(event.user_metadata.summary)}"
        self._add(event, "event", preview(summary, 200), event_type=name)

    # After the last event.

    def _match_deliveries(self) -> None:
        """Say in each steering, follow-up and change signal's item when its content
        reached the session: the first save point that consumed or wrote it."""
        saves = [item for item in self.items if item.kind == "save_point"]
        ended = next((item for item in self.items if item.kind == "run_ended"), None)
        for signal in (item for item in self.items if item.kind == "signal"):
            signal_id = signal.details.get("id")
            if not isinstance(signal_id, str):
                continue
            change = signal.details.get("signal") == "change"
            wanted = {signal_id, *signal.details.get("entry_ids", [])}
            for save in saves:
                if save.at < signal.at:
                    continue
                ids = [e["id"] for e in save.details["entries"]] if change else []
                consumed = [c.get("entry_id") for c in save.details["consumed"]]
                hit = any(i in wanted or str(i).startswith(signal_id + ".") for i in ids)
                if signal_id in consumed or hit or (change and save.details["session_config"]):
                    signal.details.update(
                        delivered_turn=save.turn, delivered_at=save.at.isoformat()
                    )
                    verb = "saved" if change else "delivered"
                    signal.summary += f" → {verb} at turn {save.turn}"
                    break
            else:
                signal.summary += " → " + _undelivered(signal, change, ended)


def _undelivered(signal: TimelineItem, change: bool, ended: TimelineItem | None) -> str:
    """What became of a signal's content that no save point carried."""
    if ended is None:
        return "pending"
    if change:
        return "saved when the run finished"
    cleared = [
        *ended.details.get("cleared_steering", []),
        *ended.details.get("cleared_follow_ups", []),
    ]
    if signal.details.get("text") in [preview(text) for text in cleared]:
        return "dropped by the abort"
    return "kept for the session's next run"
