"""Changes to a session made by clients and extensions: config setters and facade writes.

While a run is open they reach it as a signal and wait as pending writes until its next
save point; when the session is idle a short workflow under the same id applies them,
so writes are serialized with runs by Temporal itself.
"""

from __future__ import annotations

from typing import TypedDict

from pydantic import BaseModel, ConfigDict, Field, field_validator

from duragent.domain.approvals import ApprovalPolicy
from duragent.domain.budgets import Budget
from duragent.domain.config import QueueMode, SessionConfig, ThinkingLevel
from duragent.domain.entries import (
    ActiveToolsChangeEntry,
    ApprovalPolicyChangeEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    ModelChangeEntry,
    SessionEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
)
from duragent.domain.models import parse_model

FacadeEntry = CustomEntry | CustomMessageEntry | LabelEntry | SessionInfoEntry


class ConfigUpdate(TypedDict, total=False):
    """The keyword arguments of `client.config.update`: `ConfigChange`'s fields, typed for
    the caller's type checker (a misspelt or mistyped setting fails there, not at run time)."""

    model: str | None
    thinking_level: ThinkingLevel | None
    active_tools: list[str] | None
    system_prompt: str | None
    max_tokens: int | None
    steering_mode: QueueMode | None
    follow_up_mode: QueueMode | None
    approval_policy: ApprovalPolicy | None
    mcp_servers: list[str] | None
    budget: Budget | None


class ConfigChange(BaseModel):
    """Setters, all optional. Model, thinking level, active tools and the approval policy
    are branch-scoped (stored as entries on the path); the rest is session-wide
    (`mcp_servers` too)."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    thinking_level: ThinkingLevel | None = None
    active_tools: list[str] | None = None
    system_prompt: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    steering_mode: QueueMode | None = None
    follow_up_mode: QueueMode | None = None
    approval_policy: ApprovalPolicy | None = None
    mcp_servers: list[str] | None = None
    budget: Budget | None = None
    """The session's budget (session-wide); a budget without limits removes it."""

    @field_validator("model")
    @classmethod
    def _known_model(cls, model: str | None) -> str | None:
        if model is not None:
            parse_model(model)  # UnknownModel (a ValueError) names what is wrong
        return model

    def entries(self, change_id: str, timestamp: int) -> list[SessionEntry]:
        """The branch-scoped part as entries, with ids derived from the change's."""
        made: list[SessionEntry] = []
        if self.model is not None:
            made.append(
                ModelChangeEntry(
                    id=f"{change_id}.model", parent_id=None, timestamp=timestamp, model=self.model
                )
            )
        if self.thinking_level is not None:
            made.append(
                ThinkingLevelChangeEntry(
                    id=f"{change_id}.thinking",
                    parent_id=None,
                    timestamp=timestamp,
                    thinking_level=self.thinking_level,
                )
            )
        if self.active_tools is not None:
            made.append(
                ActiveToolsChangeEntry(
                    id=f"{change_id}.tools",
                    parent_id=None,
                    timestamp=timestamp,
                    active_tools=self.active_tools,
                )
            )
        if self.approval_policy is not None:
            made.append(
                ApprovalPolicyChangeEntry(
                    id=f"{change_id}.approvals",
                    parent_id=None,
                    timestamp=timestamp,
                    policy=self.approval_policy,
                )
            )
        return made

    def apply(self, config: SessionConfig) -> SessionConfig:
        """The config with every given field set (what getters return afterwards)."""
        # Fields as they are, not dumped: nested models (a policy, a budget) stay models.
        return config.model_copy(update={name: value for name, value in self if value is not None})

    def session_wide(self) -> bool:
        return any(
            value is not None
            for value in (
                self.system_prompt,
                self.max_tokens,
                self.steering_mode,
                self.follow_up_mode,
                self.mcp_servers,
                self.budget,
            )
        )


class SessionChange(BaseModel):
    """One client call's change. The id is the caller's, so a retried call applies once."""

    model_config = ConfigDict(extra="forbid")

    id: str
    config: ConfigChange | None = None
    entries: list[FacadeEntry] = Field(default_factory=list)
    """Facade writes (custom entries and messages, labels, the session name), ids set."""
    timestamp: int

    def all_entries(self) -> list[SessionEntry]:
        """What this change appends to the tree: config entries, then facade writes."""
        config = self.config.entries(self.id, self.timestamp) if self.config else []
        return [*config, *self.entries]
