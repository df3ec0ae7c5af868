"""Recovery: from a worker's death to its interrupted run making progress again.

A second worker is started and polling (as another worker of a deployment would be, or
a restarted one once it is up: a worker process takes seconds to import and start) when
the first one, running the session, is SIGKILLed during a model call and, separately,
during a tool call. Progress is the next model request reaching the model server: the
retried call, or the model told that the tool call was interrupted.

    python bench/recovery.py [--runs 5] [--heartbeat-timeout 10]

Last line: `recovery: X s` (median over both cases, from the kill). Target: at most the
heartbeat timeout (the settings' default unless given) plus one second; under 3 s with
`--heartbeat-timeout 2`.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import Bench, bench_stack, kill, median, spawn_worker, worker_polling

from duragent.settings import Settings


async def wait_for(check: Callable[[], Any], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.01)


async def one(bench: Bench, steps: list[dict[str, Any]], started: Callable[[str], bool]) -> float:
    session = bench.client.sessions.create()
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
    return progressed - began


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--heartbeat-timeout",
        type=float,
        default=Settings.model_fields["heartbeat_timeout_s"].default,
    )
    args = parser.parse_args()
    async with bench_stack({"conversations": {}}) as bench:
        bench.settings = bench.settings.model_copy(
            update={"heartbeat_timeout_s": args.heartbeat_timeout}
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
            workspace = Path(bench.client.sessions.get(session_id).workspace)
            return (workspace / "started").exists()

        model = [await one(bench, model_steps, model_called) for _ in range(args.runs)]
        tool = [await one(bench, tool_steps, tool_running) for _ in range(args.runs)]
    print(f"heartbeat timeout: {args.heartbeat_timeout:g} s; {args.runs} crashes per case")
    print(f"crash during a model call: median {median(model):.2f} s (max {max(model):.2f})")
    print(f"crash during a tool call:  median {median(tool):.2f} s (max {max(tool):.2f})")
    print(f"recovery: {median(model + tool):.2f} s")


if __name__ == "__main__":
    asyncio.run(main())
