"""One line for people per activity and save point of a history, with its details."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from duragent.client.history.timeline import TimelineItem
from duragent.client.history.values import (
    MODEL_CALL_ID,
    compact,
    millis,
    preview,
    provider_kind,
    provider_of,
    scheduled_by,
    text_of,
    token_counts,
)
from duragent.domain.turns import WORKER_LOST


@dataclass
class ScheduledActivity:
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


def summarize_activity(activity: ScheduledActivity) -> None:
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
        details["run_ms"] = millis(activity.closed - activity.started)
    if activity.closed:
        item.duration_ms = millis(activity.closed - activity.scheduled)
    for key in [k for k, v in details.items() if v is None]:
        del details[key]
    data = activity.input if isinstance(activity.input, dict) else {}
    result = activity.result if isinstance(activity.result, dict) else {}
    if activity.activity_type == "model_turn":
        item.summary = _model_summary(activity, data, result)
    elif activity.activity_type == "take_turn":  # the model call; its tool calls: turn_calls
        item.summary = _model_summary(activity, data, result.get("reply") or {})
        if isinstance(result.get("model_ms"), int):  # the model's part of the turn
            details["turn_ms"], item.duration_ms = item.duration_ms, result["model_ms"]
    elif activity.activity_type == "run_tool":
        item.summary = _tool_summary(activity, data, result)
    elif activity.activity_type == "summarize" and activity.outcome == "completed":
        item.summary = _summary_call(activity, data, result)
    else:
        returned = "" if activity.result is None else preview(compact(activity.result))
        label = activity_label(activity) + attempts_note(activity)
        item.summary = f"{label}: {activity.outcome} {returned}".rstrip()
        if activity.result is not None:
            details["result"] = activity.result
    if activity.failure and activity.activity_type not in ("model_turn", "take_turn"):
        item.summary += f": {preview(failure_text(activity.failure))}"


def attempts_note(activity: ScheduledActivity) -> str:
    """A note for an activity Temporal ran more than once (a worker died, a timeout),
    with what the attempt before the last one failed with; empty after one attempt."""
    if activity.attempts < 2:
        return ""
    before = activity.last_failure
    cause = f"; the one before: {preview(failure_text(before), 60)}" if before else ""
    return f" ({activity.attempts} attempts{cause})"


_TIMEOUTS = {
    # An activity's heartbeats stop when its worker dies (or hangs): that is how Temporal
    # notices a crash, and what a person reading the history wants to be told.
    "timeout heartbeat": "worker lost: heartbeat timed out",
    # Or sooner, by its lease in the store (`activities.leases`).
    WORKER_LOST: "worker lost: its lease lapsed",
    "timeout start_to_close": "took too long: start-to-close timeout",
    "timeout schedule_to_start": "no worker took it: schedule-to-start timeout",
    "timeout schedule_to_close": "took too long: schedule-to-close timeout",
}


def failure_text(failure: dict[str, Any]) -> str:
    """A failure for people: timeouts and lost workers say what they mean, others their
    message."""
    return _TIMEOUTS.get(str(failure.get("type")), str(failure.get("message")))


def _model_summary(
    activity: ScheduledActivity, data: dict[str, Any], result: dict[str, Any]
) -> str:
    details = activity.item.details
    snapshot = result.get("snapshot") or data.get("snapshot") or {}
    model = str(snapshot.get("model") or "model")
    match = MODEL_CALL_ID.match(activity.activity_id)
    attempt = int(match.group(2)) if match else 1
    details.update(model=model, model_attempt=attempt)
    prefix = model + (f" (attempt {attempt})" if attempt > 1 else "") + attempts_note(activity)
    if activity.outcome == "completed":
        calls = result.get("tool_calls") or []
        usage = result.get("usage") or {}
        details.update(
            stop_reason=result.get("stop_reason"),
            usage=usage,
            text_preview=preview(str(result.get("text_preview") or "")),
            tool_calls=[
                {"id": c.get("id"), "name": c.get("name"), "args": preview(c.get("args_preview"))}
                for c in calls
            ],
        )
        parts = [f"{prefix}: {result.get('stop_reason')}, {token_counts(usage)}"]
        if details["text_preview"]:
            parts.append(f'"{details["text_preview"]}"')
        if calls:
            names = ", ".join(
                f"{c.get('name')} {preview(c.get('args_preview'), 40)}" for c in calls
            )
            parts.append(f"{len(calls)} tool call(s): {names}")
        return "; ".join(parts)
    if activity.failure:
        provider = provider_of(activity.failure)
        if provider:
            details["provider"] = provider
        message = (provider or {}).get("message") or failure_text(activity.failure)
        return f"{prefix}: {activity.outcome} ({provider_kind(provider)}): {preview(message)}"
    return f"{prefix}: {activity.outcome}"


def _summary_call(activity: ScheduledActivity, data: dict[str, Any], result: dict[str, Any]) -> str:
    """A compaction's or branch summary's model call, a line of its own (with its model
    and usage, for its cost: it is no turn of the run, but the run pays for it)."""
    usage = result.get("usage") or {}
    model = str(data.get("model") or "model")
    activity.item.details.update(model=model, usage=usage, summary_kind=data.get("kind"))
    line = f"{data.get('kind')} summary with {model}{attempts_note(activity)}"
    return f"{line}: {token_counts(usage)}, {result.get('summary_chars', '?')} chars"


def turn_calls(activity: ScheduledActivity) -> list[TimelineItem]:
    """The tool calls a turn's activity (`take_turn`) ran, one item each, at its end."""
    result = activity.result if isinstance(activity.result, dict) else {}
    reply = result.get("reply") or {}
    if activity.activity_type != "take_turn" or activity.closed is None:
        return []
    items = []
    outcomes = result.get("outcomes") or []
    for call, outcome in zip(reply.get("tool_calls") or [], outcomes, strict=False):
        item = TimelineItem(
            at=activity.closed, kind="tool_call", turn=activity.item.turn, summary=""
        )
        # Which activity ran it, and whether an abort reached it there.
        item.details.update(
            (key, activity.item.details[key])
            for key in ("activity_id", "cancel_requested_at")
            if key in activity.item.details
        )
        if outcome is None:
            item.details.update(tool=call.get("name"), call_id=call.get("id"), skipped=True)
            item.summary = f"{call.get('name')} {preview(call.get('args_preview'), 60)}: skipped"
        else:
            item.summary = _call_summary(item.details, call, "", "completed", outcome)
            item.duration_ms = outcome.get("duration_ms")
        items.append(item)
    return items


