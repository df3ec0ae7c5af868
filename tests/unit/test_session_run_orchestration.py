"""The agent loop's orchestration (`workflows.session_run.SessionRun`) with stand-in steps.

The workflow runs on a real Temporal server, but in memory and with no store, worker or
model: its activities are replaced by plain functions registered under the same names
(`domain.turns`), which play a scripted model and tools and record what the workflow
asked of them. What is checked is the loop's order of steps, not the steps themselves
(the integration tests run the real ones).

Temporal's time-skipping test server is a separate download; these tests need no
skipped time, so they run on `WorkflowEnvironment.start_local` with the `temporal`
binary the project already depends on.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from duragent.domain import save_points, tree_ops, turns
from duragent.domain.compaction import CompactionPlan, CompactionSettings
from duragent.domain.config import SnapshotRef
from duragent.domain.entries import CustomMessageEntry
from duragent.domain.events import RuntimeGuidanceInjected
from duragent.domain.guidance import GuidanceItem
from duragent.domain.hosts import host_task_queue
from duragent.domain.messages import AssistantMessage, ToolResultMessage, Usage, text_of, user_text
from duragent.domain.queues import QueuedMessage
from duragent.domain.runs import RunInput, RunOptions, RunResult, session_workflow_id
from duragent.domain.tools import ExecutionMode, ToolCallRef, ToolTraits
from duragent.domain.tree_ops import SAVE_TURN, SaveTurnInput
from duragent.temporal_dev import find_temporal_binary
from duragent.worker import workflow_runner
from duragent.workflows.session_run import SessionRun

pytestmark = pytest.mark.fast

SNAPSHOT = SnapshotRef(id="snap-1", model="claude-test", thinking_level="off")
WAIT_S = 20.0
"""The most any step of a test may take before it fails (a hang, not a slow machine)."""


def tool(call_id: str, execution: ExecutionMode = "parallel") -> ToolCallRef:
    return ToolCallRef(
        id=call_id, name="bash", args_preview="", traits=ToolTraits(execution=execution)
    )


def calls(*tools: ToolCallRef) -> turns.ModelReply:
    return turns.ModelReply(
        stop_reason="toolUse", usage=Usage(), text_preview="", tool_calls=list(tools)
    )


def answer(text: str) -> turns.ModelReply:
    return turns.ModelReply(stop_reason="stop", usage=Usage(), text_preview=text)


def queued(item_id: str) -> QueuedMessage:
    return QueuedMessage(id=item_id, message=user_text(item_id, timestamp=1))


class StandIns:
    """The workflow's activities: the model replies from a script, one reply per turn;
    tools wait for `release()` (heartbeating, so an abort reaches them) once `hold()`."""

    def __init__(self, *replies: turns.ModelReply) -> None:
        self.replies = replies
        self.model_inputs: list[turns.TurnInput] = []
        self.tool_inputs: list[turns.ToolCallInput] = []
        self.finished: list[turns.FinishRunInput] = []
        self.started: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.model_asked = asyncio.Event()
        self._held = False
        self._released = asyncio.Event()

    def hold(self) -> None:
        self._held = True

    def release(self) -> None:
        self._released.set()

    async def tool_started(self, call_id: str) -> None:
        await asyncio.wait_for(self.started[call_id].wait(), WAIT_S)

    def activities(self) -> list[Callable[..., Any]]:
        return [
            self.start_run,
            self.take_turn,
            self.model_turn,
            self.run_tool,
            self.finish_run,
            self.record_events,
            self.take_guidance,
            self.save_turn,
        ]

    @activity.defn(name=turns.START_RUN)
    async def start_run(self, data: turns.StartRunInput) -> turns.StartRunResult:
        return turns.StartRunResult(leaf_id="root", snapshot=SNAPSHOT)

    @activity.defn(name=turns.MODEL_TURN)
    async def model_turn(self, data: turns.TurnInput) -> turns.ModelReply:
        self.model_inputs.append(data)
        self.model_asked.set()
        return self.replies[data.turn - 1]

    @activity.defn(name=turns.TAKE_TURN)
    async def take_turn(self, data: turns.TurnInput) -> turns.TurnResult:
        """The turn's activity leaving its calls to the workflow, as a turn whose calls
        wait for an approval does: the workflow's own batching is what is checked here."""
        return turns.TurnResult(reply=await self.model_turn(data))

    @activity.defn(name=turns.RUN_TOOL)
    async def run_tool(self, data: turns.ToolCallInput) -> turns.ToolCallOutcome:
        self.tool_inputs.append(data)
        self.started[data.call.id].set()
        while self._held and not self._released.is_set():
            activity.heartbeat()
            with _quiet_timeout():
                await asyncio.wait_for(self._released.wait(), 0.1)
        return turns.ToolCallOutcome(is_error=False, preview="ok", content_chars=2, duration_ms=1)

    @activity.defn(name=turns.FINISH_RUN)
    async def finish_run(self, data: turns.FinishRunInput) -> turns.FinishRunResult:
        self.finished.append(data)
        return turns.FinishRunResult(leaf_id="leaf", final_text="")

    @activity.defn(name=turns.RECORD_EVENTS)
    async def record_events(self, data: turns.RecordEventsInput) -> None:
        return None

    @activity.defn(name=turns.TAKE_GUIDANCE)
    async def take_guidance(self, data: turns.TakeGuidanceInput) -> turns.TakeGuidanceResult:
        return turns.TakeGuidanceResult(taken=data.item_ids)

    @activity.defn(name=SAVE_TURN)
    async def save_turn(self, data: SaveTurnInput) -> str:
        return data.parent_id


