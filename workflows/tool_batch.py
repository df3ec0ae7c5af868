"""executeToolCalls: run one turn's tool calls, in parallel unless a tool asks otherwise.

Runtime guidance can cut a batch short (docs/SPEC.md): guidance that interrupts cancels the
calls still running (each returns what it printed so far) and skips the rest;
supplementary guidance lets running calls finish and skips the groups after them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from duragent.domain.fallbacks import Skipped, ToolRun
    from duragent.domain.guidance import GuidanceIntent
    from duragent.domain.tools import ToolCallRef, batches
    from duragent.domain.turns import ToolCallOutcome

__all__ = ["BatchResult", "Skipped", "ToolRun", "batches", "run_tool_calls"]


@dataclass
class BatchResult:
    outcomes: list[ToolRun]
    """One per call, in call order."""
    interrupted: list[str] = field(default_factory=list)
    """Ids of calls cancelled while running."""
    skipped: list[str] = field(default_factory=list)
    """Ids of calls that never started."""


async def run_tool_calls(
    calls: Sequence[ToolCallRef],
    run_one: Callable[[ToolCallRef], Coroutine[Any, Any, ToolCallOutcome]],
    guidance: Callable[[], GuidanceIntent | None] = lambda: None,
) -> BatchResult:
    """Every call's outcome. A failed call is its exception, never a gap: one sibling
    failing (or being cancelled) does not lose the results of the others."""
    result = BatchResult(outcomes=[])
    by_id: dict[str, ToolRun] = {}
    for group in batches(calls):
        if guidance() is not None:
            for call in group:
                by_id[call.id] = Skipped()
                result.skipped.append(call.id)
            continue
        tasks = {call.id: asyncio.create_task(run_one(call)) for call in group}
        running = list(tasks.values())
        try:
            await workflow.wait_condition(
                lambda: all(t.done() for t in running) or guidance() == "interrupt"  # noqa: B023
            )
        except asyncio.CancelledError:
            # The run is aborted: stop every call and wait until each has reported (a
            # cancelled tool stages what it printed) before the abort is handled.
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            raise
        for call_id, task in tasks.items():
            if not task.done():
                task.cancel()
                result.interrupted.append(call_id)
        done = await asyncio.gather(*tasks.values(), return_exceptions=True)
        by_id.update(zip(tasks, done, strict=True))
    result.outcomes = [by_id[call.id] for call in calls]
    return result
