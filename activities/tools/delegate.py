"""`delegate`: hand a piece of work to a sub-agent, a session of its own.

Only the spec lives here (what the model reads, the arguments it may give). The call never
runs as a tool activity: its traits say it runs as a child session, and the workflow
starts that session's run as a child workflow (`workflows/subagents.py`).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from duragent.activities.tools.contract import Tool, ToolContext
from duragent.domain.input import MAX_INPUT_BYTES
from duragent.domain.models import parse_model
from duragent.domain.subagents import DELEGATE_TOOL, MAX_DEPTH
from duragent.domain.tools import ToolResult, ToolTraits

MAX_NAME_CHARS = 100
MAX_MODEL_CHARS = 100


class DelegateArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(
        min_length=1,
        max_length=MAX_INPUT_BYTES,
        description=(
            "The sub-agent's task, complete in itself: it sees nothing of this conversation, "
            "only this text and the workspace. Say what to do, what to hand back, and when "
            "to stop."
        ),
    )
    name: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NAME_CHARS,
        description="A short title for the sub-agent's session, e.g. 'review the parser'.",
    )
    tools: list[str] | None = Field(
        default=None,
        description=("The tools the sub-agent may use, a subset of yours; default: all of yours."),
    )
    model: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_MODEL_CHARS,
        description=(
            "The model the sub-agent runs on (provider:model, e.g. openai:gpt-4.1; a bare "
            "name is Claude's); default: yours."
        ),
    )

    @field_validator("model")
    @classmethod
    def _known_model(cls, model: str | None) -> str | None:
        if model is not None:
            parse_model(model)  # UnknownModel (a ValueError): the model reads what is wrong
        return model


class DelegateTool(Tool[DelegateArgs]):
    name = DELEGATE_TOOL
    description = (
        "Hand a self-contained piece of work to a sub-agent: a new session with its own "
        "context that works in the same workspace with the tools you give it (never more "
        "than yours), then answers. The result is its final answer. Several delegate calls "
        "in one reply run in parallel, so split independent work into separate calls. "
        "The sub-agent does not see this conversation: put everything it needs in the "
        f"prompt. Sub-agents nest at most {MAX_DEPTH} deep: a sub-agent of a sub-agent "
        "cannot delegate."
    )
    args_model = DelegateArgs
    traits: ClassVar[ToolTraits] = ToolTraits(child_session=True)

    async def execute(self, args: DelegateArgs, ctx: ToolContext) -> ToolResult:
        # The workflow answers these calls itself; reaching here means a call was sent to
        # the tool activity by mistake, which must be seen, not papered over.
        raise RuntimeError(
            "delegate runs as a child session workflow, never as a tool activity: "
            "the workflow should have started a sub-agent for this call"
        )
