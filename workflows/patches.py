"""Every `workflow.patched` id, in one place: what it guards, since when, and when it may go.

A change of workflow logic that would make a run in flight replay differently goes behind
a patch: a run that reaches the change records the patch's marker and takes the new
branch; a history recorded before it replays the old one (docs/ARCHITECTURE.md, "The
determinism boundary"). Workflow code names a patch only by its constant here
(`tests/unit/test_patches.py` checks that every `workflow.patched` call does, and that
every patch listed is used).

Retiring a patch: once no run started before it can still be open (every deployment's
workers have run the release that added it for longer than its longest runs last), its
old branch is removed and the call becomes `workflow.deprecate_patch(ID)` for one
release, then goes; the recorded histories under `tests/histories/` that predate it are
re-recorded (`python tests/histories/record.py`), since they can no longer replay.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Patch:
    guards: str
    """What the new branch does that the old one did not."""
    since: str
    """When it was added (the first release with it)."""


TOOL_APPROVAL = "tool-approval"
BUDGETS = "budgets"
HOST_QUEUES = "host-queues"
SUMMARY_USAGE = "summary-usage"
TURN_ONE_ACTIVITY = "turn-one-activity"
ASK_USER = "ask-user"
ABORT_WINS = "abort-wins"
QUEUED_INPUT_RUNS = "queued-input-runs"
LOST_TURN_CALLS_RESCHEDULED = "lost-turn-calls-rescheduled"
AGENT_OUTPUT = "agent-output"

PATCHES: dict[str, Patch] = {
    TOOL_APPROVAL: Patch(
        "a call the approval policy holds waits in the workflow for a person's decision",
        "2026-12-01",
    ),
    BUDGETS: Patch(
        "a run with a budget checks it between turns and stops or waits for a raise",
        "2026-12-01",
    ),
    HOST_QUEUES: Patch(
        "a session's tool calls go to its host's task queue, and wait for a gone host",
        "2026-12-01",
    ),
    SUMMARY_USAGE: Patch(
        "a compaction's summary call counts in the run's usage and budget",
        "2026-12-02",
    ),
    TURN_ONE_ACTIVITY: Patch(
        "a turn is one activity (model call and tool calls), its result ids fixed by the "
        "turn and the call",
        "2026-12-03",
    ),
    ASK_USER: Patch(
        "an `ask_user` call waits in the workflow for the user's answer",
        "2026-12-03",
    ),
    ABORT_WINS: Patch(
        "a step that fails once an abort was asked for ends the run as aborted",
        "2026-12-03",
    ),
    QUEUED_INPUT_RUNS: Patch(
        "a run's end starts the next run (continue-as-new) for input sent while it was open",
        "2026-12-05",
    ),
    LOST_TURN_CALLS_RESCHEDULED: Patch(
        "the calls of a turn whose activity was not taken in time go as rescheduled, "
        "finding what a lost attempt did",
        "2026-12-05",
    ),
    AGENT_OUTPUT: Patch(
        "a run with a structured output asks the model again for an output it refused "
        "or did not give, a bounded number of times",
        "2026-12-05",
    ),
}
