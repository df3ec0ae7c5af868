"""Many sessions at once on one worker: throughput against the ideal, memory, CPU per call.

K sessions run at once on one worker process, each a scripted conversation of `--turns`
tool turns (an `ls` each) and a final answer, every model call taking `--latency-ms`
before the offline model answers. The ideal is every session's calls back to back at
the model's latency, so the whole batch would take (turns + 1) x latency; throughput is
that ideal as a percentage of the time the batch took, from the first run started to
the last one finished.

A fresh worker serves each K. Printed per K: throughput; the worker's peak memory, and
its memory per running session (peak above its settled size, over K) and per idle
session (what it still holds once the runs have ended, over K: an upper bound, as a
process does not hand all freed memory back); worker and Temporal server CPU time per
model call (from /proc); and the model calls retried (a worker taken for lost). Then the
same K as bare Temporal (`temporal_floor.py`: the same model calls and tools in two
activities a turn, nothing else, its workers in this process): the throughput Temporal's
round trips alone allow on this machine.

    python bench/concurrency.py [--sessions 200] [--also 10,50,100] [--turns 5]
                                [--latency-ms 1000]

Last line: `concurrency: X %` (throughput at K = --sessions). Target: at least 90 % at
K = 100, and 90 % at K = 200 as the goal.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import Bench, bench_stack, kill, spawn_worker, worker_polling
from temporal_floor import bare_temporal, floor_run

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def script(turns: int, latency_ms: int) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [
        {
            "delay_ms": latency_ms,
            "reply": [
                {"text": f"Step {i}: looking around."},
                {"tool_use": {"name": "ls", "input": {"path": "."}}},
            ],
        }
        for i in range(turns)
    ]
    steps.append({"delay_ms": latency_ms, "reply": [{"text": "Finished."}]})
    return {"conversations": {"*": steps}}


def cpu_ms(pid: int | None) -> float:
    """User plus system CPU time of a process so far, in milliseconds."""
    if pid is None:
        return float("nan")
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / CLOCK_TICKS


def rss_mb(pid: int) -> float:
    pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return pages * PAGE_KB / 1024


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class Figures:
    sessions: int
    wall_s: float
    ideal_s: float
    peak_mb: float
    running_kb: float
    idle_kb: float
    worker_ms_per_call: float
    server_ms_per_call: float
    retried: int
    failed: int

    @property
    def percent(self) -> float:
        return 100 * self.ideal_s / self.wall_s


async def batch(bench: Bench, sessions: int, turns: int, latency_ms: int) -> Figures:
    """K sessions at once on a fresh worker process."""
    worker = spawn_worker(bench)
    try:
        await worker_polling(bench, worker)
        warm = await bench.client.sessions.create()  # imports, sandbox, connections
        await (await bench.client.runs.prompt(warm.id, "warm up")).result()
        ids = [(await bench.client.sessions.create()).id for _ in range(sessions)]
        await asyncio.sleep(0.5)
        settled = rss_mb(worker.pid)
        worker_cpu, server_cpu = cpu_ms(worker.pid), cpu_ms(bench.server_pid)
        began = time.monotonic()
        handles = await asyncio.gather(*(bench.client.runs.prompt(i, "look around") for i in ids))
        results = await asyncio.gather(*(h.result() for h in handles))
        wall = time.monotonic() - began
        worker_cpu, server_cpu = (
            cpu_ms(worker.pid) - worker_cpu,
            cpu_ms(bench.server_pid) - server_cpu,
        )
        peak = peak_rss_mb(worker.pid)
        await asyncio.sleep(0.5)
        idle = rss_mb(worker.pid)
    finally:
        kill(worker)
    calls = sessions * (turns + 1)
    requests = sum(len(bench.model.requests_for(i)) for i in ids)
    return Figures(
        sessions=sessions,
        wall_s=wall,
        ideal_s=(turns + 1) * latency_ms / 1000,
        peak_mb=peak,
        running_kb=(peak - settled) * 1024 / sessions,
        idle_kb=(idle - settled) * 1024 / sessions,
        worker_ms_per_call=worker_cpu / calls,
        server_ms_per_call=server_cpu / calls,
        retried=requests - calls,
        failed=sum(1 for r in results if r.status != "completed"),
    )


async def bare_batch(bench: Bench, sessions: int, turns: int) -> float:
    """K bare-Temporal runs at once; seconds from the first started to the last done."""
    workspace = bench.home / "bare"
    workspace.mkdir(exist_ok=True)
    async with bare_temporal(bench) as floor:
        await floor_run(floor, bench, workspace, turns)  # warm-up
        began = time.monotonic()
        await asyncio.gather(*(floor_run(floor, bench, workspace, turns) for _ in range(sessions)))
        return time.monotonic() - began


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--also", default="10,50,100", help="other K, comma-separated")
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--latency-ms", type=int, default=1000)
    args = parser.parse_args()
    also = [int(k) for k in args.also.split(",") if k.strip()]
    sizes = sorted({*also, args.sessions})

    figures: dict[int, Figures] = {}
    async with bench_stack(script(args.turns, args.latency_ms)) as bench:
        for k in sizes:
            f = figures[k] = await batch(bench, k, args.turns, args.latency_ms)
            print(
                f"K={k}: {f.percent:.0f} % of ideal ({f.wall_s:.1f} s for {f.ideal_s:g} s);"
                f" worker peak {f.peak_mb:.0f} MB, {f.running_kb:.0f} KB per running session,"
                f" {f.idle_kb:.0f} KB per idle one; CPU per model call: worker"
                f" {f.worker_ms_per_call:.1f} ms, Temporal server {f.server_ms_per_call:.1f} ms;"
                f" {f.retried} model calls retried, {f.failed} runs not completed"
            )
        for k in sizes:
            wall = await bare_batch(bench, k, args.turns)
            ideal = (args.turns + 1) * args.latency_ms / 1000
            print(f"bare Temporal K={k}: {100 * ideal / wall:.0f} % of ideal ({wall:.1f} s)")
    print(f"{args.turns} tool turns per session, model latency {args.latency_ms} ms, one worker")
    print(f"concurrency: {figures[args.sessions].percent:.0f} %")


if __name__ == "__main__":
    asyncio.run(main())