def _tool_summary(activity: ScheduledActivity, data: dict[str, Any], result: dict[str, Any]) -> str:
    call = data.get("call") or {}
    note = attempts_note(activity)
    return _call_summary(activity.item.details, call, note, activity.outcome, result)


def _call_summary(
    details: dict[str, Any], call: dict[str, Any], note: str, outcome: str, result: dict[str, Any]
) -> str:
    """A tool call's line, its `details` filled in: the call, how it `outcome`d, and its
    result (a `ToolCallOutcome`'s JSON) when it completed."""
    name, args = str(call.get("name") or "?"), preview(call.get("args_preview"), 60)
    details.update(tool=name, call_id=call.get("id"), args=preview(call.get("args_preview")))
    line = f"{name} {args}{note}"
    if outcome != "completed":
        return f"{line}: {outcome}"
    flags = ["error" if result.get("is_error") else "ok"]
    flags += [flag for flag in ("interrupted", "terminate") if result.get(flag)]
    details.update(
        is_error=bool(result.get("is_error")),
        interrupted=bool(result.get("interrupted")),
        terminate=bool(result.get("terminate")),
        preview=preview(str(result.get("preview") or "")),
        content_chars=result.get("content_chars"),
        tool_ms=result.get("duration_ms"),
    )
    return (
        f'{line} → {", ".join(flags)}: "{details["preview"]}" '
        f"({result.get('content_chars', '?')} chars)"
    )


