"""Recorded histories of representative runs replay against today's workflow code."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from duragent.worker import workflow_runner
from duragent.workflows.scheduled_prompt import ScheduledPrompt
from duragent.workflows.session_changes import SessionChanges
from duragent.workflows.session_move import SessionMove
from duragent.workflows.session_run import SessionRun
from duragent.workflows.session_structure import SessionCompaction, SessionNavigation

pytestmark = pytest.mark.fast

HISTORIES = sorted((Path(__file__).parents[1] / "histories").glob("*.json"))


def test_histories_are_recorded() -> None:
    assert {p.stem for p in HISTORIES} >= {
        "tools",
        "provider_retry",
        "steer",
        "abort",
        "guidance",
        "continue_as_new-1",
        "compaction-1",
        "approval",
        "subagent",
        "subagent-child",
        "host_wait",
        "host_gone",
        "move-1",
        "move-2",
        "budget",
        "agent_output",
        "summary_budget",
        "ask_user",
        # A turn as one activity.
        "one_activity_tools",
        "one_activity_guidance",
        "one_activity_abort",
        "one_activity_approval",
        "one_activity_host_wait",
        "one_activity_steer",
        # A schedule's firing, and the run it started.
        "scheduled",
        "scheduled_prompt",
    }


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_history_replays(path: Path) -> None:
    history = WorkflowHistory.from_json(f"session-{path.stem}", path.read_text())
    replayer = Replayer(
        workflows=[
            SessionRun,
            SessionChanges,
            SessionCompaction,
            SessionNavigation,
            SessionMove,
            ScheduledPrompt,
        ],
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(strict=True),
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
