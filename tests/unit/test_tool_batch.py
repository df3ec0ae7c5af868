"""Batching of one turn's tool calls (`domain.call_batches.batches`).

Consecutive parallel calls run together; a sequential tool runs alone, and the groups
keep the model's call order. (How a batch is cut short by guidance is in
test_session_run_orchestration.py, which runs the workflow.)
"""

from __future__ import annotations

import pytest

from duragent.domain.call_batches import batches
from duragent.domain.tools import ExecutionMode, ToolCallRef, ToolTraits

pytestmark = pytest.mark.fast


def call(call_id: str, execution: ExecutionMode = "parallel") -> ToolCallRef:
    return ToolCallRef(
        id=call_id, name="bash", args_preview="", traits=ToolTraits(execution=execution)
    )


def ids(groups: list[list[ToolCallRef]]) -> list[list[str]]:
    return [[c.id for c in group] for group in groups]


def test_no_calls_no_groups() -> None:
    assert batches([]) == []


def test_parallel_calls_run_as_one_group() -> None:
    assert ids(batches([call("a"), call("b"), call("c")])) == [["a", "b", "c"]]


def test_sequential_calls_each_run_alone() -> None:
    calls = [call("a", "sequential"), call("b", "sequential")]
    assert ids(batches(calls)) == [["a"], ["b"]]


def test_a_sequential_call_splits_the_parallel_ones_around_it() -> None:
    calls = [call("a"), call("b"), call("s", "sequential"), call("c"), call("d")]
    assert ids(batches(calls)) == [["a", "b"], ["s"], ["c", "d"]]


def test_groups_keep_the_call_order() -> None:
    calls = [call("s1", "sequential"), call("a"), call("s2", "sequential"), call("b")]
    groups = batches(calls)
    assert ids(groups) == [["s1"], ["a"], ["s2"], ["b"]]
    assert [c.id for group in groups for c in group] == [c.id for c in calls]
