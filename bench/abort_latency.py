"""Abort and steer latency.

Abort: from `cancel` sent to the running bash command's process group gone (polled every
millisecond). Calls heartbeat only for liveness (every third of the heartbeat timeout),
so an abort is fast only through the cancel nudge: measured with the call in the same
process as the run's workflow task (the in-process hint), and in another worker process
(one that runs only its host's tool calls: the hint goes through the store). Steer: with
a steer queued while the model call is in flight, from the moment that call's reply is
released to the next model request (carrying the steer) reaching the model server.

    python bench/abort_latency.py [--runs 15]

Last line: `abort_latency: X ms` (median).
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from pathlib import Path

from common import (
    TOOL_HOST,
    Bench,
    bench_stack,
    kill,
    median,
    p95,
    spawn_tool_host,
    tool_host_queue,
    worker_polling,
)

from duragent.activities.tools import process_group_alive
from duragent.worker import build_worker

SCRIPT = {
    "conversations": {
        "*": [
            {
                "reply": [
                    {
                        "tool_use": {
                            "name": "bash",
                            "input": {"command": "echo $$ > pid.txt; sleep 60"},
                        }
                    }
                ]
            },
            {"reply": [{"text": "unused"}]},
        ]
    }
}


async def wait_for(check: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.005)


async def one_abort(bench: Bench, host: str | None = None) -> float:
    """One abort of a running bash call (on `host`'s worker if given)."""
    workspace = bench.home / "elsewhere" / uuid.uuid4().hex if host else None
    session = await bench.client.sessions.create(host=host, workspace=workspace)
    pid_file = Path(session.workspace) / "pid.txt"
    run = await bench.client.runs.prompt(session.id, "run something long")
    await wait_for(lambda: pid_file.exists() and pid_file.read_text().strip())
    pgid = int(pid_file.read_text())
    await asyncio.sleep(0.2)  # the tool is running and heartbeating
    began = time.perf_counter()
    await run.workflow.cancel()
    while process_group_alive(pgid):
        await asyncio.sleep(0.001)
    gone = (time.perf_counter() - began) * 1000
    await run.result()
    return gone


async def one_steer(bench: Bench) -> float:
    session = await bench.client.sessions.create()
    gate = f"gate-{session.id}"
    bench.model.add_steps(
        session.id,
        [{"wait_for": gate, "reply": [{"text": "first"}]}, {"reply": [{"text": "second"}]}],
        replace=True,
    )
    run = await bench.client.runs.prompt(session.id, "answer, then listen")
    await wait_for(lambda: len(bench.model.requests_for(session.id)) == 1)
    await bench.client.inputs.steer(session.id, "one more thing")
    released = time.time()
    bench.model.release(gate)
    await wait_for(lambda: len(bench.model.requests_for(session.id)) == 2)
    await run.result()
    return (bench.model.requests_for(session.id)[1].received_at - released) * 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    async with bench_stack(SCRIPT) as bench:
        tools = spawn_tool_host(bench)
        try:
            worker = build_worker(bench.client.temporal, bench.client.db, bench.settings)
            async with worker:
                await one_abort(bench)  # warm-up
                aborts = [await one_abort(bench) for _ in range(args.runs)]
                steers = [await one_steer(bench) for _ in range(args.runs)]
                await worker_polling(bench, tools, tool_host_queue(bench))
                await one_abort(bench, TOOL_HOST)  # warm-up
                elsewhere = [await one_abort(bench, TOOL_HOST) for _ in range(args.runs)]
        finally:
            kill(tools)
    print(f"runs: {args.runs} each")
    print(
        f"abort latency, call in another worker process (cancel sent -> process group gone): "
        f"median {median(elsewhere):.1f} ms, p95 {p95(elsewhere):.1f} ms"
    )
    print(
        f"steer latency (reply done -> next request with the steer): "
        f"median {median(steers):.1f} ms, p95 {p95(steers):.1f} ms"
    )
    print(
        f"abort latency (cancel sent -> process group gone): "
        f"median {median(aborts):.1f} ms, p95 {p95(aborts):.1f} ms"
    )
    print(f"abort_latency: {median(aborts):.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
