"""Approval latency: from the approval sent to the approved tool's process started.

Each run's bash call waits for approval (the session's policy asks for every call); once
the run reports it waiting, the client sends the approval (the `decide_approval` update)
and the command's first act is to write the wall-clock time it started. The worker runs in
a process of its own, as it would in production.

    python bench/approval_latency.py [--runs 15]

Last line: `approval_latency: X ms` (median). Target: under 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from common import Bench, bench_stack, kill, median, p95, spawn_worker

from duragent.domain.approvals import ApprovalPolicy

SCRIPT = {
    "conversations": {
        "*": [
            {
                "reply": [
                    {
                        "tool_use": {
                            "name": "bash",
                            "input": {"command": "date +%s.%N > started.txt"},
                        }
                    }
                ]
            },
            {"reply": [{"text": "done"}]},
        ]
    }
}
ASK_ALL = ApprovalPolicy(default="ask")


async def wait_for(check: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.01)


async def one_approval(bench: Bench) -> float:
    session = await bench.client.sessions.create()
    await bench.client.approvals.set_policy(session.id, ASK_ALL)
    run = await bench.client.runs.prompt(session.id, "write the time")

    async def waiting() -> bool:
        return bool(await bench.client.approvals.pending(session.id))

    await wait_for(waiting)
    [pending] = await bench.client.approvals.pending(session.id)
    sent = time.time()
    await bench.client.approvals.approve(session.id, pending.call_id)
    result = await run.result()
    assert result.status == "completed", result.error
    started = float((Path(session.workspace) / "started.txt").read_text())
    return (started - sent) * 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    async with bench_stack(SCRIPT) as bench:
        worker = spawn_worker(bench)
        try:
            await one_approval(bench)  # warm-up
            latencies = [await one_approval(bench) for _ in range(args.runs)]
        finally:
            kill(worker)
    print(f"runs: {args.runs}")
    print(
        f"approval latency (approve sent -> tool process started): "
        f"median {median(latencies):.1f} ms, p95 {p95(latencies):.1f} ms"
    )
    print(f"approval_latency: {median(latencies):.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
