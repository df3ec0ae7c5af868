"""Orchestration overhead per turn: duragent vs a plain in-process asyncio loop.

The same scripted 20-turn conversation (one `read` call per turn, the offline model's
latency fixed) runs through duragent (workflow, activities, store) and through a plain
loop that calls the same model server through the same model client and runs the same
tools, side by side, alternating, several rounds. Per-turn time is the median turn
duration. A third column runs duragent with tracing on (client, worker and model client
tracing, spans exported in batches over OTLP/HTTP to a receiver in another process) in the
same rounds, on a task queue of its own (`tracing_column.py`). A fourth, `bare Temporal`,
is the plain loop's work cut into the same two activities per turn with nothing else
(`temporal_floor.py`): what Temporal's round trips alone cost per turn here. A fifth,
`one-activity floor`, is that work with a turn as one activity (model call and tool
calls together): the floor of a turn that is one activity; duragent's turn over it is
the ratio to watch (target: at most 1.05x).

`--protocol` is the wire the model speaks (the offline model plays the same script on
each): `both` (the default) runs every column but tracing on Anthropic's Messages API and
on OpenAI's Chat Completions in the same rounds, and prints Chat Completions' per-turn
times over Anthropic's: the machine is shared and noisy, so the protocols are compared
only within one run. The tracing column runs on Anthropic's wire only (the OpenAI SDK
has no tracing of its own to turn on), when that wire is among those measured.

    python bench/overhead.py [--rounds 5] [--turns 20] [--latency-ms 50]
                             [--protocol both|anthropic|openai|openai-responses]

Last line: `overhead: X ms/turn` (duragent median minus plain median, tracing off, on the
first protocol measured: Anthropic's unless `--protocol` names another).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import Bench, bench_stack, median
from temporal_floor import FloorActivities, bare_temporal, floor_run, snapshot
from tracing_column import traced_duragent

from duragent.activities.models.seam import ModelRequest
from duragent.activities.tools import ToolContext, ToolRegistry, default_tools
from duragent.domain.messages import AgentMessage, user_text
from duragent.domain.transcript import llm_transcript
from duragent.offline_model import WIRE_MODELS
from duragent.worker import build_worker, model_clients

BOTH = ("anthropic", "openai")
"""`--protocol both`: Anthropic's Messages API and OpenAI's Chat Completions."""


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


async def plain_loop(bench: Bench, workspace: Path, turns: int, model: str) -> list[float]:
    """The baseline: the agent loop with nothing durable about it, asking `model`."""
    clients = model_clients(bench.settings)
    client = clients.for_model(model)
    tools = ToolRegistry(default_tools())
    turn = snapshot(model)
    key = uuid.uuid4().hex
    messages: list[AgentMessage] = [user_text("Read the notes, many times.", 0)]
    durations: list[float] = []
    for _ in range(turns + 1):
        began = time.perf_counter()
        request = ModelRequest(turn, llm_transcript(messages), tools.api_specs(None), key, 0)
        reply = await client.ask(request).reply(lambda _: None)
        messages.append(reply)
        for call in reply.tool_calls:
            result = await tools.run(call.name, call.arguments, ToolContext(workspace))
            messages.append(result.to_message(call.id, call.name, 0))
        durations.append((time.perf_counter() - began) * 1000)
    await clients.aclose()
    return durations


async def duragent_run(bench: Bench, workspace: Path, model: str) -> list[float]:
    session = await bench.client.sessions.create(workspace=workspace, model=model)
    handle = await bench.client.runs.prompt(session.id, "Read the notes, many times.")
    await handle.result()
    starts = [
        e.created_at
        async for e in bench.client.events.stream(session.id, follow=False)
        if e.type in ("turn_start", "agent_end")
    ]
    return [float(b - a) for a, b in itertools.pairwise(starts)]


@dataclass
class Columns:
    """One protocol's per-turn times (ms), every round's turns together."""

    protocol: str
    ours: list[float] = field(default_factory=list)
    plain: list[float] = field(default_factory=list)
    bare: list[float] = field(default_factory=list)
    single: list[float] = field(default_factory=list)

    @property
    def model(self) -> str:
        return WIRE_MODELS[self.protocol]


async def one_round(
    columns: Columns,
    bench: Bench,
    floor: FloorActivities,
    workspace: Path,
    turns: int,
    round_no: int | None,
) -> None:
    """Every column of one protocol, once; with `round_no`, kept and printed (else a
    warm-up: caches, the sandbox, connections)."""
    model = columns.model
    d = await duragent_run(bench, workspace, model)
    p = await plain_loop(bench, workspace, turns, model)
    b = await floor_run(floor, bench, workspace, turns, model=model)
    o = await floor_run(floor, bench, workspace, turns, one_activity=True, model=model)
    if round_no is None:
        return
    columns.ours += d
    columns.plain += p
    columns.bare += b
    columns.single += o
    print(
        f"round {round_no} {columns.protocol}: duragent {median(d):.1f} ms/turn,"
        f" plain {median(p):.1f}, bare Temporal {median(b):.1f},"
        f" one-activity floor {median(o):.1f}",
        flush=True,
    )


@contextlib.asynccontextmanager
async def tracing_column(bench: Bench, enabled: bool) -> AsyncIterator[Bench | None]:
    """The traced stack when `enabled`, else None."""
    if not enabled:
        yield None
        return
    async with traced_duragent(bench) as traced:
        yield traced


def summary(columns: Columns) -> None:
    ours, plain = median(columns.ours), median(columns.plain)
    bare, single = median(columns.bare), median(columns.single)
    print(f"{columns.protocol} ({columns.model}):")
    print(f"  duragent: {ours:.1f} ms/turn (median of {len(columns.ours)} turns)")
    print(f"  plain asyncio loop: {plain:.1f} ms/turn (median of {len(columns.plain)} turns)")
    print(f"  bare Temporal (two activities a turn, nothing else): {bare:.1f} ms/turn")
    print(f"  Temporal's floor: {bare - plain:.1f} ms/turn over the plain loop")
    print(f"  one-activity floor (a turn is one activity, nothing else): {single:.1f} ms/turn")
    print(f"  duragent over bare Temporal: {ours - bare:.1f} ms/turn")
    print(
        f"  duragent over the one-activity floor: {ours - single:.1f} ms/turn,"
        f" {ours / single:.3f}x (target: at most 1.05x)"
    )
    print(f"  ratio to the plain loop: {ours / plain:.2f}x")
    print(f"  overhead: {ours - plain:.1f} ms/turn")


def compare(base: Columns, other: Columns) -> None:
    """`other`'s per-turn times over `base`'s, column by column, from the same rounds."""

    def ratio(values: Callable[[Columns], list[float]]) -> str:
        return f"{median(values(other)) / median(values(base)):.3f}x"

    print(
        f"{other.protocol} over {base.protocol}, per turn, same rounds:"
        f" duragent {ratio(lambda c: c.ours)}, plain loop {ratio(lambda c: c.plain)},"
        f" bare Temporal {ratio(lambda c: c.bare)},"
        f" one-activity floor {ratio(lambda c: c.single)}"
    )
    gap = (median(other.ours) - median(other.plain)) - (median(base.ours) - median(base.plain))
    print(
        f"{other.protocol}'s overhead over the plain loop minus {base.protocol}'s:"
        f" {gap:.1f} ms/turn"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument(
        "--protocol",
        choices=["both", *WIRE_MODELS],
        default="both",
        help="the model's wire API; both: anthropic and openai in the same rounds (default)",
    )
    args = parser.parse_args()
    protocols = BOTH if args.protocol == "both" else (args.protocol,)
    every = [Columns(p) for p in protocols]
    traced_times: list[float] = []
    traced_model = WIRE_MODELS["anthropic"]

    async with bench_stack(script(args.turns, args.latency_ms), protocols[0]) as bench:
        workspace = bench.home / "workspace"
        workspace.mkdir()
        (workspace / "notes.txt").write_text("notes\n" * 50)
        worker = build_worker(bench.client.temporal, bench.client.db, bench.settings)
        tracing = "anthropic" in protocols
        async with (
            worker,
            tracing_column(bench, tracing) as traced_bench,
            bare_temporal(bench) as floor,
        ):
            for columns in every:
                await one_round(columns, bench, floor, workspace, args.turns, None)
            if traced_bench is not None:
                await duragent_run(traced_bench, workspace, traced_model)
            for round_no in range(1, args.rounds + 1):
                for columns in every:
                    await one_round(columns, bench, floor, workspace, args.turns, round_no)
                if traced_bench is not None:
                    t = await duragent_run(traced_bench, workspace, traced_model)
                    traced_times += t
                    print(f"round {round_no}: duragent with tracing {median(t):.1f} ms/turn")
    print(f"model latency fixed at {args.latency_ms} ms; {args.turns} tool turns + 1 final turn")
    for columns in every:
        summary(columns)
    if traced_times:
        anthropic = next(c for c in every if c.protocol == "anthropic")
        traced_ms = median(traced_times)
        print(
            f"duragent with tracing (anthropic): {traced_ms:.1f} ms/turn"
            f" (median of {len(traced_times)} turns)"
        )
        print(f"tracing adds: {traced_ms - median(anthropic.ours):.1f} ms/turn")
    for other in every[1:]:
        compare(every[0], other)
    first = every[0]
    print(f"overhead: {median(first.ours) - median(first.plain):.1f} ms/turn")


if __name__ == "__main__":
    asyncio.run(main())