class _quiet_timeout:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, *_: object) -> bool:
        return kind is TimeoutError


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await WorkflowEnvironment.start_local(
        data_converter=pydantic_data_converter,
        dev_server_existing_path=str(find_temporal_binary()),
        ui=False,
    )
    try:
        yield environment
    finally:
        await environment.shutdown()


@asynccontextmanager
async def running(
    env: WorkflowEnvironment,
    stand_ins: StandIns,
    options: RunOptions | None = None,
    task_timeout: timedelta | None = None,
) -> AsyncIterator[WorkflowHandle[SessionRun, RunResult]]:
    """A SessionRun started on its own task queue, with a worker of the stand-ins."""
    queue = f"orchestration-{uuid.uuid4().hex[:8]}"
    session_id = uuid.uuid4().hex
    # Cancellation reaches an activity with its next heartbeat: send them promptly.
    throttle = timedelta(milliseconds=50)
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[SessionRun],
        activities=stand_ins.activities(),
        workflow_runner=workflow_runner(strict=True),
        max_heartbeat_throttle_interval=throttle,
        default_heartbeat_throttle_interval=throttle,
    ):
        handle = await env.client.start_workflow(
            SessionRun.run,
            RunInput(
                session_id=session_id,
                run_id=uuid.uuid4().hex,
                prompt=[user_text("go", timestamp=1)],
                options=options or RunOptions(),
            ),
            id=session_workflow_id(session_id),
            task_queue=queue,
            execution_timeout=timedelta(seconds=60),
            task_timeout=task_timeout,
        )
        yield handle


async def result_of(handle: WorkflowHandle[SessionRun, RunResult]) -> RunResult:
    return await asyncio.wait_for(handle.result(), WAIT_S)


def fallbacks(
    commit: save_points.TurnCommit | None,
) -> Iterator[AssistantMessage | ToolResultMessage]:
    assert commit is not None
    for slot in commit.slots:
        if isinstance(slot.fallback, AssistantMessage | ToolResultMessage):
            yield slot.fallback


