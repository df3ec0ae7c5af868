"""A readable timeline of a session's runs, read from their Temporal workflow histories.

Each workflow execution under the session's workflow id (one per run, plus idle-session
changes and any continue-as-new successors) becomes a `RunTimeline`: one `TimelineItem`
per thing that happened, in time order. The workflow already records everything needed:
the run's input, every model call and tool call with their inputs and small results, the
save point each model call carried, the signals clients sent, timers, cancellation and
the result. Local activities (start_run, finish_run, record_events, apply_changes) leave
only a marker with their result and summary; their inputs are not in history.

Payloads are decoded as plain JSON (never validated against today's contracts), so
histories recorded by older versions read the same way.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field
from rich.console import Console
from rich.text import Text
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.enums.v1 import EventType, TimeoutType
from temporalio.api.failure.v1 import Failure
from temporalio.api.history import v1 as history_v1
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter

from domain.runs import session_workflow_id
from domain.turns import PROVIDER_ERROR

PREVIEW_CHARS = 100
"""Longest preview of a prompt, message, reply or tool output in a summary."""

_MODEL_ID = re.compile(r"^turn-(\d+)-model-(\d+)$")
_TURN_ID = re.compile(r"^turn-(\d+)-")
_QUIET = {
    "workflow_task_scheduled_event_attributes",
    "workflow_task_started_event_attributes",
    "workflow_task_completed_event_attributes",
}
"""Events that only say the workflow code ran: nothing of the run's story."""


class TimelineItem(BaseModel):
    """One thing that happened in a run, as one readable line plus its details."""

    at: datetime
    """When it happened (server time; for activities, when they were scheduled)."""
    kind: str
    """run_started, start_run, model_call, save_point, tool_call, retry, signal, cancel,
    finish_run, run_ended, continued_as_new, timer, apply_changes, workflow_task,
    local_activity, activity, marker or event (anything else in the history)."""
    turn: int | None = None
    """The run's turn it belongs to (a save point: the turn whose model call carried it)."""
    summary: str
    """One line for people."""
    details: dict[str, Any] = Field(default_factory=dict)
    """What the summary is made of, JSON-safe (times as ISO 8601 strings)."""
    duration_ms: int | None = None
    """How long the run waited for it: scheduled to closed for activities, the wait for
    retries and timers. None when unknown or not finished."""


class RunTimeline(BaseModel):
    """The timeline of one workflow execution (one Temporal run) of a session."""

    workflow_id: str
    temporal_run_id: str
    workflow_type: str
    run_id: str | None
    """Our run id (`RunInput.run_id`); inherited along a continue-as-new chain by
    `session_timelines`. None for executions that are not runs (session changes)."""
    items: list[TimelineItem]
    web_ui_url: str | None = None
    """This execution's history page in the Temporal web UI, when its address is known."""


def timeline_from_history(history: WorkflowHistory) -> RunTimeline:
    """The timeline of one execution's history. Pure: no I/O; a running execution's
    history gives the timeline so far (no `run_ended` item yet)."""
    return _Reader(history).read()


