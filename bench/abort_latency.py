"""Abort and steer latency.

Abort: from `cancel` sent to the running bash command's process group gone (polled every
millisecond). Steer: with a steer queued while the model call is in flight, from the
moment that call's reply is released to the next model request (carrying the steer)
reaching the model server. Aborts are measured again with `--busy` other calls running
on the worker (each a `sleep 60`): their heartbeats are paced apart then (about
busy / DURAGENT_HEARTBEAT_RATE seconds), and the abort must not wait for them.

    python bench/abort_latency.py [--runs 15] [--busy 50]

Last line: `abort_latency: X ms` (median).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from common import Bench, bench_stack, median, p95

from duragent.activities.heartbeat import PACE
from duragent.activities.tools import process_group_alive
from duragent.client.run_control import RunHandle
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


async def one_abort(bench: Bench) -> float:
    session = bench.client.sessions.create()
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


async def busy_calls(bench: Bench, count: int) -> list[RunHandle]:
    """`count` sessions whose bash call runs until cancelled; their run handles."""
    sessions = [bench.client.sessions.create() for _ in range(count)]
    runs = [await bench.client.runs.prompt(s.id, "run something long") for s in sessions]
    pid_files = [Path(s.workspace) / "pid.txt" for s in sessions]
    await wait_for(lambda: all(f.exists() and f.read_text().strip() for f in pid_files), 120)
    return runs


async def one_steer(bench: Bench) -> float:
    session = bench.client.sessions.create()
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
    parser.add_argument("--busy", type=int, default=50, help="other calls running meanwhile")
    args = parser.parse_args()
    async with bench_stack(SCRIPT) as bench:
        worker = build_worker(bench.client.temporal, bench.client.db, bench.settings)
        async with worker:
            await one_abort(bench)  # warm-up
            aborts = [await one_abort(bench) for _ in range(args.runs)]
            steers = [await one_steer(bench) for _ in range(args.runs)]
            busy = await busy_calls(bench, args.busy)
            paced_ms = PACE.interval(bench.settings.heartbeat_timeout_s) * 1000
            busy_aborts = [await one_abort(bench) for _ in range(args.runs)]
            for run in busy:
                await run.workflow.cancel()
    print(f"runs: {args.runs} each")
    print(
        f"abort latency with {args.busy} other calls running (heartbeats {paced_ms:.0f} ms"
        f" apart): median {median(busy_aborts):.1f} ms, p95 {p95(busy_aborts):.1f} ms"
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