async def test_steering_waits_for_the_tools_and_a_follow_up_for_the_agent_to_stop(
    env: WorkflowEnvironment,
) -> None:
    stand_ins = StandIns(calls(tool("c1")), answer("noted"), answer("summary"))
    stand_ins.hold()
    async with running(env, stand_ins) as handle:
        await stand_ins.tool_started("c1")
        await handle.signal(SessionRun.steer, queued("s1"))
        await handle.signal(SessionRun.follow_up, queued("f1"))
        stand_ins.release()
        result = await result_of(handle)
    assert (result.status, result.turns) == ("completed", 3)
    assert [i.call.id for i in stand_ins.tool_inputs] == ["c1"]
    first, second, third = stand_ins.model_inputs
    assert first.commit is None
    assert second.commit is not None and third.commit is not None
    assert [s.entry_id for s in second.commit.slots] == [
        first.entry_id,
        stand_ins.tool_inputs[0].result_entry_id,
    ]
    assert second.commit.consumed == [save_points.QueueConsumption(entry_id="s1", queue="steering")]
    assert third.commit.consumed == [save_points.QueueConsumption(entry_id="f1", queue="follow_up")]
    (finished,) = stand_ins.finished
    assert finished.status == "completed" and not finished.commits[-1].continues


async def test_guidance_during_a_tool_skips_the_calls_after_it(env: WorkflowEnvironment) -> None:
    stand_ins = StandIns(
        calls(tool("a", "sequential"), tool("b", "sequential")), answer("adjusted")
    )
    stand_ins.hold()
    async with running(env, stand_ins) as handle:
        await stand_ins.tool_started("a")
        item = GuidanceItem(id="g1", text="also check the docs", intent="supplement")
        await handle.signal(SessionRun.guidance, item)
        stand_ins.release()
        result = await result_of(handle)
    assert (result.status, result.turns) == ("completed", 2)
    assert [i.call.id for i in stand_ins.tool_inputs] == ["a"]  # b never ran
    commit = stand_ins.model_inputs[1].commit
    (skipped,) = fallbacks(commit)
    assert isinstance(skipped, ToolResultMessage) and skipped.tool_call_id == "b"
    assert skipped.is_error and text_of(skipped.content).startswith("Not run: the user sent")
    assert commit is not None
    assert [e.id for e in commit.entries] == ["g1"]
    (event,) = commit.events
    assert isinstance(event, RuntimeGuidanceInjected)
    assert (event.point, event.item_ids, event.skipped) == ("after_tool", ["g1"], ["b"])


async def test_abort_mid_tools_saves_the_turn_as_aborted(env: WorkflowEnvironment) -> None:
    stand_ins = StandIns(calls(tool("a"), tool("b")), answer("never asked"))
    stand_ins.hold()
    async with running(env, stand_ins) as handle:
        await stand_ins.tool_started("a")
        await stand_ins.tool_started("b")
        await handle.signal(SessionRun.steer, queued("s1"))
        await handle.cancel()
        result = await result_of(handle)
    assert result.status == "aborted" and result.turns == 1
    assert result.cleared_steering == ["s1"]  # handed back, never delivered
    assert len(stand_ins.model_inputs) == 1
    (finished,) = stand_ins.finished
    assert finished.status == "aborted" and finished.leftover == []
    (commit,) = finished.commits
    assistant, *results = fallbacks(commit)
    assert isinstance(assistant, AssistantMessage) and assistant.stop_reason == "aborted"
    assert [r.tool_call_id for r in results if isinstance(r, ToolResultMessage)] == ["a", "b"]
    assert all(text_of(r.content) == "Aborted by the user before it finished." for r in results)
    (marker,) = commit.entries
    assert isinstance(marker, CustomMessageEntry) and marker.custom_type == "abort"


class CompactingStandIns(StandIns):
    """Stand-ins whose compaction commit takes long (a store that does not answer), and
    stores the summary even when the run is stopped meanwhile: a store's transaction
    under way ends whatever the workflow does."""

    def __init__(self, *replies: turns.ModelReply) -> None:
        super().__init__(*replies)
        self.committing = asyncio.Event()
        self.committed: list[str] = []

    def activities(self) -> list[Callable[..., Any]]:
        return [*super().activities(), self.plan, self.summarize, self.commit]

    @activity.defn(name=tree_ops.PLAN_COMPACTION)
    async def plan(self, data: tree_ops.PlanCompactionInput) -> tree_ops.PlanCompactionResult:
        plan = CompactionPlan(
            leaf_id=data.leaf_id or "root",
            first_kept_entry_id="k",
            summarized_ids=["s"],
            tokens_before=5000,
        )
        return tree_ops.PlanCompactionResult(plan=plan, model="claude-test")

    @activity.defn(name=tree_ops.SUMMARIZE)
    async def summarize(self, data: tree_ops.SummarizeInput) -> tree_ops.SummarizeResult:
        usage = Usage(input_tokens=4000, output_tokens=100)
        return tree_ops.SummarizeResult(summary_chars=10, preview="summary", usage=usage)

    @activity.defn(name=tree_ops.COMMIT_COMPACTION)
    async def commit(self, data: tree_ops.CommitCompactionInput) -> str:
        self.committing.set()
        try:
            await asyncio.sleep(WAIT_S)
        finally:
            self.committed.append(data.entry_id)
        return data.entry_id


