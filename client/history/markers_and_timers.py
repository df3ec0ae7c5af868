"""Markers and timers in a run's history: local activities (start_run, finish_run,
record_events, ...) as the markers they leave, timers, and a provider retry, told by a
record_events marker and timed by the backoff timer it then waits on."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from temporalio.api.history import v1 as history_v1
from temporalio.api.history.v1 import HistoryEvent

from duragent.client.history.summaries import ScheduledActivity, local_activity
from duragent.client.history.timeline import TimelineItem
from duragent.client.history.values import (
    MODEL_CALL_ID,
    compact,
    decode,
    decode_one,
    duration_text,
    event_time,
    failure_of,
    millis,
    preview,
    provider_kind,
    provider_of,
)


@dataclass
class Retry:
    """A provider retry: the record_events marker, then the backoff timer it waits on."""

    item: TimelineItem
    started: datetime | None = None


class MarkersAndTimers:
    """`_Reader`'s handlers for markers and timers (it provides `_add`, `last_model`,
    `timers`, `retries` and `pending_retry`)."""

    last_model: ScheduledActivity | None
    timers: dict[str, TimelineItem]
    retries: dict[str, Retry]
    pending_retry: Retry | None

    def _add(self, event: HistoryEvent, kind: str, summary: str, **details: Any) -> TimelineItem:
        raise NotImplementedError

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
        self.pending_retry = Retry(item)

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
