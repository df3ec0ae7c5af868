"""executeToolCalls in the workflow, for a turn whose calls must wait here (an approval, a
sub-agent, a question for the user): the rules are `domain.call_batches`'; this says how
the workflow waits (`workflow.wait_condition`) and what guidance its signals brought
means for the batch. A failed call is its exception in the result; an abort stops every
running call and is raised once each has reported."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from duragent.domain.call_batches import run_batch
    from duragent.domain.fallbacks import Skipped, ToolRun
    from duragent.domain.guidance import GuidanceIntent
    from duragent.domain.tools import ToolCallRef
    from duragent.domain.turns import ToolCallOutcome

__all__ = ["BatchResult", "Skipped", "ToolRun", "run_tool_calls"]


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
    """Every call's outcome; `guidance()`: the intent of the guidance waiting, if any."""

    async def until_done(running: set[asyncio.Task[Any]]) -> bool:
        await workflow.wait_condition(
            lambda: all(task.done() for task in running) or guidance() == "interrupt"
        )
        return guidance() == "interrupt"

    async def ends_batch() -> bool:
        return guidance() is not None

    batch = await run_batch(calls, run_one, until_done, ends_batch)
    if batch.aborted:  # every running call has reported: the abort is handled now
        raise asyncio.CancelledError
    return BatchResult(
        outcomes=[batch.outcomes.get(call.id, Skipped()) for call in calls],
        interrupted=batch.interrupted,
        skipped=batch.skipped,
    )
