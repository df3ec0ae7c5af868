"""Tool calls on their session's host (sticky workspaces), and waiting for a gone host.

A run whose session has a host sends its tool calls to that host's task queue. A call no
worker takes within `RunOptions.host_check_s` means the host is gone (down, restarting):
the run is in the `awaiting_host` phase while a cheap `host_ready` activity asks the
host's queue again and again, up to `RunOptions.host_wait_s`. When the host answers, the
call is scheduled anew (it says so, so the tool treats it as a possible second attempt);
when it does not, the call fails with `HostGone`, the turn is saved with a result for
every call, and the run ends with an error naming the host and the wait.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from duragent.domain.events import HostWaiting
    from duragent.domain.fallbacks import ToolRun
    from duragent.domain.hosts import host_gone_message, host_task_queue
    from duragent.domain.runs import RunOptions
    from duragent.domain.turns import ToolCallInput, ToolCallOutcome

from duragent.workflows import steps
from duragent.workflows.run_state import RunSteps


class HostGone(Exception):
    """The session's host did not come back within the run's host wait."""


def gone(outcomes: list[ToolRun]) -> str | None:
    """Why the run must end: a call's host is gone for good; None if none is."""
    return next((str(o) for o in outcomes if isinstance(o, HostGone)), None)


class HostWaits:
    """The tool calls of a run waiting for its host; the phase is `awaiting_host` while
    any does."""

    def __init__(self) -> None:
        self.waiting = 0

    async def run_tool(
        self, run: RunSteps, host: str, data: ToolCallInput, options: RunOptions
    ) -> ToolCallOutcome:
        queue = host_task_queue(workflow.info().task_queue, host)
        while True:
            try:
                return await steps.run_tool(
                    data, options, task_queue=queue, start_within_s=options.host_check_s
                )
            except ActivityError as err:
                if not steps.not_taken(err):
                    raise
            await self._changed(run, host, data, waiting=True)
            await _wait_for_host(queue, host, data, options)
            await self._changed(run, host, data, waiting=False)
            data = data.model_copy(update={"rescheduled": data.rescheduled + 1})

    async def _changed(
        self, run: RunSteps, host: str, data: ToolCallInput, *, waiting: bool
    ) -> None:
        self.waiting += 1 if waiting else -1
        event = HostWaiting(host=host, tool_call_id=data.call.id, waiting=waiting)
        if self.waiting == (1 if waiting else 0):
            await run.set_phase("awaiting_host" if waiting else "turn", event)
            return
        await run.emit("host", event)


async def _wait_for_host(queue: str, host: str, data: ToolCallInput, options: RunOptions) -> None:
    """Until a worker of the host answers; `HostGone` after `options.host_wait_s`."""
    since = workflow.now()
    asked = 0
    while True:
        left = options.host_wait_s - (workflow.now() - since).total_seconds()
        if left <= 0:
            raise HostGone(host_gone_message(host, options.host_wait_s))
        asked += 1
        activity_id = f"turn-{data.turn}-host-{data.call.id}-{data.rescheduled}-{asked}"
        try:
            await steps.host_ready(queue, activity_id, min(options.host_check_s, left))
            return
        except ActivityError as err:
            if steps.cancelled(err):  # the run is being aborted
                raise asyncio.CancelledError from err
            if not steps.not_taken(err):
                return  # a worker took it: the host is up, whatever it answered
