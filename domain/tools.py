"""What a model is told of a tool, what a tool returns, and the flags the loop needs to
schedule it."""

from __future__ import annotations

import re
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from duragent.domain.approvals import ApprovalAsk
from duragent.domain.compact import CompactModel
from duragent.domain.messages import TextContent, ToolResultContent, ToolResultMessage
from duragent.domain.questions import UserQuestion

ExecutionMode = Literal["parallel", "sequential"]

TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
"""The Messages API's rule for a tool's name."""


class ToolSpec(TypedDict):
    """What a model is told of a tool, whatever its provider: its name, what it does, and
    its arguments' JSON schema (each provider's request format turns it into its own)."""

    name: str
    description: str
    input_schema: dict[str, Any]


class ToolResult(BaseModel):
    """The outcome of one tool call, before it becomes a `ToolResultMessage`."""

    model_config = ConfigDict(extra="forbid")

    content: list[ToolResultContent]
    details: dict[str, Any] | None = None
    is_error: bool = False
    terminate: bool = False
    """A hint that the run should stop after this turn (an early stop)."""

    @classmethod
    def error(cls, text: str, **details: Any) -> ToolResult:
        return cls(content=[TextContent(text=text)], details=details or None, is_error=True)

    @classmethod
    def text(cls, text: str, **details: Any) -> ToolResult:
        return cls(content=[TextContent(text=text)], details=details or None)

    def to_message(self, tool_call_id: str, tool_name: str, timestamp: int) -> ToolResultMessage:
        return ToolResultMessage(
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            content=self.content,
            details=self.details,
            is_error=self.is_error,
            timestamp=timestamp,
        )


class ToolTraits(BaseModel):
    """How the loop may run a tool: what the workflow needs to know, and nothing else."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    known: bool = True
    execution: ExecutionMode = "parallel"
    retry_safe: bool = False
    """Safe to run again after a crash: it has no side effects (read, ls, grep, find)."""
    child_session: bool = False
    """The call runs as a session of its own, a child workflow of the run (`delegate`),
    not as a tool activity: the workflow starts it and the tool's `execute` never runs."""


class ToolCallRef(CompactModel):
    """A tool call as the workflow sees it: its id, name, traits and a short preview.

    The full arguments stay in the store with the assistant message; the preview keeps
    the workflow history readable without letting it grow with content (and the fields at
    their defaults are not written: it is in every turn's history).
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    args_preview: str
    traits: ToolTraits = Field(default_factory=ToolTraits)
    refused: str | None = None
    """Why the call must not run, or None: its tool was not active in the turn's snapshot
    (the model called a tool it was not offered). The tool activity answers a refused call
    with this text as an error and runs nothing."""
    approval: ApprovalAsk | None = None
    """Set when the session's approval policy asks for a decision before the call runs
    (a policy's deny sets `refused` instead); None: the call may run."""
    question: UserQuestion | None = None
    """An `ask_user` call's question (its arguments, checked): the workflow waits for the
    user's answer, which becomes the call's result; the call runs no tool activity."""
