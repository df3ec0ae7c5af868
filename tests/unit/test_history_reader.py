"""The history reader (`client.history`) on the recorded histories in tests/histories/:
what each kind of run looks like as a timeline, read with no server.

The runs were recorded by tests/histories/record.py: a turn with tools, steering with a
follow-up and a config change, an abort mid-tool, guidance that interrupts a tool, a
provider retry that then fails, and a run that continues as new twice.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from temporalio.client import WorkflowHistory

from duragent.client.history import RunTimeline, TimelineItem, render, timeline_from_history

pytestmark = pytest.mark.fast

HISTORIES = Path(__file__).parents[1] / "histories"


def timeline(name: str) -> RunTimeline:
    path = HISTORIES / f"{name}.json"
    return timeline_from_history(WorkflowHistory.from_json(f"session-{name}", path.read_text()))


def kinds(timeline: RunTimeline) -> list[str]:
    return [item.kind for item in timeline.items if item.kind != "workflow_task"]


def of_kind(timeline: RunTimeline, kind: str) -> list[TimelineItem]:
    return [item for item in timeline.items if item.kind == kind]


def test_a_run_with_tools_reads_turn_by_turn() -> None:
    tools = timeline("tools")
    assert tools.workflow_type == "SessionRun" and tools.run_id
    assert kinds(tools) == [
        "run_started",
        "start_run",
        "model_call",
        "tool_call",
        "save_point",
        "model_call",
        "tool_call",
        "tool_call",
        "save_point",
        "model_call",
        "finish_run",
        "run_ended",
    ]
    assert [item.turn for item in of_kind(tools, "tool_call")] == [1, 2, 2]
    assert all(not item.details["is_error"] for item in of_kind(tools, "tool_call"))
    assert of_kind(tools, "run_ended")[0].details["run_status"] == "completed"
    assert 'final text "Done."' in of_kind(tools, "finish_run")[0].summary


def test_steering_and_follow_ups_say_when_they_were_delivered() -> None:
    steer = timeline("steer")
    signals = {item.details["signal"]: item.summary for item in of_kind(steer, "signal")}
    assert signals["steer"].endswith("delivered at turn 2")
    assert signals["follow_up"].endswith("delivered at turn 3")
    assert signals["change"] == "change model=claude-other → saved at turn 2"
    assert [item.summary.split(":")[0] for item in of_kind(steer, "model_call")] == [
        "claude-sonnet-5-5",
        "claude-other",
        "claude-other",
    ]


def test_an_aborted_run_shows_the_cancelled_tool() -> None:
    abort = timeline("abort")
    bash = [i for i in of_kind(abort, "tool_call") if i.summary.startswith("bash")]
    assert len(bash) == 1 and bash[0].details["interrupted"] and bash[0].details["is_error"]
    assert [item.summary for item in of_kind(abort, "cancel")] == [
        "cancellation requested (abort)",
        'cancel sent to tool bash {"command":"sleep 60"}',
    ]
    assert abort.items[-1].details["run_status"] == "aborted"


def test_guidance_that_interrupts_cancels_the_tool_and_is_taken() -> None:
    guided = timeline("guidance")
    assert kinds(guided).index("signal") < kinds(guided).index("cancel")
    (take,) = [i for i in of_kind(guided, "local_activity") if "take_guidance" in i.summary]
    assert take.summary == "take_guidance: take 1 guidance item(s)"
    assert "1 entry (custom_message)" in of_kind(guided, "save_point")[0].summary


def test_a_provider_retry_then_a_failure_ends_the_run_in_error() -> None:
    retried = timeline("provider_retry")
    first, second = of_kind(retried, "model_call")
    assert "failed (overloaded 529)" in first.summary
    assert "(attempt 2)" in second.summary and "failed (bad_request 400)" in second.summary
    (retry,) = of_kind(retried, "retry")
    assert retry.turn == 1 and "retry in" in retry.summary
    assert retried.items[-1].details["run_status"] == "error"


def test_continue_as_new_links_the_executions_of_one_run() -> None:
    one, two, three = (timeline(f"continue_as_new-{n}") for n in (1, 2, 3))
    assert one.run_id == two.run_id == three.run_id
    assert [t.items[-1].kind for t in (one, two, three)] == [
        "continued_as_new",
        "continued_as_new",
        "run_ended",
    ]
    assert "continued_from" not in one.items[0].details
    assert one.items[-1].details["new_execution_run_id"] == three.items[0].details["continued_from"]
    assert [i.turn for i in of_kind(two, "model_call")] == [4, 5, 6]  # turns go on counting


def test_a_compaction_reads_as_its_own_workflow() -> None:
    compaction = timeline("compaction-2")
    assert compaction.workflow_type == "SessionCompaction" and compaction.run_id is None
    # The summary is a model call, a line of its own with its model and usage (to price).
    [summary] = of_kind(compaction, "summary_call")
    assert summary.summary.startswith("compaction summary with ")
    assert summary.details["model"] and "input_tokens" in summary.details["usage"]


def test_render_prints_a_header_then_one_line_per_item() -> None:
    timelines = [timeline("tools"), timeline("steer")]
    printed = io.StringIO()
    render(timelines, Console(file=printed, width=200))
    lines = printed.getvalue().splitlines()
    items = sum(len(t.items) for t in timelines)
    assert len(lines) == items + 2 + 1  # two headers, a blank line between the runs
    assert lines[0].startswith("SessionRun  session-tools / ")
    assert f"run {timelines[0].run_id}" in lines[0]


def test_a_run_a_schedule_started_says_which_schedule() -> None:
    scheduled = timeline("scheduled")
    started = of_kind(scheduled, "run_started")[0]
    schedule = started.details["scheduled_by"]
    assert schedule.startswith("duragent-schedule-")
    assert started.summary.endswith(f'"Report the status." (scheduled: {schedule})')
    # A person's prompt says nothing of the kind.
    assert "scheduled_by" not in of_kind(timeline("tools"), "run_started")[0].details


def test_a_schedule_firing_reads_as_its_one_delivery() -> None:
    firing = timeline("scheduled_prompt")
    assert firing.workflow_type == "ScheduledPrompt"
    assert [i.details.get("outcome") for i in of_kind(firing, "activity")] == ["completed"]
    assert '"outcome":"started"' in of_kind(firing, "activity")[0].summary
