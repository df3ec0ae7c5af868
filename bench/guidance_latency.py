"""Runtime guidance latency at each injection point of docs/SPEC.md.

- during_tool_interrupted: from `guide` called (interrupting guidance) to the running
  bash command's process group gone; and to the next model request carrying it. Also
  with the call in another worker process than the run's steps (one that runs only its
  host's tool calls): the cancel nudge goes through the store then.
- after_tool: from the running tool's end to the next model request carrying the
  (supplementary) guidance sent while it ran.
- before_tools / before_finish: guidance sent while the model call is held; from the
  reply's release to the next model request (tools skipped / one more turn).

    python bench/guidance_latency.py [--runs 10]

Last line: `guidance_latency: X ms` (median, guide to tool killed, during a tool call).
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


async def wait_for(check: Callable[[], Any], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.002)


def received(bench: Bench, session_id: str, index: int) -> float:
    return bench.model.requests_for(session_id)[index].received_at


async def start(bench: Bench, steps: list[dict[str, Any]], host: str | None = None) -> str:
    workspace = bench.home / "elsewhere" / uuid.uuid4().hex if host else None
    session = await bench.client.sessions.create(host=host, workspace=workspace)
    bench.model.add_steps(session.id, steps, replace=True)
    await bench.client.runs.prompt(session.id, "work")
    return session.id


async def guide(bench: Bench, session_id: str, text: str, intent: str) -> None:
    item = await bench.client.inputs.next_turn(session_id, text)
    await bench.client.inputs.guide(session_id, item.id, intent=intent)  # type: ignore[arg-type]


async def finished(bench: Bench, session_id: str) -> None:
    await wait_for(
        lambda: (r := bench.client.sync.runs.list(session_id)) and r[0].status != "running"
    )


async def interrupted(bench: Bench, host: str | None = None) -> tuple[float, float]:
    command = "echo $$ > pid.txt; sleep 60"
    session = await start(
        bench,
        [
            {"reply": [{"tool_use": {"name": "bash", "input": {"command": command}}}]},
            {"reply": [{"text": "ok"}]},
        ],
        host,
    )
    pid = Path((await bench.client.sessions.get(session)).workspace) / "pid.txt"
    await wait_for(lambda: pid.exists() and pid.read_text().strip())
    pgid = int(pid.read_text())
    await asyncio.sleep(0.2)
    began = time.time()
    await guide(bench, session, "stop, do it differently", "interrupt")
    await wait_for(lambda: not process_group_alive(pgid))
    killed = time.time()
    await wait_for(lambda: len(bench.model.requests_for(session)) == 2)
    await finished(bench, session)
    return (killed - began) * 1000, (received(bench, session, 1) - began) * 1000


async def after_tool(bench: Bench) -> float:
    session = await start(
        bench,
        [
            {"reply": [{"tool_use": {"name": "bash", "input": {"command": "sleep 0.4"}}}]},
            {"reply": [{"text": "ok"}]},
        ],
    )
    await wait_for(lambda: len(bench.model.requests_for(session)) == 1)
    await asyncio.sleep(0.1)
    await guide(bench, session, "also add a note", "supplement")
    await wait_for(lambda: len(bench.model.requests_for(session)) == 2)
    await finished(bench, session)
    ends = [
        e.created_at
        async for e in bench.client.events.stream(session, follow=False)
        if e.type == "tool_execution_end"
    ]
    return received(bench, session, 1) * 1000 - ends[0]


async def held(bench: Bench, reply: list[dict[str, Any]]) -> float:
    gate = f"gate-{time.time_ns()}"
    session = await start(bench, [{"wait_for": gate, "reply": reply}, {"reply": [{"text": "ok"}]}])
    await wait_for(lambda: len(bench.model.requests_for(session)) == 1)
    await guide(bench, session, "one more thing", "supplement")
    released = time.time()
    bench.model.release(gate)
    await wait_for(lambda: len(bench.model.requests_for(session)) == 2)
    await finished(bench, session)
    return (received(bench, session, 1) - released) * 1000


def line(name: str, values: list[float]) -> str:
    return f"{name:<48} median {median(values):7.1f} ms   p95 {p95(values):7.1f} ms"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    async with bench_stack({"conversations": {}}) as bench:
        host = spawn_tool_host(bench)
        try:
            worker = build_worker(bench.client.temporal, bench.client.db, bench.settings)
            async with worker:
                await interrupted(bench)  # warm-up
                kills, injected = zip(
                    *[await interrupted(bench) for _ in range(args.runs)], strict=True
                )
                after = [await after_tool(bench) for _ in range(args.runs)]
                tools = [
                    await held(bench, [{"tool_use": {"name": "ls", "input": {}}}])
                    for _ in range(args.runs)
                ]
                final = [await held(bench, [{"text": "done"}]) for _ in range(args.runs)]
                await worker_polling(bench, host, tool_host_queue(bench))
                await interrupted(bench, TOOL_HOST)  # warm-up
                far_kills, far_injected = zip(
                    *[await interrupted(bench, TOOL_HOST) for _ in range(args.runs)], strict=True
                )
        finally:
            kill(host)
    print(f"runs: {args.runs} per point")
    print(line("during_tool_interrupted: guide -> tool killed", list(kills)))
    print(line("during_tool_interrupted: guide -> in next request", list(injected)))
    print(line("  call in another process: guide -> tool killed", list(far_kills)))
    print(line("  call in another process: guide -> in next request", list(far_injected)))
    print(line("after_tool: tool end -> in next request", after))
    print(line("before_tools: reply released -> next request", tools))
    print(line("before_finish: reply released -> next request", final))
    print(f"guidance_latency: {median(list(kills)):.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
