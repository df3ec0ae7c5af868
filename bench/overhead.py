"""Orchestration overhead per turn: duragent vs a plain in-process asyncio loop.

The same scripted 20-turn conversation (one `read` call per turn, the offline model's
latency fixed) runs through duragent (workflow, activities, store) and through a plain
loop that calls the same model server with the same SDK and runs the same tools, side
by side, alternating, several rounds. Per-turn time is the median turn duration. A third
column runs duragent with tracing on (client, worker and model client tracing, spans
exported in batches over OTLP/HTTP to a receiver in another process) in the same rounds,
on a task queue of its own (`tracing_column.py`). A fourth, `bare Temporal`, is the
plain loop's work cut into the same two activities per turn with nothing else
(`temporal_floor.py`): what Temporal's round trips alone cost per turn here. A fifth,
`one-activity floor`, is that work with a turn as one activity (model call and tool
calls together): the floor of a turn that is one activity.

    python bench/overhead.py [--rounds 5] [--turns 20] [--latency-ms 50]

Last line: `overhead: X ms/turn` (duragent median minus plain median, tracing off).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
import uuid
from pathlib import Path
from typing import Any

from common import Bench, bench_stack, median
from temporal_floor import bare_temporal, floor_run
from tracing_column import traced_duragent

from duragent.activities.models.seam import ModelRequest
from duragent.activities.tools import ToolContext, ToolRegistry, default_tools
from duragent.domain.config import SessionConfig, TurnSnapshot
from duragent.domain.messages import AgentMessage, user_text
from duragent.domain.transcript import llm_transcript
from duragent.worker import build_worker, model_clients


def script(turns: int, latency_ms: int) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [
        {
            "delay_ms": latency_ms,
            "reply": [
                {"text": f"Step {i}: reading the notes."},
                {"tool_use": {"name": "read", "input": {"path": "notes.txt"}}},
            ],
        }
        for i in range(turns)
    ]
    steps.append({"delay_ms": latency_ms, "reply": [{"text": "Finished."}]})
    return {"conversations": {"*": steps}}


async def plain_loop(bench: Bench, workspace: Path, turns: int) -> list[float]:
    """The baseline: the agent loop with nothing durable about it."""
    clients = model_clients(bench.settings)
    client = clients.for_model(bench.settings.model)
    tools = ToolRegistry(default_tools())
    config = SessionConfig(model=bench.settings.model)
    snapshot = TurnSnapshot(
        model=config.model,
        thinking_level="off",
        system_prompt=config.system_prompt,
        active_tools=None,
        max_tokens=config.max_tokens,
    )
    key = uuid.uuid4().hex
    messages: list[AgentMessage] = [user_text("Read the notes, many times.", 0)]
    durations: list[float] = []
    for _ in range(turns + 1):
        began = time.perf_counter()
        request = ModelRequest(snapshot, llm_transcript(messages), tools.api_specs(None), key, 0)
        reply = await client.ask(request).reply(lambda _: None)
        messages.append(reply)
        for call in reply.tool_calls:
            result = await tools.run(call.name, call.arguments, ToolContext(workspace))
            messages.append(result.to_message(call.id, call.name, 0))
        durations.append((time.perf_counter() - began) * 1000)
    await clients.aclose()
    return durations


async def duragent_run(bench: Bench, workspace: Path) -> list[float]:
    session = bench.client.sessions.create(workspace=workspace)
    handle = await bench.client.runs.prompt(session.id, "Read the notes, many times.")
    await handle.result()
    starts = [
        e.created_at
        async for e in bench.client.events.stream(session.id, follow=False)
        if e.type in ("turn_start", "agent_end")
    ]
    return [float(b - a) for a, b in itertools.pairwise(starts)]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--latency-ms", type=int, default=50)
    args = parser.parse_args()

    async with bench_stack(script(args.turns, args.latency_ms)) as bench:
        workspace = bench.home / "workspace"
        workspace.mkdir()
        (workspace / "notes.txt").write_text("notes\n" * 50)
        worker = build_worker(bench.client.temporal, bench.client.db, bench.settings)
        async with worker, traced_duragent(bench) as traced_bench, bare_temporal(bench) as floor:
            await duragent_run(bench, workspace)  # warm-up: caches, sandbox, connections
            await duragent_run(traced_bench, workspace)
            await plain_loop(bench, workspace, args.turns)
            await floor_run(floor, bench, workspace, args.turns)
            await floor_run(floor, bench, workspace, args.turns, one_activity=True)
            ours: list[float] = []
            traced: list[float] = []
            plain: list[float] = []
            bare: list[float] = []
            single: list[float] = []
            for round_no in range(args.rounds):
                d = await duragent_run(bench, workspace)
                t = await duragent_run(traced_bench, workspace)
                p = await plain_loop(bench, workspace, args.turns)
                b = await floor_run(floor, bench, workspace, args.turns)
                o = await floor_run(floor, bench, workspace, args.turns, one_activity=True)
                ours += d
                traced += t
                plain += p
                bare += b
                single += o
                print(
                    f"round {round_no + 1}: duragent {median(d):.1f} ms/turn,"
                    f" plain {median(p):.1f} ms/turn, bare Temporal {median(b):.1f} ms/turn"
                )
                print(
                    f"round {round_no + 1}: duragent with tracing {median(t):.1f} ms/turn,"
                    f" one-activity floor {median(o):.1f} ms/turn"
                )
    ours_ms, plain_ms = median(ours), median(plain)
    print(f"model latency fixed at {args.latency_ms} ms; {args.turns} tool turns + 1 final turn")
    print(f"duragent: {ours_ms:.1f} ms/turn (median of {len(ours)} turns)")
    traced_ms = median(traced)
    print(f"duragent with tracing: {traced_ms:.1f} ms/turn (median of {len(traced)} turns)")
    print(f"tracing adds: {traced_ms - ours_ms:.1f} ms/turn")
    print(f"plain asyncio loop: {plain_ms:.1f} ms/turn (median of {len(plain)} turns)")
    bare_ms = median(bare)
    print(f"bare Temporal (two activities a turn, nothing else): {bare_ms:.1f} ms/turn")
    print(f"Temporal's floor: {bare_ms - plain_ms:.1f} ms/turn over the plain loop")
    single_ms = median(single)
    print(f"one-activity floor (a turn is one activity, nothing else): {single_ms:.1f} ms/turn")
    print(f"duragent over bare Temporal: {ours_ms - bare_ms:.1f} ms/turn")
    print(f"ratio: {ours_ms / plain_ms:.2f}x")
    print(f"overhead: {ours_ms - plain_ms:.1f} ms/turn")


if __name__ == "__main__":
    asyncio.run(main())
