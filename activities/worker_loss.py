"""After a worker is lost: send the run's next workflow task to any worker at once.

A workflow's tasks go to the sticky queue of the worker that ran its last one (it has
the run cached). When that worker dies, Temporal still counts it as polling for a while,
so the task that follows a retried activity waits on the dead worker's sticky queue
until `sticky_queue_schedule_to_start_timeout` runs out, seconds after the activity
itself recovered. A retried model or tool call is what a worker loss looks like from
here, so its attempt clears the run's stickiness first: the next task goes to the
shared queue, and whichever worker takes it replays the history (a cost paid once, on
a retry only).
"""

from __future__ import annotations

import logging

from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetStickyTaskQueueRequest
from temporalio.service import RPCError

logger = logging.getLogger(__name__)


async def unstick_after_retry() -> None:
    """On a retried attempt, clear the run's sticky queue (best effort: on failure the
    task still moves, once the sticky timeout runs out)."""
    info = activity.info()
    if info.attempt <= 1 or not info.workflow_id or not info.workflow_namespace:
        return
    request = ResetStickyTaskQueueRequest(
        namespace=info.workflow_namespace,
        execution=WorkflowExecution(
            workflow_id=info.workflow_id, run_id=info.workflow_run_id or ""
        ),
    )
    try:
        await activity.client().workflow_service.reset_sticky_task_queue(request)
    except RPCError as err:
        logger.warning("could not clear the sticky queue of %s: %s", info.workflow_id, err)
