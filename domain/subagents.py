"""Sub-agents: a tool call that runs as a session of its own, a child workflow of the run.

The model hands a piece of work to a sub-agent with the `delegate` tool. The workflow
starts the child session's run as a child workflow under the child session's own workflow
id (so clients steer, guide and abort it like any session), waits for it, and answers the
call with the child's final answer. These are the contracts of the two store steps around
the child workflow, and the rules they share.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from duragent.domain.runs import RunResult
from duragent.domain.tools import ToolCallRef

DELEGATE_TOOL = "delegate"
MAX_DEPTH = 2
"""How deep sub-agents nest: a session's sub-agents (depth 1) may delegate in turn, their
sub-agents (depth 2) may not. Deeper trees cost more than they help, and a model that
delegates by reflex would otherwise recurse without end."""

START_SUBAGENT = "start_subagent"
FINISH_SUBAGENT = "finish_subagent"


class _Contract(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StartSubagentInput(_Contract):
    """Create the child session of a `delegate` call (once: a retry finds it made)."""

    session_id: str
    run_id: str
    turn: int
    snapshot_id: str
    """The parent turn's snapshot: its active tools bound the child's, its model is the
    child's unless the call names one."""
    assistant_entry_id: str
    """The staged assistant message holding the call's full arguments."""
    call: ToolCallRef
    child_session_id: str
    """Chosen in the workflow, so a retried step makes the same session."""


class SubagentStart(_Contract):
    """The child session made for a call, or why the call is refused (bad arguments, tools
    the parent may not use, too deep)."""

    refused: str | None = None
    name: str = ""
    prompt: str = ""
    depth: int = 0


class FinishSubagentInput(_Contract):
    """Stage the parent's tool result for a `delegate` call: the child's answer, or the
    error that stopped it."""

    session_id: str
    run_id: str
    result_entry_id: str
    call: ToolCallRef
    started_at_ms: int
    finished_at_ms: int
    child_session_id: str | None = None
    """None when the call was refused before a child session was made."""
    name: str = ""
    child: RunResult | None = None
    """The child run's result; None when it never ran or its workflow failed."""
    error: str | None = None
    """Why there is no child result (a refusal, a failed child workflow)."""
