"""`duragent move`: a session's workspace copied from its host to another, then the new
host recorded, as a workflow under the session's id (so it never overlaps a run).

The source host's worker packs the workspace into the store; the target host's worker
unpacks it (`activities.hosts`). Each must take its part within `start_within_s`, or its
host counts as not up and the move ends with nothing changed.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from duragent.domain.fallbacks import root_message
    from duragent.domain.hosts import (
        DROP_TRANSFER,
        MOVE_ERROR,
        PACK_WORKSPACE,
        RECORD_HOST,
        UNPACK_WORKSPACE,
        MoveInput,
        MoveResult,
        PackWorkspaceInput,
        PackWorkspaceResult,
        RecordHostInput,
        UnpackWorkspaceInput,
        host_task_queue,
    )

from duragent.workflows import steps


async def _store_step(name: str, data: object) -> None:
    await workflow.execute_local_activity(
        name,
        data,
        start_to_close_timeout=timedelta(seconds=30),
        retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=20),
    )


@workflow.defn(name="SessionMove")
class SessionMove:
    @workflow.run
    async def run(self, move: MoveInput) -> MoveResult:
        result = MoveResult(
            session_id=move.session_id, host=move.target, workspace=move.target_workspace
        )
        if move.copy_files and move.source is not None:
            copied = await self._copy(move)
            result = result.model_copy(
                update={"copied_files": copied.files, "copied_bytes": copied.bytes}
            )
        await _store_step(
            RECORD_HOST,
            RecordHostInput(
                session_id=move.session_id, host=move.target, workspace=move.target_workspace
            ),
        )
        return result

    async def _copy(self, move: MoveInput) -> PackWorkspaceResult:
        assert move.source is not None
        queue = workflow.info().task_queue
        source, target = host_task_queue(queue, move.source), host_task_queue(queue, move.target)
        await _host_up(target, move.target, move.start_within_s)
        transfer = workflow.uuid4().hex
        try:
            await _on_host(
                PACK_WORKSPACE,
                PackWorkspaceInput(transfer_id=transfer, workspace=move.workspace),
                source,
                move.source,
                move.start_within_s,
            )
            return await _on_host(
                UNPACK_WORKSPACE,
                UnpackWorkspaceInput(transfer_id=transfer, workspace=move.target_workspace),
                target,
                move.target,
                move.start_within_s,
            )
        except ApplicationError:
            await _store_step(DROP_TRANSFER, transfer)
            raise


async def _host_up(queue: str, host: str, start_within_s: float) -> None:
    try:
        await steps.host_ready(queue, f"ready-{host}", start_within_s)
    except ActivityError as err:
        raise _failure(err, host, start_within_s) from None


async def _on_host(
    name: str,
    data: PackWorkspaceInput | UnpackWorkspaceInput,
    queue: str,
    host: str,
    start_within_s: float,
) -> PackWorkspaceResult:
    try:
        result = await workflow.execute_activity(
            name,
            data,
            task_queue=queue,
            result_type=PackWorkspaceResult,
            schedule_to_start_timeout=timedelta(seconds=start_within_s),
            start_to_close_timeout=timedelta(minutes=30),
            heartbeat_timeout=timedelta(minutes=2),
            retry_policy=RetryPolicy(maximum_attempts=3),
        )
    except ActivityError as err:
        raise _failure(err, host, start_within_s) from None
    assert isinstance(result, PackWorkspaceResult)
    return result


def _failure(err: ActivityError, host: str, start_within_s: float) -> ApplicationError:
    """What stopped the move, as the workflow's (non-retryable) failure."""
    if steps.not_taken(err):
        message = (
            f"host {host!r} is not up: no worker of it answered within {start_within_s:g} s. "
            "Start its worker and move again, or move with --no-copy if its files are gone "
            "or on storage every host shares"
        )
    else:
        message = root_message(err)
    return ApplicationError(message, type=MOVE_ERROR, non_retryable=True)
