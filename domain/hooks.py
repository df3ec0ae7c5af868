"""Loop hooks that run inside the workflow: they must be deterministic.

`should_stop_after_turn` and `prepare_next_turn` decide the loop's course, so they run
in workflow code, on the small summary the workflow has (never the whole context). A
worker registers them by import path (`Extension.workflow_hooks`); the workflow imports
them inside Temporal's sandbox, which refuses clocks, randomness and I/O, so a hook that
is not deterministic fails loudly instead of corrupting replays.

Hooks that need the context or I/O (transformContext, convertToLlm, beforeToolCall,
afterToolCall, snapshot providers) run in activities: see `activities/extensions.py`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from duragent.domain.config import ThinkingLevel
from duragent.domain.messages import StopReason, Usage


class ToolOutcomeSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    args_preview: str
    is_error: bool
    preview: str


class TurnSummary(BaseModel):
    """What a workflow hook sees of a finished turn."""

    model_config = ConfigDict(extra="forbid")

    turn: int
    model: str
    stop_reason: StopReason
    text_preview: str
    usage: Usage
    run_usage: Usage
    tools: list[ToolOutcomeSummary] = Field(default_factory=list)


class NextTurn(BaseModel):
    """Overrides for the next turn only (the prepare-next-turn hook)."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    thinking_level: ThinkingLevel | None = None


class WorkflowHooks:
    """Subclass and override; register the class's import path with the worker."""

    def should_stop_after_turn(self, turn: TurnSummary) -> bool:
        del turn
        return False

    def prepare_next_turn(self, turn: TurnSummary) -> NextTurn | None:
        del turn
        return None
