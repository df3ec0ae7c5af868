"""A schedule's firing: the workflow a Temporal schedule starts each time it fires.

A schedule can only start a workflow, and a session's run must start under the
session's own workflow id (one run at a time), which a schedule's action cannot name.
So the action is this short workflow, whose one activity delivers the prompt as a
person's prompt is delivered, busy session and all (`client.schedules`).
"""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow
from temporalio.common import SearchAttributeKey

with workflow.unsafe.imports_passed_through():
    from duragent.domain.schedules import DeliverScheduledPrompt, FiringOutcome, ScheduleFiring

from duragent.workflows import steps

SCHEDULED_START = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")
"""The time a schedule fired for, set by Temporal on each workflow a schedule starts."""


@workflow.defn(name="ScheduledPrompt")
class ScheduledPrompt:
    @workflow.run
    async def run(self, firing: ScheduleFiring) -> FiringOutcome:
        info = workflow.info()
        nominal: datetime = info.typed_search_attributes.get(SCHEDULED_START) or workflow.now()
        return await steps.deliver_scheduled_prompt(
            DeliverScheduledPrompt(
                firing=firing,
                firing_id=info.workflow_id,
                scheduled_at=int(nominal.timestamp() * 1000),
            )
        )