async def session_timelines(
    temporal: Client, session_id: str, run_id: str | None = None, ui_base: str | None = None
) -> list[RunTimeline]:
    """Timelines of every execution of the session's workflow id, oldest first; with
    `run_id`, only the executions of that run (its continue-as-new chain included).

    Executions are found through Temporal's visibility store (eventually consistent: one
    that just started or ended may be missing for a moment); continue-as-new successors
    are followed from the histories themselves. `ui_base` (the web UI's address, e.g.
    http://127.0.0.1:8233) adds a link to each execution's history page.
    """
    if "'" in session_id or "\\" in session_id:
        raise ValueError(f"not a session id: {session_id!r}")
    workflow_id = session_workflow_id(session_id)
    listed = [e async for e in temporal.list_workflows(f"WorkflowId = '{workflow_id}'")]
    listed.sort(key=lambda execution: execution.start_time)
    todo = [execution.run_id for execution in listed]
    if run_id is not None:  # runs carry their run id in the memo: fetch only theirs
        todo = [e.run_id for e in listed if await e.memo_value("run_id", None) == run_id]
    timelines: dict[str, RunTimeline] = {}
    while todo:
        temporal_run_id = todo.pop(0)
        if temporal_run_id in timelines:
            continue
        handle = temporal.get_workflow_handle(workflow_id, run_id=temporal_run_id)
        timeline = timeline_from_history(await handle.fetch_history())
        timelines[temporal_run_id] = timeline
        successor = _link(timeline, "continued_as_new", "new_execution_run_id")
        if successor:
            todo.insert(0, successor)
    ordered = sorted(timelines.values(), key=lambda t: t.items[0].at if t.items else _EPOCH)
    for timeline in ordered:  # a successor without a RunInput continues its run
        previous = timelines.get(_link(timeline, "run_started", "continued_from") or "")
        if timeline.run_id is None and previous is not None:
            timeline.run_id = previous.run_id
        if ui_base:
            timeline.web_ui_url = (
                f"{ui_base.rstrip('/')}/namespaces/{temporal.namespace}/workflows/"
                f"{timeline.workflow_id}/{timeline.temporal_run_id}/history"
            )
    return [t for t in ordered if run_id is None or t.run_id == run_id]


def render(timelines: list[RunTimeline], console: Console) -> None:
    """Print timelines for people: a header per execution, then one line per item with
    its time relative to the execution's start, its turn, what it was and how long it
    took; a turn's tool calls and the save point its model call carried are indented.

    Nothing is cut. On a terminal a summary too long for the width wraps under itself
    (the columns before it stay clear); piped, every item is one whole line.
    """
    for index, timeline in enumerate(timelines):
        if index:
            console.print()
        header = Text()
        header.append(timeline.workflow_type, style="bold")
        header.append(f"  {timeline.workflow_id} / {timeline.temporal_run_id}")
        if timeline.run_id:
            header.append(f"  run {timeline.run_id}", style="bold")
        if timeline.items:
            header.append(f"  {timeline.items[0].at:%Y-%m-%d %H:%M:%S} UTC", style="dim")
        _print_whole(console, header)
        if timeline.web_ui_url:
            _print_whole(console, Text(timeline.web_ui_url, style="dim"))
        start = timeline.items[0].at if timeline.items else _EPOCH
        widths = _widths(timeline.items, start)
        for item in timeline.items:
            _print_item(console, _prefix(item, start, widths), Text(item.summary))


SUMMARY_MIN_WIDTH = 30
"""Narrower than this beside the columns, a summary goes on the lines below them."""


def _print_whole(console: Console, line: Text) -> None:
    if console.is_terminal:
        console.print(line, overflow="fold")
    else:
        console.print(line, soft_wrap=True)  # one line, never cut


def _print_item(console: Console, prefix: Text, summary: Text) -> None:
    if not console.is_terminal:
        console.print(prefix + summary, soft_wrap=True)
        return
    indent = prefix.cell_len
    if console.width - indent < SUMMARY_MIN_WIDTH:
        console.print(prefix, soft_wrap=True)
        indent = 4
        lines = list(summary.wrap(console, max(1, console.width - indent), overflow="fold"))
    else:
        lines = list(summary.wrap(console, console.width - indent, overflow="fold"))
        console.print(prefix + (lines.pop(0) if lines else Text()), soft_wrap=True)
    for line in lines:
        console.print(Text(" " * indent) + line, soft_wrap=True)


# Reading a history -----------------------------------------------------------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class _Activity:
    """A scheduled activity, filled in as its events arrive; summarized at the end."""

    item: TimelineItem
    activity_type: str
    activity_id: str
    input: Any
    scheduled: datetime
    started: datetime | None = None
    closed: datetime | None = None
    attempts: int = 1
    outcome: str = "running"
    result: Any = None
    failure: dict[str, Any] | None = None
    last_failure: dict[str, Any] | None = None


