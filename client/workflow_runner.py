"""The workflow runner: Temporal's sandbox, and two things around it.

Cancel hints. Activities heartbeat only as often as their liveness needs
(`activities.heartbeat`), so a cancellation would wait seconds for the next heartbeat's
reply. The runner reads each workflow task's commands as they leave, and an activity's
cancel request (an abort, a guidance interrupt) hints the call: in this process at once,
and in every other worker process through the store's server (PostgreSQL's `NOTIFY`,
SQLite's table: `activities.cancel_hints`), so that wherever it runs it heartbeats now,
and again within milliseconds until the reply carries the cancellation.

Serialization and external-store contexts asked once per command between two
activations (see `get_serialization_context`), not once per payload list and pass; and
not asked at all when the worker's data converter converts alike in every context (no
codec or converter of its depends on one, and no external storage: duragent's default).

It only reads what the workflow code produced and changes none of it, so histories and
replay are as without it.
"""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.converter import (
    ActivitySerializationContext,
    DataConverter,
    SerializationContext,
    StorageDriverStoreContext,
    WorkflowSerializationContext,
)
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner
from temporalio.worker._command_aware_visitor import CommandInfo
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from temporalio.workflow import Info, _Definition

from duragent.activities.cancel_hints import CancelHints
from duragent.activities.heartbeat import PACE, CallKey, HeartbeatPace

PASSED_THROUGH = ("duragent", "opentelemetry")
"""What a worker's sandbox loads once and shares between runs: duragent itself and
OpenTelemetry (as Temporal's own OpenTelemetry plugin does, for traced workflows). The
sandbox would otherwise import every workflow module again for each new run (a run is a
prompt to idle), and that import was a tenth of a worker's CPU at a hundred sessions."""

STRICT_PASSED_THROUGH = ("duragent.domain", "opentelemetry")
"""What the strict sandbox passes through: only the pure domain package, so the
workflows' own code runs under the sandbox's restrictions, where a call to the clock, a
random source or I/O fails at once (the replay tests and the fast workflow tests)."""


def workflow_runner(
    hints: CancelHints | None = None,
    *,
    strict: bool = False,
    converter: DataConverter | None = None,
) -> CancelHintingRunner:
    """The sandbox, passing `PASSED_THROUGH` through (`STRICT_PASSED_THROUGH` if `strict`);
    cancellations hinted in this process, and to the others through `hints` if given.
    `converter`: the worker's data converter, when known (its contexts are asked only if
    it uses them)."""
    passed = STRICT_PASSED_THROUGH if strict else PASSED_THROUGH
    return CancelHintingRunner(
        SandboxedWorkflowRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_modules(*passed)
        ),
        hints=hints,
        contexts_used=converter is None or uses_contexts(converter),
    )


def uses_contexts(converter: DataConverter) -> bool:
    """Whether `converter` converts differently for some workflow or activity (a codec
    that encrypts by workflow, say) or stores payloads outside the history. A converter
    bound to a context it does not use is itself (the SDK's contract), so a workflow's and
    an activity's context are tried."""
    probes: list[SerializationContext] = [
        WorkflowSerializationContext(namespace="probe", workflow_id="probe"),
        ActivitySerializationContext(
            namespace="probe",
            activity_id="probe",
            activity_type="probe",
            activity_task_queue="probe",
            workflow_id="probe",
            workflow_type="probe",
            is_local=False,
        ),
    ]
    return converter.external_storage is not None or any(
        converter.with_context(probe) is not converter for probe in probes
    )


