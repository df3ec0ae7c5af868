"""executeToolCalls: run one turn's tool calls, in parallel unless a tool asks otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from domain.tools import ToolCallRef
    from domain.turns import ToolCallOutcome

ToolRun = ToolCallOutcome | BaseException


def batches(calls: Sequence[ToolCallRef]) -> list[list[ToolCallRef]]:
    """Group consecutive parallel calls; a sequential tool runs alone, in call order."""
    groups: list[list[ToolCallRef]] = []
    for call in calls:
        if (
            call.traits.execution == "parallel"
            and groups
            and groups[-1][0].traits.execution == ("parallel")
        ):
            groups[-1].append(call)
        else:
            groups.append([call])
    return groups


async def run_tool_calls(
    calls: Sequence[ToolCallRef], run_one: Callable[[ToolCallRef], Awaitable[ToolCallOutcome]]
) -> list[ToolRun]:
    """Every call's outcome, in call order. A failed call is its exception, never a gap:
    one sibling failing does not lose the results of the others."""
    outcomes: list[ToolRun] = []
    for group in batches(calls):
        outcomes.extend(await asyncio.gather(*(run_one(c) for c in group), return_exceptions=True))
    return outcomes
