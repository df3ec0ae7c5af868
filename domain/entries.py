"""Session entries: the session is a tree of these, each pointing at its parent.

The path from the session's leaf back to the root is the conversation the model sees
(after compaction); branches are other paths through the same tree. The entry types are
those of docs/SPEC.md, sessions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from duragent.domain.approvals import ApprovalPolicy
from duragent.domain.config import ThinkingLevel
from duragent.domain.messages import AgentMessage, Usage, UserContent
from duragent.domain.models import stored_model_ref


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    parent_id: str | None
    timestamp: int


class MessageEntry(_Entry):
    type: Literal["message"] = "message"
    message: AgentMessage


class ModelChangeEntry(_Entry):
    type: Literal["model_change"] = "model_change"
    model: str
    """The model as the session names it (`provider:model`, a bare name being Anthropic's)."""
    provider: str = ""
    """The provider serving it: `model`'s own unless given (an import gives pi's). Every
    entry is stored with it, so no stored entry depends on a default: an entry made
    without one takes its model's, which for every name made before there were providers
    is Anthropic's, the default this replaces."""

    @model_validator(mode="before")
    @classmethod
    def _provider_of_the_model(cls, data: Any) -> Any:
        if (
            isinstance(data, dict)
            and not data.get("provider")
            and isinstance(data.get("model"), str)
        ):
            return {**data, "provider": stored_model_ref(data["model"]).provider}
        return data


class ThinkingLevelChangeEntry(_Entry):
    type: Literal["thinking_level_change"] = "thinking_level_change"
    thinking_level: ThinkingLevel


class ActiveToolsChangeEntry(_Entry):
    type: Literal["active_tools_change"] = "active_tools_change"
    active_tools: list[str]


class ApprovalPolicyChangeEntry(_Entry):
    """The path's approval policy from here on (domain.approvals)."""

    type: Literal["approval_policy_change"] = "approval_policy_change"
    policy: ApprovalPolicy


class _Summary(_Entry):
    """An entry whose text a model call wrote: what that call used, for the cost."""

    model: str | None = None
    usage: Usage | None = None
    """None: stored before summaries' usage was kept."""


class CompactionEntry(_Summary):
    """Everything on the path before `first_kept_entry_id` is replaced by `summary`."""

    type: Literal["compaction"] = "compaction"
    summary: str
    first_kept_entry_id: str
    tokens_before: int = 0
    details: dict[str, Any] | None = None


class BranchSummaryEntry(_Summary):
    """A summary of the path the user navigated away from, for the model to keep."""

    type: Literal["branch_summary"] = "branch_summary"
    from_entry_id: str
    summary: str


class CustomEntry(_Entry):
    """Extension state stored in the session; never part of the model context."""

    type: Literal["custom"] = "custom"
    custom_type: str
    data: dict[str, Any] = Field(default_factory=dict)


class CustomMessageEntry(_Entry):
    """An extension message that takes part in the model context."""

    type: Literal["custom_message"] = "custom_message"
    custom_type: str
    content: list[UserContent]
    display: bool = True
    details: dict[str, Any] | None = None


class LabelEntry(_Entry):
    type: Literal["label"] = "label"
    target_id: str
    label: str | None
    """None clears the target's label."""


class LeafEntry(_Entry):
    """Records that the session's leaf moved to `target_id` (tree navigation)."""

    type: Literal["leaf"] = "leaf"
    target_id: str


class SessionInfoEntry(_Entry):
    type: Literal["session_info"] = "session_info"
    name: str


SessionEntry = Annotated[
    MessageEntry
    | ModelChangeEntry
    | ThinkingLevelChangeEntry
    | ActiveToolsChangeEntry
    | CompactionEntry
    | BranchSummaryEntry
    | CustomEntry
    | CustomMessageEntry
    | LabelEntry
    | LeafEntry
    | SessionInfoEntry
    | ApprovalPolicyChangeEntry,
    Field(discriminator="type"),
]

CONFIG_ENTRIES = (
    ModelChangeEntry,
    ThinkingLevelChangeEntry,
    ActiveToolsChangeEntry,
    ApprovalPolicyChangeEntry,
)
"""The entries a path's model, thinking level, active tools and approval policy come from."""

ENTRY_TYPES = (
    "message",
    "model_change",
    "thinking_level_change",
    "active_tools_change",
    "compaction",
    "branch_summary",
    "custom",
    "custom_message",
    "label",
    "leaf",
    "session_info",
    "approval_policy_change",
)

entry_adapter: TypeAdapter[SessionEntry] = TypeAdapter(SessionEntry)


def parse_entry(data: dict[str, Any]) -> SessionEntry:
    return entry_adapter.validate_python(data)


def current_labels(entries: Iterable[SessionEntry]) -> dict[str, str]:
    """Each labelled entry's current label, from entries in stored order (the latest
    label entry for an entry wins; an empty one clears it)."""
    found: dict[str, str] = {}
    for entry in entries:
        if isinstance(entry, LabelEntry):
            if entry.label:
                found[entry.target_id] = entry.label
            else:
                found.pop(entry.target_id, None)
    return found