async def test_a_run_stopped_while_its_compaction_commits_counts_the_summary(
    env: WorkflowEnvironment,
) -> None:
    """A stop reaches a run while its compaction's commit (a store step) is under way, and
    the commit stores the summary all the same: the run's end is told which compaction
    it was, to save below it and count its model call (the finish reads the store)."""
    big = calls(tool("c1")).model_copy(update={"usage": Usage(input_tokens=9000)})
    stand_ins = CompactingStandIns(big, answer("never"))
    window = CompactionSettings(context_window=8000, reserve_tokens=0, keep_recent_tokens=100)
    # A short workflow task timeout: the stop reaches the workflow while the store step
    # runs (it is told at the task's next heartbeat), not only after.
    async with running(
        env, stand_ins, RunOptions(compaction=window), task_timeout=timedelta(seconds=1)
    ) as handle:
        await asyncio.wait_for(stand_ins.committing.wait(), WAIT_S)
        await handle.cancel()
        result = await result_of(handle)
    assert result.status == "aborted"
    (finished,) = stand_ins.finished
    assert finished.usage == Usage(input_tokens=9000)  # the summary not counted by then
    assert stand_ins.committed == [finished.compaction_id]


class HostedStandIns(StandIns):
    """Stand-ins of a session on host `h`: the turn's activity goes to the host's queue,
    where no worker takes it (its worker was lost), and the calls, run as activities of
    their own, are taken there by a worker that came back."""

    @activity.defn(name=turns.START_RUN)
    async def start_run(self, data: turns.StartRunInput) -> turns.StartRunResult:
        return turns.StartRunResult(leaf_id="root", snapshot=SNAPSHOT, host="h")


async def test_calls_of_a_turn_whose_activity_was_not_taken_look_for_an_earlier_attempt(
    env: WorkflowEnvironment,
) -> None:
    """The turn's activity, not taken in time on the host's queue, may be a retry of an
    attempt a lost worker had begun, calls and all: the calls the workflow then runs
    itself go as rescheduled, so each finds what that attempt did instead of running
    again (a bash call ran twice in the soak)."""
    stand_ins = HostedStandIns(calls(tool("c1"), tool("c2")), answer("done"))
    queue = f"orchestration-{uuid.uuid4().hex[:8]}"
    session_id = uuid.uuid4().hex
    main = [a for a in stand_ins.activities() if a not in (stand_ins.run_tool, stand_ins.take_turn)]
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[SessionRun],
        activities=main,
        workflow_runner=workflow_runner(strict=True),
    ):
        handle = await env.client.start_workflow(
            SessionRun.run,
            RunInput(
                session_id=session_id,
                run_id=uuid.uuid4().hex,
                prompt=[user_text("go", timestamp=1)],
                options=RunOptions(host_check_s=2.0),
            ),
            id=session_workflow_id(session_id),
            task_queue=queue,
            execution_timeout=timedelta(seconds=60),
        )
        # No worker of the host takes the turn: the workflow asks the model itself.
        await asyncio.wait_for(stand_ins.model_asked.wait(), WAIT_S)
        # The host's worker is back before the calls' own activities are due.
        async with Worker(
            env.client, task_queue=host_task_queue(queue, "h"), activities=[stand_ins.run_tool]
        ):
            result = await result_of(handle)
    assert result.status == "completed", result.error
    assert sorted((i.call.id, i.rescheduled) for i in stand_ins.tool_inputs) == [
        ("c1", 1),
        ("c2", 1),
    ]
