"""Child workflows in a run's history: a `delegate` call's sub-agent, one timeline item
from its start to its result, naming the sub-agent's session so its own timelines can be
read (`duragent history` prints them below the parent's)."""

from __future__ import annotations

from typing import Any

from temporalio.api.history import v1 as history_v1
from temporalio.api.history.v1 import HistoryEvent

from duragent.client.history.timeline import TimelineItem
from duragent.client.history.values import (
    decode,
    decode_one,
    event_time,
    failure_of,
    millis,
    preview,
    short_run_id,
    token_counts,
)

SUBAGENT = "subagent"
"""The timeline item kind of a child workflow."""


class ChildWorkflows:
    """`_Reader`'s handlers for child workflow events (it provides `_add` and `children`)."""

    children: dict[int, TimelineItem]

    def _add(self, event: HistoryEvent, kind: str, summary: str, **details: Any) -> TimelineItem:
        raise NotImplementedError

    def _on_start_child_workflow_execution_initiated(
        self,
        event: HistoryEvent,
        attrs: history_v1.StartChildWorkflowExecutionInitiatedEventAttributes,
    ) -> None:
        data = decode(attrs.input)
        memo = {key: decode_one(value) for key, value in attrs.memo.fields.items()}
        run = data if isinstance(data, dict) else {}
        session_id = run.get("session_id")
        item = self._add(
            event,
            SUBAGENT,
            "",
            workflow_id=attrs.workflow_id,
            workflow_type=attrs.workflow_type.name,
            child_session_id=session_id if isinstance(session_id, str) else None,
            child_run_id=run.get("run_id"),
            tool_call_id=memo.get("tool_call_id"),
            name=memo.get("name"),
            outcome="starting",
        )
        self.children[event.event_id] = item
        _summarize(item)

    def _on_child_workflow_execution_started(
        self, event: HistoryEvent, attrs: history_v1.ChildWorkflowExecutionStartedEventAttributes
    ) -> None:
        self._child_closed(attrs.initiated_event_id, event, "running")

    def _on_child_workflow_execution_completed(
        self,
        event: HistoryEvent,
        attrs: history_v1.ChildWorkflowExecutionCompletedEventAttributes,
    ) -> None:
        result = decode(attrs.result)
        item = self._child_closed(attrs.initiated_event_id, event, "completed")
        if item is not None and isinstance(result, dict):
            item.details.update(
                status=result.get("status"),
                turns=result.get("turns"),
                usage=result.get("usage"),
                final_text=preview(result.get("final_text")),
                error=result.get("error"),
            )
            _summarize(item)

    def _on_child_workflow_execution_failed(
        self, event: HistoryEvent, attrs: history_v1.ChildWorkflowExecutionFailedEventAttributes
    ) -> None:
        item = self._child_closed(attrs.initiated_event_id, event, "failed")
        if item is not None:
            item.details["failure"] = failure_of(attrs.failure)
            _summarize(item)

    def _on_child_workflow_execution_canceled(
        self, event: HistoryEvent, attrs: history_v1.ChildWorkflowExecutionCanceledEventAttributes
    ) -> None:
        self._child_closed(attrs.initiated_event_id, event, "cancelled")

    def _on_child_workflow_execution_terminated(
        self,
        event: HistoryEvent,
        attrs: history_v1.ChildWorkflowExecutionTerminatedEventAttributes,
    ) -> None:
        self._child_closed(attrs.initiated_event_id, event, "terminated")

    def _on_child_workflow_execution_timed_out(
        self, event: HistoryEvent, attrs: history_v1.ChildWorkflowExecutionTimedOutEventAttributes
    ) -> None:
        self._child_closed(attrs.initiated_event_id, event, "timed_out")

    def _on_start_child_workflow_execution_failed(
        self,
        event: HistoryEvent,
        attrs: history_v1.StartChildWorkflowExecutionFailedEventAttributes,
    ) -> None:
        self._child_closed(attrs.initiated_event_id, event, "not started")

    def _child_closed(
        self, initiated: int, event: HistoryEvent, outcome: str
    ) -> TimelineItem | None:
        item = self.children.get(initiated)
        if item is None:
            return None
        item.details["outcome"] = outcome
        if outcome != "running":
            item.duration_ms = millis(event_time(event) - item.at)
        _summarize(item)
        return item


def _summarize(item: TimelineItem) -> None:
    details = item.details
    name = f"{details['name']!r} " if details.get("name") else ""
    call = f"for {details['tool_call_id']} " if details.get("tool_call_id") else ""
    session = details.get("child_session_id") or details.get("workflow_id")
    run = details.get("child_run_id")
    head = f"sub-agent {name}{call}in session {session}"
    if isinstance(run, str):
        head += f" run {short_run_id(run)}"
    status = details.get("status") or details.get("outcome")
    summary = f"{head}: {status}"
    if details.get("final_text"):
        summary += f' "{details["final_text"]}"'
    if isinstance(details.get("usage"), dict):
        summary += f" ({details.get('turns')} turn(s), {token_counts(details['usage'])})"
    if details.get("failure"):
        summary += f": {preview(details['failure'].get('message'))}"
    item.summary = summary