@dataclass
class _Retry:
    """A provider retry: the record_events marker, then the backoff timer it waits on."""

    item: TimelineItem
    started: datetime | None = None


@dataclass
class _Reader:
    """Reads one history in event order: one `_on_<event>` method per event type it
    understands (`_on_other` for the rest), keeping the state that links events."""

    history: WorkflowHistory
    items: list[TimelineItem] = field(default_factory=list)
    activities: dict[int, _Activity] = field(default_factory=dict)
    timers: dict[str, TimelineItem] = field(default_factory=dict)
    retries: dict[str, _Retry] = field(default_factory=dict)
    pending_retry: _Retry | None = None
    last_model: _Activity | None = None
    turn: int | None = None
    workflow_type: str = ""
    run_id: str | None = None

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
            _summarize_activity(activity)
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
        item = TimelineItem(at=_time(event), kind=kind, turn=self.turn, summary=summary)
        item.details = {k: v for k, v in details.items() if v is not None}
        self.items.append(item)
        return item

    # The execution's start and end.

    def _on_workflow_execution_started(
        self, event: HistoryEvent, attrs: history_v1.WorkflowExecutionStartedEventAttributes
    ) -> None:
        self.workflow_type = attrs.workflow_type.name
        data = _decode(attrs.input)
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
            prompt = _first_user_text(data.get("prompt"))
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
                else f'"{prompt}"'
            )
            started.summary = f"{self.workflow_type} run {_short(self.run_id)} ({kind}): {what}"
        else:
            started.details["input"] = _preview(_compact(data))
            started.summary = f"{self.workflow_type} started: {_preview(_compact(data))}"
        if attrs.continued_execution_run_id:
            started.summary += f" (continues {attrs.continued_execution_run_id})"

    def _on_workflow_execution_completed(
        self, event: HistoryEvent, attrs: history_v1.WorkflowExecutionCompletedEventAttributes
    ) -> None:
        result = _decode(attrs.result)
        if isinstance(result, dict) and "status" in result and "turns" in result:  # RunResult
            usage = result.get("usage") or {}
            summary = f"{result['status']}: {result['turns']} turn(s), {_tokens(usage)}"
            if result.get("error"):
                summary += f", error: {_preview(str(result['error']))}"
            cleared = [*result.get("cleared_steering", []), *result.get("cleared_follow_ups", [])]
            if cleared:
                summary += f", dropped {len(cleared)} queued message(s)"
            self._end(
                event,
                summary,
                status="completed",
                run_status=result["status"],
                turns=result["turns"],
                usage=usage,
                error=result.get("error"),
                final_text=_preview(str(result.get("final_text") or "")) or None,
                cleared_steering=result.get("cleared_steering") or None,
                cleared_follow_ups=result.get("cleared_follow_ups") or None,
                cancelled_inputs=result.get("cancelled_inputs") or None,
            )
        else:
            self._end(event, f"completed: {_preview(_compact(result))}", status="completed")

    def _on_workflow_execution_failed(
        self, event: HistoryEvent, attrs: history_v1.WorkflowExecutionFailedEventAttributes
    ) -> None:
        failure = _failure(attrs.failure)
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
        self._add(
            event,
            "continued_as_new",
            f"continued as new: {attrs.workflow_type.name} {attrs.new_execution_run_id}",
            new_execution_run_id=attrs.new_execution_run_id,
            workflow_type=attrs.workflow_type.name,
            input=_preview(_compact(_decode(attrs.input))),
        )

    # Workflow tasks: only their failures and timeouts tell something (a bad hook, a
    # non-deterministic change, a worker that went away).

    def _on_workflow_task_failed(
        self, event: HistoryEvent, attrs: history_v1.WorkflowTaskFailedEventAttributes
    ) -> None:
        failure = _failure(attrs.failure)
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
        data = _decode(attrs.input)
        turn = data.get("turn") if isinstance(data, dict) else None
        if not isinstance(turn, int):
            match = _TURN_ID.match(activity_id)
            turn = int(match.group(1)) if match else self.turn
        self.turn = turn
        if activity_type == "model_turn" and isinstance(data, dict) and data.get("commit"):
            self._save_point(event, data["commit"], activity_id)
        kind = {"model_turn": "model_call", "run_tool": "tool_call"}.get(activity_type, "activity")
        item = self._add(event, kind, "", activity_type=activity_type, activity_id=activity_id)
        if event.HasField("user_metadata") and event.user_metadata.HasField("summary"):
            item.details["ui_summary"] = _decode_one(event.user_metadata.summary)
        activity = _Activity(item, activity_type, activity_id, data, _time(event))
        self.activities[event.event_id] = activity
        if activity_type == "model_turn":
            self.last_model = activity

    def _on_activity_task_started(
        self, event: HistoryEvent, attrs: history_v1.ActivityTaskStartedEventAttributes
    ) -> None:
        activity = self.activities.get(attrs.scheduled_event_id)
        if activity is None:
            return
        activity.started, activity.attempts = _time(event), max(1, attrs.attempt)
        if attrs.HasField("last_failure"):
            activity.last_failure = _failure(attrs.last_failure)

    def _on_activity_task_completed(
        self, event: HistoryEvent, attrs: history_v1.ActivityTaskCompletedEventAttributes
    ) -> None:
        self._close(event, attrs.scheduled_event_id, "completed", result=_decode(attrs.result))

    def _on_activity_task_failed(
        self, event: HistoryEvent, attrs: history_v1.ActivityTaskFailedEventAttributes
    ) -> None:
        self._close(event, attrs.scheduled_event_id, "failed", failure=_failure(attrs.failure))

    def _on_activity_task_timed_out(
        self, event: HistoryEvent, attrs: history_v1.ActivityTaskTimedOutEventAttributes
    ) -> None:
        self._close(event, attrs.scheduled_event_id, "timed_out", failure=_failure(attrs.failure))

    def _on_activity_task_canceled(
        self, event: HistoryEvent, attrs: history_v1.ActivityTaskCanceledEventAttributes
    ) -> None:
        self._close(event, attrs.scheduled_event_id, "cancelled")

    def _close(
        self,
        event: HistoryEvent,
        scheduled_event_id: int,
        outcome: str,
        result: Any = None,
        failure: dict[str, Any] | None = None,
    ) -> None:
        activity = self.activities.get(scheduled_event_id)
        if activity is not None:
            activity.closed, activity.outcome = _time(event), outcome
            activity.result, activity.failure = result, failure

    def _on_activity_task_cancel_requested(
        self, event: HistoryEvent, attrs: history_v1.ActivityTaskCancelRequestedEventAttributes
    ) -> None:
        activity = self.activities.get(attrs.scheduled_event_id)
        if activity is None:
            self._add(event, "cancel", "cancel sent to an activity")
            return
        activity.item.details["cancel_requested_at"] = _time(event).isoformat()
        item = self._add(
            event,
            "cancel",
            f"cancel sent to {_activity_label(activity)}",
            activity_id=activity.activity_id,
        )
        item.turn = activity.item.turn

    def _save_point(self, event: HistoryEvent, commit: dict[str, Any], carrier: str) -> None:
        slots = commit.get("slots") or []
        entries = commit.get("entries") or []
        consumed = commit.get("consumed") or []
        fallbacks = sum(1 for slot in slots if slot.get("fallback"))
        texts = {
            entry.get("id"): _preview(_text_of((entry.get("message") or {}).get("content")))
            for entry in entries
        }
        parts = [f"saves turn {commit.get('turn')}: {len(slots)} message(s)"]
        if fallbacks:
            parts[0] += f" ({fallbacks} without a staged result)"
        if entries:
            parts.append(
                f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'} "
                f"({', '.join(str(e.get('type')) for e in entries)})"
            )
        for item in consumed:
            queue = str(item.get("queue", "")).replace("_", "-")
            parts.append(f'delivers {queue} "{texts.get(item.get("entry_id"), "")}"')
        if commit.get("session_config"):
            parts.append("session config changed")
        self._add(
            event,
            "save_point",
            "; ".join(parts),
            saved_turn=commit.get("turn"),
            carried_by=carrier,
            slots=[slot.get("entry_id") for slot in slots],
            fallbacks=fallbacks,
            entries=[{"id": e.get("id"), "type": e.get("type")} for e in entries],
            consumed=consumed,
            continues=commit.get("continues"),
            session_config=bool(commit.get("session_config")),
            events=[e.get("type") for e in commit.get("events") or []] or None,
        )

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
                details={k: _compact(_decode(v)) for k, v in attrs.details.items()},
            )
            return
        data = _decode(attrs.details["data"]) if "data" in attrs.details else None
        data = data if isinstance(data, dict) else {}
        result = _decode(attrs.details["result"]) if "result" in attrs.details else None
        activity_type = str(data.get("activity_type", "?"))
        summary = ""
        if event.HasField("user_metadata") and event.user_metadata.HasField("summary"):
            summary = str(_decode_one(event.user_metadata.summary))
        failure = _failure(attrs.failure) if attrs.HasField("failure") else None
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
        elif activity_type == "start_run" and isinstance(result, dict):
            snapshot = result.get("snapshot") or {}
            line = (
                f"model {snapshot.get('model')}, thinking {snapshot.get('thinking_level')}, "
                f"snapshot {snapshot.get('id')}"
            )
            if result.get("workflow_hooks"):
                line += f", workflow hooks {', '.join(result['workflow_hooks'])}"
            kind = "start_run"
        elif activity_type == "finish_run":
            kind, line = "finish_run", summary or "finish run"
            if isinstance(result, dict) and result.get("final_text"):
                line += f', final text "{_preview(str(result["final_text"]))}"'
        elif activity_type == "apply_changes":
            kind, line = "apply_changes", summary or "apply changes"
        else:
            kind, line = "local_activity", f"{activity_type}: {summary or _compact(result)}"
        if failure is not None:
            line += f"; failed: {failure['message']}"
        if isinstance(data.get("attempt"), int) and data["attempt"] > 1:
            line += f" ({data['attempt']} attempts)"
        self._add(event, kind, _preview(line, 200), **details)

    def _retry(self, event: HistoryEvent) -> None:
        model = self.last_model
        error = model.failure if model else None
        provider = _provider(error)
        match = _MODEL_ID.match(model.activity_id) if model else None
        attempt = int(match.group(2)) if match else None
        message = (provider or {}).get("message") or (error or {}).get("message") or "?"
        item = self._add(
            event,
            "retry",
            f"model call attempt {attempt} failed ({_provider_kind(provider)}): {message}",
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
            retry.started = _time(event)
            retry.item.details["delay_ms"] = _ms(delay)
            retry.item.summary += f"; retry in {_duration(_ms(delay))}"
            self.retries[attrs.timer_id] = retry
            return
        self.timers[attrs.timer_id] = self._add(
            event,
            "timer",
            f"timer {_duration(_ms(delay))}",
            timer_id=attrs.timer_id,
            delay_ms=_ms(delay),
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
        item.duration_ms = _ms(
            _time(event) - (retry.started if retry and retry.started else item.at)
        )
        item.details["timer"] = outcome
        if outcome != "fired":
            item.summary += f" ({outcome})"

    def _on_workflow_execution_signaled(
        self, event: HistoryEvent, attrs: history_v1.WorkflowExecutionSignaledEventAttributes
    ) -> None:
        name = attrs.signal_name
        payload = _decode(attrs.input)
        details: dict[str, Any] = {"signal": name, "identity": attrs.identity or None}
        what = _preview(_compact(payload))
        if isinstance(payload, dict):
            details["id"] = payload.get("id")
            if isinstance(payload.get("message"), dict):  # a QueuedMessage: steer, follow_up
                what = f'"{_preview(_text_of(payload["message"].get("content")))}"'
                details["text"] = what[1:-1]
            elif "config" in payload or "entries" in payload:  # a SessionChange
                config = {k: v for k, v in (payload.get("config") or {}).items() if v is not None}
                entries = [str(e.get("type")) for e in payload.get("entries") or []]
                what = ", ".join(
                    [*(f"{k}={_preview(_compact(v), 40)}" for k, v in config.items()), *entries]
                )
                ids = [e.get("id") for e in payload.get("entries") or []]
                details.update(config=config, entry_ids=ids)
            else:
                details["payload"] = what
        else:
            details["payload"] = what
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
            summary += f": {_decode_one(event.user_metadata.summary)}"
        self._add(event, "event", _preview(summary, 200), event_type=name)

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
    if signal.details.get("text") in [_preview(text) for text in cleared]:
        return "dropped by the abort"
    return "kept for the session's next run"


def _summarize_activity(activity: _Activity) -> None:
    item, details = activity.item, activity.item.details
    details.update(
        {
            "scheduled_at": activity.scheduled.isoformat(),
            "started_at": activity.started.isoformat() if activity.started else None,
            "closed_at": activity.closed.isoformat() if activity.closed else None,
            "outcome": activity.outcome,
            "attempts": activity.attempts,
            "failure": activity.failure,
            "last_failure": activity.last_failure,
        }
    )
    if activity.started and activity.closed:
        details["run_ms"] = _ms(activity.closed - activity.started)
    if activity.closed:
        item.duration_ms = _ms(activity.closed - activity.scheduled)
    for key in [k for k, v in details.items() if v is None]:
        del details[key]
    data = activity.input if isinstance(activity.input, dict) else {}
    result = activity.result if isinstance(activity.result, dict) else {}
    if activity.activity_type == "model_turn":
        item.summary = _model_summary(activity, data, result)
    elif activity.activity_type == "run_tool":
        item.summary = _tool_summary(activity, data, result)
    else:
        returned = "" if activity.result is None else _preview(_compact(activity.result))
        label = _activity_label(activity) + _attempts(activity)
        item.summary = f"{label}: {activity.outcome} {returned}".rstrip()
        if activity.result is not None:
            details["result"] = activity.result
    if activity.failure and activity.activity_type != "model_turn":
        item.summary += f": {_preview(_failure_text(activity.failure))}"


def _attempts(activity: _Activity) -> str:
    """A note for an activity Temporal ran more than once (a worker died, a timeout),
    with what the attempt before the last one failed with; empty after one attempt."""
    if activity.attempts < 2:
        return ""
    before = activity.last_failure
    cause = f"; the one before: {_preview(_failure_text(before), 60)}" if before else ""
    return f" ({activity.attempts} attempts{cause})"


_TIMEOUTS = {
    # An activity's heartbeats stop when its worker dies (or hangs): that is how Temporal
    # notices a crash, and what a person reading the history wants to be told.
    "timeout heartbeat": "worker lost: heartbeat timed out",
    "timeout start_to_close": "took too long: start-to-close timeout",
    "timeout schedule_to_start": "no worker took it: schedule-to-start timeout",
    "timeout schedule_to_close": "took too long: schedule-to-close timeout",
}


def _failure_text(failure: dict[str, Any]) -> str:
    """A failure for people: timeouts say what they mean, others their message."""
    return _TIMEOUTS.get(str(failure.get("type")), str(failure.get("message")))


def _model_summary(activity: _Activity, data: dict[str, Any], result: dict[str, Any]) -> str:
    details = activity.item.details
    snapshot = result.get("snapshot") or data.get("snapshot") or {}
    model = str(snapshot.get("model") or "model")
    match = _MODEL_ID.match(activity.activity_id)
    attempt = int(match.group(2)) if match else 1
    details.update(model=model, model_attempt=attempt)
    prefix = model + (f" (attempt {attempt})" if attempt > 1 else "") + _attempts(activity)
    if activity.outcome == "completed":
        calls = result.get("tool_calls") or []
        usage = result.get("usage") or {}
        details.update(
            stop_reason=result.get("stop_reason"),
            usage=usage,
            text_preview=_preview(str(result.get("text_preview") or "")),
            tool_calls=[
                {"id": c.get("id"), "name": c.get("name"), "args": _preview(c.get("args_preview"))}
                for c in calls
            ],
        )
        parts = [f"{prefix}: {result.get('stop_reason')}, {_tokens(usage)}"]
        if details["text_preview"]:
            parts.append(f'"{details["text_preview"]}"')
        if calls:
            names = ", ".join(
                f"{c.get('name')} {_preview(c.get('args_preview'), 40)}" for c in calls
            )
            parts.append(f"{len(calls)} tool call(s): {names}")
        return "; ".join(parts)
    if activity.failure:
        provider = _provider(activity.failure)
        if provider:
            details["provider"] = provider
        message = (provider or {}).get("message") or _failure_text(activity.failure)
        return f"{prefix}: {activity.outcome} ({_provider_kind(provider)}): {_preview(message)}"
    return f"{prefix}: {activity.outcome}"


def _tool_summary(activity: _Activity, data: dict[str, Any], result: dict[str, Any]) -> str:
    details = activity.item.details
    call = data.get("call") or {}
    name, args = str(call.get("name") or "?"), _preview(call.get("args_preview"), 60)
    details.update(tool=name, call_id=call.get("id"), args=_preview(call.get("args_preview")))
    line = f"{name} {args}{_attempts(activity)}"
    if activity.outcome != "completed":
        return f"{line}: {activity.outcome}"
    flags = ["error" if result.get("is_error") else "ok"]
    flags += [flag for flag in ("interrupted", "terminate") if result.get(flag)]
    details.update(
        is_error=bool(result.get("is_error")),
        interrupted=bool(result.get("interrupted")),
        terminate=bool(result.get("terminate")),
        preview=_preview(str(result.get("preview") or "")),
        content_chars=result.get("content_chars"),
        tool_ms=result.get("duration_ms"),
    )
    return (
        f'{line} → {", ".join(flags)}: "{details["preview"]}" '
        f"({result.get('content_chars', '?')} chars)"
    )


def _activity_label(activity: _Activity) -> str:
    data = activity.input if isinstance(activity.input, dict) else {}
    if activity.activity_type == "run_tool":
        call = data.get("call") or {}
        return f"tool {call.get('name')} {_preview(call.get('args_preview'), 40)}"
    if activity.activity_type == "model_turn":
        return f"the model call of turn {data.get('turn')}"
    return f"{activity.activity_type} ({activity.activity_id})"


# Small helpers -----------------------------------------------------------------------------


def _time(event: HistoryEvent) -> datetime:
    return event.event_time.ToDatetime(tzinfo=UTC)


def _ms(delta: timedelta) -> int:
    return max(0, round(delta.total_seconds() * 1000))


def _decode_one(payload: Payload) -> Any:
    try:
        return pydantic_data_converter.payload_converter.from_payload(payload)
    except Exception:  # an encoding this reader does not know (e.g. encrypted)
        encoding = payload.metadata.get("encoding", b"?").decode(errors="replace")
        return f"<{encoding} payload, {len(payload.data)} bytes>"


def _decode(payloads: Payloads) -> Any:
    """The first payload's value (activities and workflows here take one argument)."""
    return _decode_one(payloads.payloads[0]) if payloads.payloads else None


def _failure(failure: Failure) -> dict[str, Any]:
    out: dict[str, Any] = {"message": failure.message}
    if failure.HasField("application_failure_info"):
        info = failure.application_failure_info
        out["type"] = info.type
        if info.details.payloads:
            out["details"] = [_decode_one(p) for p in info.details.payloads]
    elif failure.HasField("timeout_failure_info"):
        timeout = TimeoutType.Name(failure.timeout_failure_info.timeout_type)
        out["type"] = "timeout " + timeout.removeprefix("TIMEOUT_TYPE_").lower()
    elif failure.HasField("canceled_failure_info"):
        out["type"] = "cancelled"
    if failure.HasField("cause"):
        out["cause"] = _failure(failure.cause)
    return out


def _provider(failure: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ProviderFailure a model call's failure carries, if any."""
    if failure and failure.get("type") == PROVIDER_ERROR and failure.get("details"):
        first = failure["details"][0]
        return first if isinstance(first, dict) else None
    return None


def _provider_kind(provider: dict[str, Any] | None) -> str:
    if provider is None:
        return "not a provider error"
    status = f" {provider['status']}" if provider.get("status") else ""
    return f"{provider.get('kind')}{status}"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(block.get("text", ""))
            for block in content
            if isinstance(block, dict) and block.get("type") == "text"
        )
    return ""


def _first_user_text(prompt: Any) -> str:
    for message in prompt if isinstance(prompt, list) else []:
        if isinstance(message, dict) and message.get("role") == "user":
            return _preview(_text_of(message.get("content")))
    return ""


def _tokens(usage: dict[str, Any]) -> str:
    return f"{usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out tokens"


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _preview(text: Any, limit: int = PREVIEW_CHARS) -> str:
    """`text` on one line, cut to `limit` characters."""
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _short(run_id: str) -> str:
    return run_id[:8]


def _link(timeline: RunTimeline, kind: str, key: str) -> str | None:
    for item in timeline.items:
        if item.kind == kind and isinstance(item.details.get(key), str):
            return str(item.details[key])
    return None


# Rendering ------------------------------------------------------------------------------

_LABELS = {
    "run_started": ("run started", "bold"),
    "start_run": ("start run", "dim"),
    "model_call": ("model", "cyan"),
    "save_point": ("  save point", "green"),
    "tool_call": ("  tool", "yellow"),
    "retry": ("retry", "red"),
    "signal": ("signal", "magenta"),
    "cancel": ("cancel", "red"),
    "finish_run": ("finish run", "dim"),
    "run_ended": ("run ended", "bold"),
    "continued_as_new": ("continued", "bold"),
}


def _widths(items: list[TimelineItem], start: datetime) -> tuple[int, int]:
    """Widths of the offset and turn columns: as wide as this timeline needs."""
    offsets = [len(f"{(item.at - start).total_seconds():+.3f}") for item in items]
    turns = [len(f"turn {item.turn}") for item in items if item.turn is not None]
    return max(offsets, default=6), max(turns, default=0)


def _prefix(item: TimelineItem, start: datetime, widths: tuple[int, int]) -> Text:
    """The columns before an item's summary: offset, turn, what it is, how long."""
    label, style = _LABELS.get(item.kind, (item.kind.replace("_", " "), ""))
    offset = (item.at - start).total_seconds()
    offset_width, turn_width = widths
    turn = f"turn {item.turn}" if item.turn is not None else ""
    line = Text()
    line.append(f"{offset:+{offset_width}.3f}s  ", style="dim")
    if turn_width:
        line.append(f"{turn:<{turn_width}}  ", style="dim")
    line.append(f"{label:<13}", style=style)
    line.append(f"{_duration(item.duration_ms):>8}  ", style="dim")
    return line


def _duration(ms: int | None) -> str:
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:.2f}s"
    minutes, seconds = divmod(ms // 1000, 60)
    return f"{minutes}m{seconds:02d}s"
