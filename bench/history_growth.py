"""Workflow history bytes per turn as the conversation's context keeps growing.

A 200-turn scripted run where every turn reads a ~2 KB file, so the context grows by
about 2 KB a turn (400 KB by the end). History should grow with each turn's new
content only: turn 200 should cost what turn 2 costs.

    python bench/history_growth.py [--turns 200] [--result-kb 2]

Last line: `history_growth: X ratio` (bytes of turn 200 / bytes of turn 2).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from common import bench_stack
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from duragent.worker import build_worker


def script(turns: int) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [
        {
            "reply": [
                {"text": f"Reading part {i % 10}."},
                {"tool_use": {"name": "read", "input": {"path": f"part{i % 10}.txt"}}},
            ]
        }
        for i in range(turns)
    ]
    steps.append({"reply": [{"text": "Read everything."}]})
    return {"conversations": {"*": steps}}


def turn_of(event: HistoryEvent, by_scheduled: dict[int, int]) -> int | None:
    """The turn an event belongs to, from the activity ids (`turn-N-...`)."""
    attrs = event.activity_task_scheduled_event_attributes
    if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        turn = int(attrs.activity_id.split("-")[1])
        by_scheduled[event.event_id] = turn
        return turn
    for name in (
        "activity_task_started_event_attributes",
        "activity_task_completed_event_attributes",
        "activity_task_failed_event_attributes",
    ):
        if event.HasField(name):
            return by_scheduled.get(getattr(event, name).scheduled_event_id)
    return None


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--result-kb", type=float, default=2.0)
    args = parser.parse_args()

    async with bench_stack(script(args.turns)) as bench:
        workspace = bench.home / "workspace"
        workspace.mkdir()
        line = "0123456789 abcdefghij klmnopqrst uvwxyz ABCDEFGHIJ\n"
        for part in range(10):
            (workspace / f"part{part}.txt").write_text(
                line * int(args.result_kb * 1024 / len(line))
            )
        session = await bench.client.sessions.create(workspace=workspace)
        async with build_worker(bench.client.temporal, bench.client.db, bench.settings):
            handle = await bench.client.runs.prompt(
                session.id, "Read all the parts, again and again."
            )
            result = await handle.result()
            history = await handle.workflow.fetch_history()
    assert result.status == "completed", result.error

    bytes_per_turn: dict[int, int] = {}
    events_per_turn: dict[int, int] = {}
    by_scheduled: dict[int, int] = {}
    current = 0
    for event in history.events:
        turn = turn_of(event, by_scheduled)
        current = turn if turn is not None else current
        # Workflow-task and marker events belong to the turn in progress.
        bytes_per_turn[current] = bytes_per_turn.get(current, 0) + event.ByteSize()
        events_per_turn[current] = events_per_turn.get(current, 0) + 1
    total = sum(bytes_per_turn.values())
    print(f"turns: {result.turns} ({args.turns} with a ~{args.result_kb:g} KB tool result each)")
    print(f"history: {len(history.events)} events, {total / 1024:.1f} KB in all")
    for turn in (1, 2, 10, 50, 100, 150, args.turns):
        if turn in bytes_per_turn:
            size, count = bytes_per_turn[turn], events_per_turn[turn]
            print(f"turn {turn:4d}: {size:6d} bytes, {count:3d} events")
    middle = [bytes_per_turn[t] for t in range(2, args.turns + 1)]
    middle_events = [events_per_turn[t] for t in range(2, args.turns + 1)]
    print(
        f"mean per turn (2..{args.turns}): {sum(middle) / len(middle):.0f} bytes,"
        f" {sum(middle_events) / len(middle_events):.1f} events"
    )
    print(f"history_growth: {bytes_per_turn[args.turns] / bytes_per_turn[2]:.2f} ratio")


if __name__ == "__main__":
    asyncio.run(main())