def activity_label(activity: ScheduledActivity) -> str:
    data = activity.input if isinstance(activity.input, dict) else {}
    if activity.activity_type == "run_tool":
        call = data.get("call") or {}
        return f"tool {call.get('name')} {preview(call.get('args_preview'), 40)}"
    if activity.activity_type in ("model_turn", "take_turn"):
        return f"the model call of turn {data.get('turn')}"
    return f"{activity.activity_type} ({activity.activity_id})"


def save_point(commit: dict[str, Any], carrier: str) -> tuple[str, dict[str, Any]]:
    """The summary and details of the save point a model call carried (its `commit`)."""
    slots = commit.get("slots") or []
    entries = commit.get("entries") or []
    consumed = commit.get("consumed") or []
    fallbacks = sum(1 for slot in slots if slot.get("fallback"))
    texts = {
        entry.get("id"): preview(text_of((entry.get("message") or {}).get("content")))
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
    details: dict[str, Any] = dict(
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
    return "; ".join(parts), details


def run_result(result: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The summary and details of a run's end (its `RunResult`)."""
    usage = result.get("usage") or {}
    summary = f"{result['status']}: {result['turns']} turn(s), {token_counts(usage)}"
    if result.get("error"):
        summary += f", error: {preview(str(result['error']))}"
    cleared = [*result.get("cleared_steering", []), *result.get("cleared_follow_ups", [])]
    if cleared:
        summary += f", dropped {len(cleared)} queued message(s)"
    details: dict[str, Any] = dict(
        run_status=result["status"],
        turns=result["turns"],
        usage=usage,
        error=result.get("error"),
        final_text=preview(str(result.get("final_text") or "")) or None,
        cleared_steering=result.get("cleared_steering") or None,
        cleared_follow_ups=result.get("cleared_follow_ups") or None,
        cancelled_inputs=result.get("cancelled_inputs") or None,
    )
    return summary, details


def local_activity(activity_type: str, summary: str, result: Any) -> tuple[str, str]:
    """The item kind and line of a local activity's marker, from its UI summary and result."""
    if activity_type == "start_run" and isinstance(result, dict):
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
            line += f', final text "{preview(str(result["final_text"]))}"'
    elif activity_type == "apply_changes":
        kind, line = "apply_changes", summary or "apply changes"
    else:
        kind, line = "local_activity", f"{activity_type}: {summary or compact(result)}"
    return kind, line


def signal_content(payload: Any) -> tuple[str, dict[str, Any]]:
    """What a signal carried, for its line, and its details."""
    details: dict[str, Any] = {}
    what = preview(compact(payload))
    if isinstance(payload, dict):
        details["id"] = payload.get("id")
        if isinstance(payload.get("message"), dict):  # a QueuedMessage: steer, follow_up
            what = f'"{preview(text_of(payload["message"].get("content")))}"'
            details["text"] = what[1:-1]
            schedule = scheduled_by(payload["message"])
            if schedule:
                details["scheduled_by"] = schedule
                what += f" (scheduled: {schedule})"
        elif "config" in payload or "entries" in payload:  # a SessionChange
            config = {k: v for k, v in (payload.get("config") or {}).items() if v is not None}
            entries = [str(e.get("type")) for e in payload.get("entries") or []]
            what = ", ".join(
                [*(f"{k}={preview(compact(v), 40)}" for k, v in config.items()), *entries]
            )
            ids = [e.get("id") for e in payload.get("entries") or []]
            details.update(config=config, entry_ids=ids)
        else:
            details["payload"] = what
    else:
        details["payload"] = what
    return what, details
