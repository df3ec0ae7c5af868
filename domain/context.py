"""Building the context (docs/SPEC.md): from a path of session entries to what the model sees.

1. The path runs from the root to the leaf.
2. The latest compaction on the path replaces everything before its first kept entry
   with its summary.
3. Entries become context messages (messages, custom messages, summaries).
4. Model, thinking level, active tools and the approval policy come from the config
   entries on the path.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from duragent.domain.approvals import ApprovalPolicy
from duragent.domain.config import SessionConfig, ThinkingLevel, TurnSnapshot
from duragent.domain.entries import (
    ActiveToolsChangeEntry,
    ApprovalPolicyChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    ThinkingLevelChangeEntry,
)
from duragent.domain.messages import AgentMessage, CustomMessage, TextContent

COMPACTION_SUMMARY_TYPE = "compaction_summary"
BRANCH_SUMMARY_TYPE = "branch_summary"


class PathState(BaseModel):
    """Config derived from the entries on a path, falling back to session defaults."""

    model_config = ConfigDict(extra="forbid")

    model: str
    thinking_level: ThinkingLevel
    active_tools: list[str] | None
    approval_policy: ApprovalPolicy | None = None


class SessionContext(PathState):
    messages: list[AgentMessage]


def derive_path_state(path: Sequence[SessionEntry], defaults: SessionConfig) -> PathState:
    start = PathState(
        model=defaults.model,
        thinking_level=defaults.thinking_level,
        active_tools=defaults.active_tools,
        approval_policy=defaults.approval_policy,
    )
    return fold_path_state(start, path)


def fold_path_state(state: PathState | TurnSnapshot, entries: Sequence[SessionEntry]) -> PathState:
    """Apply the config entries among `entries` to a state (or to a snapshot's state)."""
    model, thinking, tools = state.model, state.thinking_level, state.active_tools
    policy = state.approval_policy
    for entry in entries:
        if isinstance(entry, ModelChangeEntry):
            model = entry.model
        elif isinstance(entry, ThinkingLevelChangeEntry):
            thinking = entry.thinking_level
        elif isinstance(entry, ActiveToolsChangeEntry):
            tools = list(entry.active_tools)
        elif isinstance(entry, ApprovalPolicyChangeEntry):
            policy = entry.policy
    return PathState(
        model=model, thinking_level=thinking, active_tools=tools, approval_policy=policy
    )


def take_snapshot(path_state: PathState, config: SessionConfig) -> TurnSnapshot:
    return TurnSnapshot(
        model=path_state.model,
        thinking_level=path_state.thinking_level,
        system_prompt=config.system_prompt,
        active_tools=path_state.active_tools,
        max_tokens=config.max_tokens,
        approval_policy=path_state.approval_policy,
    )


def context_entries(path: Sequence[SessionEntry]) -> list[SessionEntry]:
    """The entries that reach the model: compaction applied (the default transform)."""
    last_compaction = next(
        (i for i in range(len(path) - 1, -1, -1) if isinstance(path[i], CompactionEntry)), None
    )
    if last_compaction is None:
        return list(path)
    compaction = path[last_compaction]
    assert isinstance(compaction, CompactionEntry)
    before = path[:last_compaction]
    kept_from = next(
        (i for i, e in enumerate(before) if e.id == compaction.first_kept_entry_id), len(before)
    )
    return [compaction, *before[kept_from:], *path[last_compaction + 1 :]]


def entry_messages(entry: SessionEntry) -> list[AgentMessage]:
    """The context messages one entry contributes (most contribute none)."""
    if isinstance(entry, MessageEntry):
        return [entry.message]
    if isinstance(entry, CustomMessageEntry):
        return [
            CustomMessage(
                custom_type=entry.custom_type,
                content=entry.content,
                display=entry.display,
                details=entry.details,
                timestamp=entry.timestamp,
            )
        ]
    if isinstance(entry, CompactionEntry):
        return [_summary(COMPACTION_SUMMARY_TYPE, _COMPACTION_PREFIX + entry.summary, entry)]
    if isinstance(entry, BranchSummaryEntry):
        return [_summary(BRANCH_SUMMARY_TYPE, _BRANCH_PREFIX + entry.summary, entry)]
    return []


def summary_call(entry: SessionEntry) -> CustomMessage | None:
    """A summary entry as the model call that wrote it: its message with that call's model
    and usage (shown hidden, and counted in the session's cost); None for any other entry,
    and for a summary stored before usage was kept."""
    if not isinstance(entry, CompactionEntry | BranchSummaryEntry) or entry.usage is None:
        return None
    message = entry_messages(entry)[0]
    assert isinstance(message, CustomMessage)
    return message.model_copy(update={"model": entry.model, "usage": entry.usage})


def context_messages(path: Sequence[SessionEntry]) -> list[AgentMessage]:
    """The messages the model sees for a path: compaction applied, entries projected."""
    return [m for entry in context_entries(path) for m in entry_messages(entry)]


def build_context(path: Sequence[SessionEntry], defaults: SessionConfig) -> SessionContext:
    state = derive_path_state(path, defaults)
    return SessionContext(messages=context_messages(path), **state.model_dump())


_COMPACTION_PREFIX = (
    "The conversation before this point was compacted. Summary of what happened:\n\n"
)
_BRANCH_PREFIX = "The user left another branch of this conversation. Summary of that branch:\n\n"


def _summary(custom_type: str, text: str, entry: SessionEntry) -> CustomMessage:
    return CustomMessage(
        custom_type=custom_type,
        content=[TextContent(text=text)],
        display=False,
        timestamp=entry.timestamp,
    )
