"""A long horizon: 2,000 turns in one run, with compaction and continue-as-new.

The worker runs in its own process, as in production. Prints the per-turn time around
turns 10, 1,000 and 2,000, over the first and the last whole compaction cycle (the same
contexts early and late), the worker's peak memory, and the largest workflow history
(events and bytes) among the run's executions.

    python bench/long_horizon.py [--turns 2000]

Last line: `long_horizon: X ratio` (per-turn time at the last turn over turn 10).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
from typing import Any

from common import bench_stack, kill, median, spawn_worker

from duragent.domain.compaction import CompactionSettings


def script(turns: int) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [
        {"match": "You are compacting", "repeat": True, "reply": [{"text": "## Goal\nGo on."}]},
        {"match": "beginning of a turn", "repeat": True, "reply": [{"text": "Listing."}]},
    ]
    steps += [{"reply": [{"tool_use": {"name": "ls", "input": {}}}]} for _ in range(turns - 1)]
    steps.append({"reply": [{"text": "Done."}]})
    return {"conversations": {"*": steps}}


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def around(durations: list[float], turn: int, width: int = 5) -> float:
    low, high = max(0, turn - width - 1), min(len(durations), turn + width)
    return median(durations[low:high])


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args()
    async with bench_stack(script(args.turns)) as bench:
        worker = spawn_worker(bench)
        try:
            session = await bench.client.sessions.create()
            options = bench.client.runs.default_options().model_copy(
                update={
                    "compaction": CompactionSettings(
                        context_window=12_000, reserve_tokens=0, keep_recent_tokens=3_000
                    )
                }
            )
            run = await bench.client.runs.prompt(
                session.id, "list it again and again", options=options
            )
            result = await run.result()
            peak = peak_rss_mb(worker.pid)
        finally:
            kill(worker)
        starts: list[int] = []
        compacted: list[int] = []  # the turns (indexes into durations) that compacted
        async for e in bench.client.events.stream(session.id, follow=False):
            if e.type in ("turn_start", "agent_end"):
                starts.append(e.created_at)
            elif e.type == "compaction_start":
                compacted.append(len(starts) - 1)
        durations = [float(b - a) for a, b in itertools.pairwise(starts)]
        histories = []
        query = f"WorkflowId = 'session-{session.id}'"
        async for listed in bench.client.temporal.list_workflows(query):
            handle = bench.client.temporal.get_workflow_handle(listed.id, run_id=listed.run_id)
            history = (await handle.fetch_history()).events
            histories.append((len(history), sum(e.ByteSize() for e in history)))
    assert result.status == "completed", result.error
    last = len(durations)
    print(f"turns: {result.turns}, executions: {len(histories)}")
    for turn in (10, 1000, last):
        if turn <= last:
            print(f"per-turn time around turn {turn}: {around(durations, turn):.1f} ms")
    blocks = [durations[i : i + 250] for i in range(0, last, 250)]
    print("median per-turn time by 250 turns: " + ", ".join(f"{median(b):.0f}" for b in blocks))
    if len(compacted) >= 3:
        # Like with like: a whole cycle between two compactions, early and late, holds the
        # same contexts (turn 10's is a fifth of the last turn's), the compacting turns
        # themselves left out.
        early, late = (median(durations[a + 1 : b]) for a, b in (compacted[:2], compacted[-2:]))
        print(
            "median per-turn time, first and last whole compaction cycle: "
            f"{early:.1f}, {late:.1f} ms ({late / early:.2f})"
        )
    print(f"worker peak memory: {peak:.0f} MB")
    count, size = max(histories)
    print(f"largest history: {count} events, {size / 1024:.0f} KB")
    print(f"long_horizon: {around(durations, last) / around(durations, 10):.2f} ratio")


if __name__ == "__main__":
    asyncio.run(main())
