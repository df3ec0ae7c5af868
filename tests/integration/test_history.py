"""`client.history`: a run's timeline read back from its Temporal workflow history."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from support import Stack, eventually
from temporalio import workflow
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from duragent.client.history import (
    RunTimeline,
    TimelineItem,
    render,
    session_timelines,
    timeline_from_history,
)
from duragent.domain.runs import session_workflow_id

HISTORIES = sorted((Path(__file__).parents[1] / "histories").glob("*.json"))
UI = "http://127.0.0.1:8233"


def of_kind(timeline: RunTimeline, kind: str) -> list[TimelineItem]:
    return [item for item in timeline.items if item.kind == kind]


async def timelines_when(
    temporal: Client, session_id: str, count: int, **kwargs: Any
) -> list[RunTimeline]:
    """The session's timelines once visibility lists `count` executions."""
    found: list[RunTimeline] = []

    async def listed() -> bool:
        nonlocal found
        found = await session_timelines(temporal, session_id, **kwargs)
        return len(found) == count

    await eventually(listed, timeout=10)
    return found


def assert_well_formed(timeline: RunTimeline) -> None:
    assert timeline.items[0].kind == "run_started"
    assert timeline.items[-1].kind in ("run_ended", "continued_as_new")
    assert [i.at for i in timeline.items] == sorted(i.at for i in timeline.items)
    assert RunTimeline.model_validate(timeline.model_dump(mode="json")) == timeline
    assert RunTimeline.model_validate_json(json.dumps(timeline.model_dump(mode="json"))) == timeline


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {
                    "reply": [
                        {"text": "Two things at once."},
                        {"tool_use": {"name": "write", "input": {"path": "a.txt", "content": "a"}}},
                        {"tool_use": {"name": "bash", "input": {"command": "echo b"}}},
                    ]
                },
                {"reply": [{"text": "Done."}]},
                {"reply": [{"text": "Again."}]},
            ]
        }
    }
)
async def test_parallel_tool_calls_two_runs_and_an_idle_change(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        first = await stack.client.runs.prompt(session.id, "Make a file\nand echo.")
        await first.result()
        await stack.client.config.set_model(session.id, "claude-next")  # a SessionChanges execution
        second = await stack.client.runs.prompt(session.id, "again")
        await second.result()

    timelines = await timelines_when(stack.temporal, session.id, 3, ui_base=UI)
    run, changes, again = timelines
    assert [t.workflow_type for t in timelines] == ["SessionRun", "SessionChanges", "SessionRun"]
    assert (run.run_id, changes.run_id, again.run_id) == (first.run_id, None, second.run_id)
    for timeline in timelines:
        assert_well_formed(timeline)
        assert timeline.web_ui_url == (
            f"{UI}/namespaces/default/workflows/{session_workflow_id(session.id)}/"
            f"{timeline.temporal_run_id}/history"
        )

    started = run.items[0]
    assert started.details["run_id"] == first.run_id and started.details["kind"] == "prompt"
    assert started.details["prompt_preview"] == "Make a file and echo."
    models = of_kind(run, "model_call")
    assert [m.turn for m in models] == [1, 2]
    assert all(m.details["usage"]["input_tokens"] > 0 for m in models)
    assert models[0].details["stop_reason"] == "toolUse"
    assert [c["name"] for c in models[0].details["tool_calls"]] == ["write", "bash"]
    assert models[0].details["text_preview"] == "Two things at once."
    tools = of_kind(run, "tool_call")
    assert sorted(t.details["tool"] for t in tools) == ["bash", "write"]
    assert all(
        t.turn == 1 and t.duration_ms is not None and not t.details["is_error"] for t in tools
    )
    (save,) = of_kind(run, "save_point")
    assert (save.turn, save.details["saved_turn"], len(save.details["slots"])) == (2, 1, 3)
    assert save.details["carried_by"] == "turn-2-1"  # the turn's activity
    ended = run.items[-1]
    assert ended.details["run_status"] == "completed" and ended.details["turns"] == 2
    assert ended.details["final_text"] == "Done."

    assert [i.kind for i in changes.items] == [
        "run_started",
        "signal",
        "apply_changes",
        "run_ended",
    ]
    assert "model=claude-next" in changes.items[1].summary

    only = await session_timelines(stack.temporal, session.id, run_id=second.run_id)
    assert [t.temporal_run_id for t in only] == [again.temporal_run_id]

    console = Console(record=True, width=160)
    render(timelines, console)
    text = console.export_text()
    assert "+0.000s" in text and "bash" in text and f"{run.web_ui_url}" in text
    tool_line = next(line for line in text.splitlines() if '"Wrote 1 bytes' in line)
    assert tool_line.split("turn 1")[1].startswith("    tool")  # indented under the turn


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"error": {"status": 529, "message": "Overloaded", "retry_after": 0.1}},
                {"reply": [{"text": "Fine now."}]},
            ]
        }
    }
)
async def test_a_provider_retry(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        await (await stack.client.runs.prompt(session.id, "hello")).result()
    (timeline,) = await timelines_when(stack.temporal, session.id, 1)
    assert_well_formed(timeline)
    failed, succeeded = of_kind(timeline, "model_call")
    assert failed.details["outcome"] == "failed" and failed.details["provider"]["status"] == 529
    assert "Overloaded" in failed.summary
    assert succeeded.details["model_attempt"] == 2 and succeeded.details["outcome"] == "completed"
    (retry,) = of_kind(timeline, "retry")
    assert (retry.turn, retry.details["attempt"], retry.details["delay_ms"]) == (1, 1, 100)
    assert retry.details["provider"]["kind"] == "overloaded"
    assert retry.duration_ms is not None and retry.duration_ms >= 100
    assert failed.at <= retry.at <= succeeded.at
    assert timeline.items[-1].details["run_status"] == "completed"


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"wait_for": "go", "reply": [{"tool_use": {"name": "ls", "input": {}}}]},
                {"reply": [{"text": "Noted."}]},
            ]
        }
    }
)
async def test_a_steered_run(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        run = await stack.client.runs.prompt(session.id, "look around")
        await eventually(lambda: len(stack.model.requests_for(session.id)) == 1)
        steer_id = await stack.client.inputs.steer(session.id, "Also check the tests.")
        stack.model.release("go")
        await run.result()
    (timeline,) = await timelines_when(stack.temporal, session.id, 1)
    assert_well_formed(timeline)
    (signal,) = of_kind(timeline, "signal")
    assert signal.details["signal"] == "steer" and signal.details["id"] == steer_id
    assert signal.details["text"] == "Also check the tests."
    assert signal.details["delivered_turn"] == 2 and "delivered at turn 2" in signal.summary
    (save,) = of_kind(timeline, "save_point")
    assert save.turn == 2 and save.details["consumed"] == [
        {"entry_id": steer_id, "queue": "steering"}
    ]
    assert 'delivers steering "Also check the tests."' in save.summary


@pytest.mark.script(
    {
        "conversations": {
            "*": [{"reply": [{"tool_use": {"name": "bash", "input": {"command": "sleep 60"}}}]}]
        }
    }
)
async def test_an_aborted_run(stack: Stack) -> None:
    session = await stack.client.sessions.create()

    async def tool_started() -> bool:
        async for event in stack.client.events.stream(session.id, follow=False):
            if event.type == "tool_execution_start":
                return True
        return False

    async with stack.worker():
        await stack.client.runs.prompt(session.id, "wait a minute")
        await eventually(tool_started)
        await stack.client.runs.abort(session.id)
    (timeline,) = await timelines_when(stack.temporal, session.id, 1)
    assert_well_formed(timeline)
    abort, cancel_tool = of_kind(timeline, "cancel")
    assert "abort" in abort.summary
    (tool,) = of_kind(timeline, "tool_call")
    assert (
        cancel_tool.turn == 1 and cancel_tool.details["activity_id"] == tool.details["activity_id"]
    )
    assert tool.details["interrupted"] and tool.details["is_error"]
    assert "cancel_requested_at" in tool.details
    assert timeline.items[-1].details["run_status"] == "aborted"


@pytest.mark.fast
@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
def test_recorded_histories_read(path: Path) -> None:
    history = WorkflowHistory.from_json(f"session-{path.stem}", path.read_text())
    timeline = timeline_from_history(history)
    assert_well_formed(timeline)
    assert timeline.items[-1].kind in ("run_ended", "continued_as_new")
    if timeline.workflow_type == "SessionRun":
        assert timeline.run_id and of_kind(timeline, "model_call")
    else:  # a structural operation under the session's id, or a schedule's firing
        assert timeline.workflow_type in (
            "SessionCompaction",
            "SessionNavigation",
            "SessionMove",
            "ScheduledPrompt",
        )
    printed = io.StringIO()
    render([timeline], Console(file=printed, width=120))
    assert len(printed.getvalue().splitlines()) == len(timeline.items) + 1  # header + items


@workflow.defn(name="ToyChain")
class ToyChain:
    """Stands in for workflows that continue as new under a session's id."""

    @workflow.run
    async def run(self, data: dict[str, Any]) -> int:
        if data["left"] > 0:
            workflow.continue_as_new({"left": data["left"] - 1})
        return 7


async def test_continue_as_new_chains_and_unknown_workflows(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    queue = stack.settings.task_queue
    async with Worker(
        stack.temporal,
        task_queue=queue,
        workflows=[ToyChain],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        handle = await stack.temporal.start_workflow(
            ToyChain.run,
            {"run_id": "toy-run", "left": 1},
            id=session_workflow_id(session.id),
            task_queue=queue,
            memo={"run_id": "toy-run"},
        )
        assert await handle.result() == 7  # follows the chain
    first, second = await timelines_when(stack.temporal, session.id, 2, run_id="toy-run")
    assert [first.workflow_type, second.workflow_type] == ["ToyChain", "ToyChain"]
    assert first.run_id == second.run_id == "toy-run"  # inherited along the chain
    assert [i.kind for i in first.items] == ["run_started", "continued_as_new"]
    assert first.items[-1].details["new_execution_run_id"] == second.temporal_run_id
    assert second.items[0].details["continued_from"] == first.temporal_run_id
    assert second.items[-1].summary == "completed: 7"
    assert await session_timelines(stack.temporal, session.id, run_id="another") == []
