"""The `bare Temporal` column of bench/overhead.py: what Temporal alone costs per turn.

The plain loop's turn (the same model call through the same SDK, the same `read` tool)
split into the two activities a duragent turn has, with nothing else: a workflow that
calls a model activity on its own task queue (started eagerly, as duragent's is) and then
a tool activity on a second queue served by a second worker in the process (as a host's
tool calls are), keeping the conversation in the worker's memory. No store, no events,
no heartbeats, no sandbox. Its per-turn time minus the plain loop's is the floor that
Temporal's round trips (two workflow tasks, two activities, one dispatch to another
queue) put under any harness built this way, on this machine and dev server.

`floor_run(..., one_activity=True)` is the same work with a turn as one activity (the
model call and its tool calls together, on the tools' queue, as a host's worker would run
them): one workflow task and one activity a turn, the floor of a harness whose turn is an
activity.

A run asks the bench's model unless given another (`floor_run(..., model=...)`: the
offline model's other wires, `offline_model.WIRE_MODELS`), through the same seam.
"""

from __future__ import annotations

import contextlib
import itertools
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from common import Bench
from temporalio import activity, workflow
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from duragent.activities.models.seam import ModelRequest
from duragent.activities.tools import ToolContext, ToolRegistry, default_tools
from duragent.domain.config import SessionConfig, TurnSnapshot
from duragent.domain.messages import AgentMessage, AssistantMessage, user_text
from duragent.domain.transcript import llm_transcript
from duragent.worker import model_clients


@dataclass
class FloorRun:
    run_id: str
    workspace: str
    turns: int
    model: str
    """The model the run asks ("provider:model")."""


@workflow.defn(name="FloorTurns", sandboxed=False)
class FloorTurns:
    @workflow.run
    async def run(self, data: FloorRun) -> None:
        tool_queue = f"{workflow.info().task_queue}-tools"
        for _ in range(data.turns + 1):
            calls = await workflow.execute_activity(
                "floor_model", data, result_type=int, start_to_close_timeout=timedelta(seconds=60)
            )
            for _ in range(calls):
                await workflow.execute_activity(
                    "floor_tool",
                    data,
                    task_queue=tool_queue,
                    start_to_close_timeout=timedelta(seconds=60),
                )


@workflow.defn(name="FloorOneActivityTurns", sandboxed=False)
class FloorOneActivityTurns:
    @workflow.run
    async def run(self, data: FloorRun) -> None:
        tool_queue = f"{workflow.info().task_queue}-tools"
        while await workflow.execute_activity(
            "floor_turn",
            data,
            result_type=int,
            task_queue=tool_queue,
            start_to_close_timeout=timedelta(seconds=60),
        ):
            pass  # the model called tools: another turn


class FloorActivities:
    """The plain loop's work, cut at the two activities' boundaries."""

    def __init__(self, bench: Bench, queue: str) -> None:
        self.queue = queue
        self._clients = model_clients(bench.settings)
        self._tools = ToolRegistry(default_tools())
        self._messages: dict[str, list[AgentMessage]] = {}
        self.turn_starts: dict[str, list[float]] = {}

    @activity.defn(name="floor_model")
    async def floor_model(self, data: FloorRun) -> int:
        self.turn_starts.setdefault(data.run_id, []).append(time.perf_counter())
        messages = self._messages.setdefault(
            data.run_id, [user_text("Read the notes, many times.", 0)]
        )
        request = ModelRequest(
            snapshot(data.model),
            llm_transcript(messages),
            self._tools.api_specs(None),
            data.run_id,
            0,
        )
        reply = await self._clients.for_model(data.model).ask(request).reply(lambda _: None)
        messages.append(reply)
        return len(reply.tool_calls)

    @activity.defn(name="floor_tool")
    async def floor_tool(self, data: FloorRun) -> None:
        await self._run_calls(data)

    @activity.defn(name="floor_turn")
    async def floor_turn(self, data: FloorRun) -> int:
        """A whole turn: the model call, then the tool calls it asked for."""
        calls = await self.floor_model(data)
        await self._run_calls(data)
        return calls

    async def _run_calls(self, data: FloorRun) -> None:
        """The tool calls of the run's last reply, their results appended."""
        messages = self._messages[data.run_id]
        reply = messages[-1]
        assert isinstance(reply, AssistantMessage)
        for call in reply.tool_calls:
            context = ToolContext(Path(data.workspace))
            result = await self._tools.run(call.name, call.arguments, context)
            messages.append(result.to_message(call.id, call.name, 0))

    async def close(self) -> None:
        await self._clients.aclose()


def snapshot(model: str) -> TurnSnapshot:
    """A turn of a new session on `model`, thinking off (as the benches' sessions are)."""
    config = SessionConfig(model=model)
    return TurnSnapshot(
        model=config.model,
        thinking_level="off",
        system_prompt=config.system_prompt,
        active_tools=None,
        max_tokens=config.max_tokens,
    )


@contextlib.asynccontextmanager
async def bare_temporal(bench: Bench) -> AsyncIterator[FloorActivities]:
    """The two workers of the floor column, on task queues of their own."""
    queue = f"floor-{uuid.uuid4().hex[:8]}"
    work = FloorActivities(bench, queue)
    client = bench.client.temporal
    # As many calls at once as duragent's worker takes (DURAGENT_WORKER_MAX_ACTIVITIES).
    calls = bench.settings.worker_max_activities
    turns = Worker(
        client,
        task_queue=queue,
        workflows=[FloorTurns, FloorOneActivityTurns],
        activities=[work.floor_model],
        workflow_runner=UnsandboxedWorkflowRunner(),
        max_concurrent_activities=calls,
    )
    tools = Worker(
        client,
        task_queue=f"{queue}-tools",
        activities=[work.floor_tool, work.floor_turn],
        max_concurrent_activities=calls,
    )
    async with turns, tools:
        yield work
    await work.close()


async def floor_run(
    work: FloorActivities,
    bench: Bench,
    workspace: Path,
    turns: int,
    *,
    one_activity: bool = False,
    model: str | None = None,
) -> list[float]:
    """One run's per-turn durations (ms), from one model call's start to the next; with
    `one_activity`, a turn is one activity (`FloorOneActivityTurns`). It asks `model`
    (default: the bench's)."""
    data = FloorRun(
        run_id=uuid.uuid4().hex,
        workspace=str(workspace),
        turns=turns,
        model=model or bench.settings.model,
    )
    await bench.client.temporal.execute_workflow(
        "FloorOneActivityTurns" if one_activity else "FloorTurns",
        data,
        id=f"floor-{data.run_id}",
        task_queue=work.queue,
    )
    starts = work.turn_starts.pop(data.run_id)
    return [(b - a) * 1000 for a, b in itertools.pairwise(starts)]
