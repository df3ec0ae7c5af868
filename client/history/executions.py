"""The execution's own events in a run's history: its start (the run's input), its end
(the run's result, a failure, a cancellation, ...), a continue-as-new, and the workflow
tasks that failed or timed out."""

from __future__ import annotations

from typing import Any

from temporalio.api.enums.v1 import TimeoutType
from temporalio.api.history import v1 as history_v1
from temporalio.api.history.v1 import HistoryEvent

from duragent.client.history.summaries import run_result
from duragent.client.history.timeline import TimelineItem
from duragent.client.history.values import (
    compact,
    decode,
    failure_of,
    first_user_text,
    preview,
    scheduled_by,
    short_run_id,
)


class Executions:
    """`_Reader`'s handlers for the execution's events (it provides `_add`, `turn`,
    `workflow_type` and `run_id`)."""

    turn: int | None
    workflow_type: str
    run_id: str | None

    def _add(self, event: HistoryEvent, kind: str, summary: str, **details: Any) -> TimelineItem:
        raise NotImplementedError

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