class CancelHintingRunner(WorkflowRunner):
    """`inner`, with each activity cancellation its workflows ask for hinted to `pace`
    (and published to `hints`), and each command's serialization context asked once
    between two activations, or never when `contexts_used` is false (the worker's data
    converter uses none: see `uses_contexts`)."""

    def __init__(
        self,
        inner: WorkflowRunner,
        pace: HeartbeatPace = PACE,
        hints: CancelHints | None = None,
        *,
        contexts_used: bool = True,
    ) -> None:
        self.inner = inner
        self._pace = pace
        self._hints = hints
        self._contexts_used = contexts_used

    def prepare_workflow(self, defn: _Definition) -> None:
        self.inner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        info = det.info
        return _HintingInstance(
            self.inner.create_instance(det),
            (info.workflow_id, info.run_id),
            self._pace,
            self._hints,
            self._contexts_used,
        )

    def set_worker_level_failure_exception_types(
        self, types: Sequence[type[BaseException]]
    ) -> None:
        self.inner.set_worker_level_failure_exception_types(types)


class _HintingInstance(WorkflowInstance):
    def __init__(
        self,
        inner: WorkflowInstance,
        run: tuple[str, str],
        pace: HeartbeatPace,
        hints: CancelHints | None,
        contexts_used: bool,
    ) -> None:
        self._inner = inner
        self._run = run
        """(workflow id, run id): the run whose calls this instance cancels."""
        self._pace = pace
        self._hints = hints
        self._activity_ids: dict[int, str] = {}
        """Command sequence number -> activity id, of the activities this run scheduled."""
        self._contexts: dict[tuple[int, int] | None, SerializationContext | None] = {}
        self._store_contexts: dict[tuple[int, int] | None, StorageDriverStoreContext] = {}
        self._contexts_used = contexts_used
        self._no_store_context = StorageDriverStoreContext()
        """Answered for every command when no context is used: the SDK binds it only to
        external storage, and there is none then."""

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        self._contexts.clear()
        self._store_contexts.clear()
        try:
            completion = self._inner.activate(act)
        finally:
            self._contexts.clear()
            self._store_contexts.clear()
        for command in completion.successful.commands:
            variant = command.WhichOneof("variant")
            if variant == "schedule_activity":
                scheduled = command.schedule_activity
                self._activity_ids[scheduled.seq] = scheduled.activity_id
            elif variant == "request_cancel_activity":
                activity_id = self._activity_ids.pop(command.request_cancel_activity.seq, None)
                if activity_id is not None:
                    self._hint((*self._run, activity_id))
        for job in act.jobs:  # a finished activity is cancelled no more
            if job.WhichOneof("variant") == "resolve_activity":
                self._activity_ids.pop(job.resolve_activity.seq, None)
        return completion

    def _hint(self, key: CallKey) -> None:
        """At once if the call runs in this process; else to the others (where it runs,
        or it ended: then the hint is ignored), through the store's server."""
        if not self._pace.hint_cancel(key) and self._hints is not None:
            self._hints.publish(key)

    def get_serialization_context(
        self, command_info: CommandInfo | None
    ) -> SerializationContext | None:
        # The SDK asks once per payload list and pass (three to decode an activation,
        # four to encode its completion), and the sandbox answers each by running code
        # in it. The answer depends only on the run's state, which changes only inside
        # `activate`: so it is asked once per command between two activations. None
        # means "convert without a context", which is the same when none is used.
        if not self._contexts_used:
            return None
        key = _command_key(command_info)
        if key not in self._contexts:
            self._contexts[key] = self._inner.get_serialization_context(command_info)
        return self._contexts[key]

    def get_external_store_context(
        self, command_info: CommandInfo | None
    ) -> StorageDriverStoreContext:
        # Asked as often as the serialization context, and answered the same way.
        if not self._contexts_used:
            return self._no_store_context
        key = _command_key(command_info)
        if key not in self._store_contexts:
            self._store_contexts[key] = self._inner.get_external_store_context(command_info)
        return self._store_contexts[key]

    def get_info(self) -> Info:
        return self._inner.get_info()

    def get_thread_id(self) -> int | None:
        return self._inner.get_thread_id()


def _command_key(command_info: CommandInfo | None) -> tuple[int, int] | None:
    return None if command_info is None else (command_info.command_type, command_info.command_seq)
