"""Recovery: from a worker's death to its interrupted run making progress again.

A second worker is started and polling (as another worker of a deployment would be, or
a restarted one once it is up: a worker process takes seconds to import and start) when
the first one, running the session, is SIGKILLed during a model call and, separately,
during a tool call. Progress is the next model request reaching the model server: the
retried call, or the model told that the tool call was interrupted. The dead worker's
calls move on once its lease lapses (`activities.leases`, DURAGENT_WORKER_LEASE); with
`--lease 0`, once their heartbeat timeout runs out.

Also measured: the hand-off after the retried call ends (its completion to the next
workflow task starting), which would wait out the sticky queue's schedule-to-start
timeout if the run's tasks stayed on the dead worker's sticky queue.

    python bench/recovery.py [--runs 5] [--lease 1.5] [--heartbeat-timeout 60]

Last line: `recovery: X s` (median over both cases, from the kill). Target: under 3 s
with the defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import Bench, bench_stack, kill, median, spawn_worker, worker_polling
from temporalio.api.enums.v1 import EventType

from duragent.domain.runs import session_workflow_id
from duragent.settings import Settings

HANDOFFS: list[float] = []
"""Seconds from each retried call's end to the next workflow task's start."""


async def wait_for(check: Callable[[], Any], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.01)


async def one(bench: Bench, steps: list[dict[str, Any]], started: Callable[[str], bool]) -> float:
    session = await bench.client.sessions.create()
    bench.model.add_steps(session.id, steps, replace=True)
    first = spawn_worker(bench)
    run = await bench.client.runs.prompt(session.id, "work")
    await wait_for(lambda: started(session.id))
    second = spawn_worker(bench)
    await worker_polling(bench, second)
    await asyncio.sleep(0.3)  # well inside the call, heartbeats flowing
    seen = len(bench.model.requests_for(session.id))
    began = time.time()
    kill(first)
    await wait_for(lambda: len(bench.model.requests_for(session.id)) > seen)
    progressed = bench.model.requests_for(session.id)[seen].received_at
    await run.result()
    kill(second)
    HANDOFFS.append(await handoff(bench, session.id))
    return progressed - began


async def handoff(bench: Bench, session_id: str) -> float:
    """Seconds from the end of the call that was retried to the next workflow task."""
    handle = bench.client.temporal.get_workflow_handle(session_workflow_id(session_id))
    events = [e async for e in handle.fetch_history_events()]
    retried = next(
        i
        for i, e in enumerate(events)
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.attempt > 1
    )
    ended = next(
        e for e in events[retried:] if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    )
    task = next(
        e
        for e in events[retried:]
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
        and e.event_time.ToDatetime() >= ended.event_time.ToDatetime()
    )
    return (task.event_time.ToDatetime() - ended.event_time.ToDatetime()).total_seconds()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--lease", type=float, default=Settings.model_fields["worker_lease_s"].default
    )
    parser.add_argument(
        "--heartbeat-timeout",
        type=float,
        default=Settings.model_fields["heartbeat_timeout_s"].default,
    )
    args = parser.parse_args()
    async with bench_stack({"conversations": {}}) as bench:
        bench.settings = bench.settings.model_copy(
            update={"heartbeat_timeout_s": args.heartbeat_timeout, "worker_lease_s": args.lease}
        )
        bench.client.settings = bench.settings
        model_steps: list[dict[str, Any]] = [{"hang": True}, {"reply": [{"text": "back"}]}]
        tool_steps: list[dict[str, Any]] = [
            {
                "reply": [
                    {
                        "tool_use": {
                            "name": "bash",
                            "input": {"command": "echo go > started; sleep 60"},
                        }
                    }
                ]
            },
            {"reply": [{"text": "told"}]},
        ]

        def model_called(session_id: str) -> bool:
            return len(bench.model.requests_for(session_id)) == 1

        def tool_running(session_id: str) -> bool:
            workspace = Path(bench.client.sync.sessions.get(session_id).workspace)
            return (workspace / "started").exists()

        model = [await one(bench, model_steps, model_called) for _ in range(args.runs)]
        tool = [await one(bench, tool_steps, tool_running) for _ in range(args.runs)]
    print(
        f"lease: {args.lease:g} s, heartbeat timeout: {args.heartbeat_timeout:g} s; "
        f"{args.runs} crashes per case"
    )
    print(
        f"retried call's end -> next workflow task: median {median(HANDOFFS) * 1000:.0f} ms "
        f"(max {max(HANDOFFS) * 1000:.0f}; the sticky queue's timeout is 2 s)"
    )
    print(f"crash during a model call: median {median(model):.2f} s (max {max(model):.2f})")
    print(f"crash during a tool call:  median {median(tool):.2f} s (max {max(tool):.2f})")
    print(f"recovery: {median(model + tool):.2f} s")


if __name__ == "__main__":
    asyncio.run(main())
