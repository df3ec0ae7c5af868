"""executeToolCalls: the rules for running one turn's tool calls, wherever they run.

The calls run group by group (`batches`: consecutive calls of tools that allow it run
together, a tool that must run alone runs alone, in call order). Guidance that
interrupts stops the calls still running (each returns what it printed so far) and skips
the rest; guidance that supplements lets the running calls finish and skips the groups
after them. An abort stops every running call and waits until each has reported. A call
that fails is its exception, never a gap: its siblings' outcomes are kept.

Two places run a turn's calls with these rules, each telling `run_batch` how to wait and
what guidance says: the turn's activity (`activities.take_turn`: guidance it takes from
the store, a failed call failing the activity) and the workflow, for a turn whose calls
must wait there for a person or a sub-agent (`workflows.tool_batch`: guidance its signals
bring, a failure a result). No I/O here: the workflow replays it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from duragent.domain.tools import ToolCallRef

T = TypeVar("T")


def batches(calls: Sequence[ToolCallRef]) -> list[list[ToolCallRef]]:
    """Group a turn's consecutive parallel calls; a sequential tool runs alone, in call
    order."""
    groups: list[list[ToolCallRef]] = []
    for call in calls:
        parallel = call.traits.execution == "parallel"
        if parallel and groups and groups[-1][0].traits.execution == "parallel":
            groups[-1].append(call)
        else:
            groups.append([call])
    return groups


@dataclass
class Batch(Generic[T]):
    """How a turn's calls ended."""

    outcomes: dict[str, T | BaseException] = field(default_factory=dict)
    """By call id: what each call that ran returned, or raised (stopped ones: their
    `asyncio.CancelledError`, unless they returned what they printed)."""
    interrupted: list[str] = field(default_factory=list)
    """Ids of calls stopped while running, by guidance or an abort."""
    skipped: list[str] = field(default_factory=list)
    """Ids of calls that never started."""
    aborted: bool = False
    """The abort stopped the batch: its caller aborts the run."""


UntilDone = Callable[[set["asyncio.Task[Any]"]], Awaitable[bool]]
"""Wait until every task of a group is done, or guidance interrupts them: True then."""


async def run_batch(
    calls: Sequence[ToolCallRef],
    run_one: Callable[[ToolCallRef], Coroutine[Any, Any, T]],
    until_done: UntilDone,
    ends_batch: Callable[[], Awaitable[bool]],
) -> Batch[T]:
    """Run the calls with the rules above. `ends_batch()` says, before each group, that
    guidance has ended the batch. A failure raised while waiting (not a cancellation)
    stops the running calls and is raised once each has reported."""
    batch: Batch[T] = Batch()
    for group in batches(calls):
        if await ends_batch():
            break
        tasks = {call.id: asyncio.create_task(run_one(call)) for call in group}
        try:
            stop = await until_done(set(tasks.values()))
        except asyncio.CancelledError:
            batch.aborted = stop = True
        except BaseException:
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
            raise
        if stop:
            for call_id, task in tasks.items():
                if not task.done():
                    task.cancel()
                    batch.interrupted.append(call_id)
        done = await asyncio.gather(*tasks.values(), return_exceptions=True)
        batch.outcomes.update(zip(tasks, done, strict=True))
        if batch.aborted:
            break
    batch.skipped = [call.id for call in calls if call.id not in batch.outcomes]
    return batch
