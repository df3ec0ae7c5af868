"""Harness config (the latest settings) and the turn snapshot (what one turn used).

Getters return config; a setter changes config at once, but only the next
turn snapshot sees the change. A snapshot is content-addressed, so taking the same
snapshot twice (a retried save point) yields the same id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

from duragent.domain.agents import OutputSpec
from duragent.domain.approvals import ApprovalPolicy
from duragent.domain.budgets import Budget
from duragent.domain.resources import Resource, ResourceKind

ThinkingLevel = Literal["off", "minimal", "low", "medium", "high"]
QueueMode = Literal["all", "one-at-a-time"]
THINKING_LEVELS: tuple[ThinkingLevel, ...] = get_args(ThinkingLevel)
QUEUE_MODES: tuple[QueueMode, ...] = get_args(QueueMode)

THINKING_BUDGETS: dict[ThinkingLevel, int] = {
    "off": 0,
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
}

DEFAULT_SYSTEM_PROMPT = (
    "You are a capable software agent working in a workspace directory. "
    "Use the tools to inspect and change files and run commands; paths are relative to the "
    "workspace. Be concise, and say what you did when you finish."
)


def check_tool_names(names: Iterable[str], known: Collection[str]) -> None:
    """Refuse active tool names no worker registers (a typo would leave the model with
    fewer tools and no error); `ValueError` naming them and the known ones."""
    unknown = [name for name in names if name not in known]
    if unknown:
        listed = ", ".join(repr(name) for name in unknown)
        raise ValueError(
            f"unknown tool{'s' if len(unknown) > 1 else ''} {listed}; "
            f"the tools are {', '.join(known)}"
        )


BRANCH_SCOPED = ("model", "thinking_level", "active_tools", "approval_policy")
"""Config that lives as entries on a session's path, so each branch has its own. The
session's stored values of these are the defaults every path starts from."""


class SessionConfig(BaseModel):
    """The latest harness config of one session (what setters change)."""

    model_config = ConfigDict(extra="forbid")

    model: str
    thinking_level: ThinkingLevel = "off"
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    active_tools: list[str] | None = None
    """Tool names the model may call; None means every registered tool."""
    max_tokens: int = 8192
    steering_mode: QueueMode = "one-at-a-time"
    follow_up_mode: QueueMode = "one-at-a-time"
    approval_policy: ApprovalPolicy | None = None
    """Which tool calls wait for a person (domain.approvals); None: every call runs."""
    mcp_servers: list[str] | None = None
    """Which of the workers' MCP servers the session uses (their tools are offered and
    run); None: all. A session can only choose among the servers the workers' config
    file lists: it never defines one (that would start processes on a worker)."""
    budget: Budget | None = None
    """What all the session's runs together may spend (domain.budgets); None: no limit."""
    agent: str | None = None
    """The agent the session was made from (`duragent.Agent`), or None."""
    output: OutputSpec | None = None
    """The structured output each run ends with (an agent's `output_type`), or None: a
    run ends with the model's answer as text."""

    def with_session_wide_of(self, newer: SessionConfig) -> SessionConfig:
        """`newer`'s session-wide settings over this config's branch-scoped defaults: what
        a session stores when a change (which may carry branch-scoped fields too, as a
        run's getter config does) sets session-wide ones."""
        return newer.model_copy(update={name: getattr(self, name) for name in BRANCH_SCOPED})


class TurnSnapshot(BaseModel):
    """The concrete state one model turn runs with; immutable once taken."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    thinking_level: ThinkingLevel
    system_prompt: str
    """As configured (or as an extension's provider made it); skills are listed after it."""
    active_tools: list[str] | None
    max_tokens: int
    resources: tuple[Resource, ...] = ()
    """Skills and prompt templates visible to this turn."""
    approval_policy: ApprovalPolicy | None = None

    def resource(self, kind: ResourceKind, name: str) -> Resource | None:
        return next((r for r in self.resources if r.kind == kind and r.name == name), None)

    @property
    def id(self) -> str:
        dumped = self.model_dump(mode="json")
        if dumped["approval_policy"] is None:  # snapshots taken before policies keep their ids
            del dumped["approval_policy"]
        canonical = json.dumps(dumped, sort_keys=True, separators=(",", ":"))
        return "snap_" + hashlib.sha256(canonical.encode()).hexdigest()[:24]


class SnapshotRef(BaseModel):
    """A snapshot by reference, with the fields a person reading history wants to see."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    model: str
    thinking_level: ThinkingLevel

    @classmethod
    def of(cls, snapshot: TurnSnapshot) -> SnapshotRef:
        return cls(id=snapshot.id, model=snapshot.model, thinking_level=snapshot.thinking_level)
