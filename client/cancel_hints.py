"""Tell this process's activities at once when their workflow cancels them.

Activities heartbeat at a pace shared across the process (`activities.heartbeat`), so
under load a cancellation could wait a second or two for the next heartbeat's reply.
The workflow task that cancels an activity (an abort, a guidance interrupt) usually runs
in the same process as the activity: this runner wraps the workflow runner and reads
each workflow task's commands as they leave. An activity's cancel request makes it
heartbeat now, and every 50 ms until the reply carries the cancellation.

It only reads the commands the workflow code produced; it changes none, so histories
and replay are as without it.
"""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.converter import SerializationContext, StorageDriverStoreContext
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner
from temporalio.worker._command_aware_visitor import CommandInfo
from temporalio.workflow import Info, _Definition

from activities.heartbeat import PACE, HeartbeatPace


class CancelHintingRunner(WorkflowRunner):
    """`inner`, with each activity cancellation its workflows ask for hinted to `pace`."""

    def __init__(self, inner: WorkflowRunner, pace: HeartbeatPace = PACE) -> None:
        self.inner = inner
        self._pace = pace

    def prepare_workflow(self, defn: _Definition) -> None:
        self.inner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _HintingInstance(self.inner.create_instance(det), det.info.workflow_id, self._pace)

    def set_worker_level_failure_exception_types(
        self, types: Sequence[type[BaseException]]
    ) -> None:
        self.inner.set_worker_level_failure_exception_types(types)


class _HintingInstance(WorkflowInstance):
    def __init__(self, inner: WorkflowInstance, workflow_id: str, pace: HeartbeatPace) -> None:
        self._inner = inner
        self._workflow_id = workflow_id
        self._pace = pace
        self._activity_ids: dict[int, str] = {}
        """Command sequence number -> activity id, of the activities this run scheduled."""

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        completion = self._inner.activate(act)
        for command in completion.successful.commands:
            variant = command.WhichOneof("variant")
            if variant == "schedule_activity":
                scheduled = command.schedule_activity
                self._activity_ids[scheduled.seq] = scheduled.activity_id
            elif variant == "request_cancel_activity":
                activity_id = self._activity_ids.pop(command.request_cancel_activity.seq, None)
                if activity_id is not None:
                    self._pace.hint_cancel(self._workflow_id, activity_id)
        for job in act.jobs:  # a finished activity is cancelled no more
            if job.WhichOneof("variant") == "resolve_activity":
                self._activity_ids.pop(job.resolve_activity.seq, None)
        return completion

    def get_serialization_context(
        self, command_info: CommandInfo | None
    ) -> SerializationContext | None:
        return self._inner.get_serialization_context(command_info)

    def get_external_store_context(
        self, command_info: CommandInfo | None
    ) -> StorageDriverStoreContext:
        return self._inner.get_external_store_context(command_info)

    def get_info(self) -> Info:
        return self._inner.get_info()

    def get_thread_id(self) -> int | None:
        return self._inner.get_thread_id()
