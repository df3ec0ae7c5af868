"""duragent: a durable, steerable agent harness for Python on Temporal.

The public API is what `__all__` lists, documented in docs/PYTHON.md; everything else is
importable but not promised. Names load on first use: `import duragent` stays cheap (the
CLI starts fast, and Temporal's workflow sandbox, which imports this package's parent
module for every workflow module it loads, imports nothing heavy through it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from duragent.activities.extensions import (
        BlockToolCall,
        Extension,
        ToolCallContext,
        ToolResultOverride,
        TurnContext,
    )
    from duragent.activities.mcp.names import KnownToolNames
    from duragent.activities.tools import (
        FunctionTool,
        Tool,
        ToolContext,
        ToolInputError,
        ToolProvider,
        ToolRegistry,
        ToolSource,
        tool,
        tools_of,
    )
    from duragent.client.agent import Agent, AgentRunFailed, AgentRunResult
    from duragent.client.agent_session import AgentSession
    from duragent.client.api import DuragentClient, RunHandle, SessionStatus
    from duragent.client.display import SessionPage
    from duragent.client.errors import (
        AnswerNotRecorded,
        AnswerRefused,
        ApprovalNotRecorded,
        ApprovalRefused,
        DuragentError,
        EntryNotInSession,
        InputTooLarge,
        InvalidChange,
        InvalidHost,
        InvalidPrompt,
        InvalidWorkspace,
        QueueItemNotFound,
        QueueItemNotPending,
        ResourceNotFound,
        SessionBusy,
        SessionIdle,
        SessionNotFound,
        TemporalUnreachable,
        WorkerNotAnswering,
        WorkspaceNotAllowed,
    )
    from duragent.client.local import local
    from duragent.client.plugins import AgentNotFound, Plugin, PluginError
    from duragent.client.session_files import Imported
    from duragent.client.temporal_plugin import TemporalPlugin
    from duragent.client.triggers import Delivered, TriggerWithSecret
    from duragent.client.workers import build_worker, run_worker, tool_registry
    from duragent.client.workspaces import WorkspacePolicy
    from duragent.domain.agents import OutputSpec
    from duragent.domain.approvals import (
        ApprovalOutcome,
        ApprovalPolicy,
        ApprovalRule,
        PendingApproval,
    )
    from duragent.domain.budgets import Budget, BudgetView, Reached, Scope, Spent
    from duragent.domain.changes import ConfigUpdate
    from duragent.domain.compaction import CompactionSettings
    from duragent.domain.config import QueueMode, SessionConfig, ThinkingLevel
    from duragent.domain.cost import Cost, ModelCost, SessionCosts, TurnCost
    from duragent.domain.entries import (
        ActiveToolsChangeEntry,
        ApprovalPolicyChangeEntry,
        BranchSummaryEntry,
        CompactionEntry,
        CustomEntry,
        CustomMessageEntry,
        LabelEntry,
        LeafEntry,
        MessageEntry,
        ModelChangeEntry,
        SessionEntry,
        SessionInfoEntry,
        ThinkingLevelChangeEntry,
    )
    from duragent.domain.guidance import GuidanceIntent, GuidanceItem
    from duragent.domain.hooks import NextTurn, TurnSummary, WorkflowHooks
    from duragent.domain.hosts import MoveResult
    from duragent.domain.messages import (
        AgentMessage,
        AssistantMessage,
        CustomMessage,
        ImageContent,
        ScheduledMark,
        TextContent,
        ThinkingContent,
        ToolCall,
        ToolResultMessage,
        Usage,
        UserMessage,
    )
    from duragent.domain.questions import AnswerOutcome, PendingQuestion
    from duragent.domain.queues import QueuedMessage
    from duragent.domain.resources import ResourceKind
    from duragent.domain.runs import Phase, RunOptions, RunResult, RunView
    from duragent.domain.schedules import (
        BusyPolicy,
        DeliverScheduledPrompt,
        FiringOutcome,
        RecentFiring,
        ScheduleFiring,
        ScheduleView,
    )
    from duragent.domain.session_file_checks import ImportNote
    from duragent.domain.tools import ToolResult, ToolTraits
    from duragent.domain.tree_ops import CompactResult, NavigateResult
    from duragent.settings import SettingError, Settings
    from duragent.store.db import Database
    from duragent.store.metrics import StoreFigures
    from duragent.store.records import (
        DisplayMessage,
        QueueItem,
        RunRecord,
        ScheduleRecord,
        SessionRecord,
        StoredEvent,
        TriggerRecord,
    )

_WHERE = {
    # the client
    "DuragentClient": "duragent.client.api",
    "RunHandle": "duragent.client.api",
    "SessionStatus": "duragent.client.api",
    # the worker
    "build_worker": "duragent.client.workers",
    "run_worker": "duragent.client.workers",
    "tool_registry": "duragent.client.workers",
    "TemporalPlugin": "duragent.client.temporal_plugin",
    # agents
    "Agent": "duragent.client.agent",
    "AgentRunResult": "duragent.client.agent",
    "AgentRunFailed": "duragent.client.agent",
    "AgentSession": "duragent.client.agent_session",
    "AgentNotFound": "duragent.client.plugins",
    "OutputSpec": "duragent.domain.agents",
    "local": "duragent.client.local",
    # settings
    "Settings": "duragent.settings",
    "SettingError": "duragent.settings",
    # tools
    "tool": "duragent.activities.tools",
    "tools_of": "duragent.activities.tools",
    "FunctionTool": "duragent.activities.tools",
    "Tool": "duragent.activities.tools",
    "ToolContext": "duragent.activities.tools",
    "ToolInputError": "duragent.activities.tools",
    "ToolProvider": "duragent.activities.tools",
    "ToolSource": "duragent.activities.tools",
    "ToolRegistry": "duragent.activities.tools",
    "ToolResult": "duragent.domain.tools",
    "ToolTraits": "duragent.domain.tools",
    # extensions and workflow hooks
    "Extension": "duragent.activities.extensions",
    "TurnContext": "duragent.activities.extensions",
    "ToolCallContext": "duragent.activities.extensions",
    "BlockToolCall": "duragent.activities.extensions",
    "ToolResultOverride": "duragent.activities.extensions",
    "WorkflowHooks": "duragent.domain.hooks",
    "TurnSummary": "duragent.domain.hooks",
    "NextTurn": "duragent.domain.hooks",
    # plugins
    "Plugin": "duragent.client.plugins",
    "PluginError": "duragent.client.plugins",
    # what sessions are given
    "ApprovalPolicy": "duragent.domain.approvals",
    "ApprovalRule": "duragent.domain.approvals",
    "Budget": "duragent.domain.budgets",
    # errors
    "DuragentError": "duragent.client.errors",
    "AnswerNotRecorded": "duragent.client.errors",
    "AnswerRefused": "duragent.client.errors",
    "ApprovalNotRecorded": "duragent.client.errors",
    "ApprovalRefused": "duragent.client.errors",
    "EntryNotInSession": "duragent.client.errors",
    "InputTooLarge": "duragent.client.errors",
    "InvalidChange": "duragent.client.errors",
    "InvalidHost": "duragent.client.errors",
    "InvalidPrompt": "duragent.client.errors",
    "InvalidWorkspace": "duragent.client.errors",
    "QueueItemNotFound": "duragent.client.errors",
    "QueueItemNotPending": "duragent.client.errors",
    "ResourceNotFound": "duragent.client.errors",
    "SessionBusy": "duragent.client.errors",
    "SessionIdle": "duragent.client.errors",
    "SessionNotFound": "duragent.client.errors",
    "TemporalUnreachable": "duragent.client.errors",
    "WorkerNotAnswering": "duragent.client.errors",
    "WorkspaceNotAllowed": "duragent.client.errors",
    # sessions and runs
    "RunResult": "duragent.domain.runs",
    "RunOptions": "duragent.domain.runs",
    "RunView": "duragent.domain.runs",
    "SessionRecord": "duragent.store.records",
    "RunRecord": "duragent.store.records",
    "StoredEvent": "duragent.store.records",
    "QueueItem": "duragent.store.records",
    "DisplayMessage": "duragent.store.records",
    "ScheduleRecord": "duragent.store.records",
    "TriggerRecord": "duragent.store.records",
    "Phase": "duragent.domain.runs",
    "ResourceKind": "duragent.domain.resources",
    "StoreFigures": "duragent.store.metrics",
    "Database": "duragent.store.db",
    "SessionConfig": "duragent.domain.config",
    "ConfigUpdate": "duragent.domain.changes",
    "ThinkingLevel": "duragent.domain.config",
    "QueueMode": "duragent.domain.config",
    "CompactionSettings": "duragent.domain.compaction",
    "CompactResult": "duragent.domain.tree_ops",
    "NavigateResult": "duragent.domain.tree_ops",
    "MoveResult": "duragent.domain.hosts",
    "WorkspacePolicy": "duragent.client.workspaces",
    "SessionPage": "duragent.client.display",
    "Imported": "duragent.client.session_files",
    "ImportNote": "duragent.domain.session_file_checks",
    "KnownToolNames": "duragent.activities.mcp.names",
    "QueuedMessage": "duragent.domain.queues",
    "GuidanceItem": "duragent.domain.guidance",
    "GuidanceIntent": "duragent.domain.guidance",
    # the session tree's entries
    "SessionEntry": "duragent.domain.entries",
    "MessageEntry": "duragent.domain.entries",
    "ModelChangeEntry": "duragent.domain.entries",
    "ThinkingLevelChangeEntry": "duragent.domain.entries",
    "ActiveToolsChangeEntry": "duragent.domain.entries",
    "ApprovalPolicyChangeEntry": "duragent.domain.entries",
    "CompactionEntry": "duragent.domain.entries",
    "BranchSummaryEntry": "duragent.domain.entries",
    "CustomEntry": "duragent.domain.entries",
    "CustomMessageEntry": "duragent.domain.entries",
    "LabelEntry": "duragent.domain.entries",
    "LeafEntry": "duragent.domain.entries",
    "SessionInfoEntry": "duragent.domain.entries",
    # messages
    "AgentMessage": "duragent.domain.messages",
    "UserMessage": "duragent.domain.messages",
    "AssistantMessage": "duragent.domain.messages",
    "ToolResultMessage": "duragent.domain.messages",
    "CustomMessage": "duragent.domain.messages",
    "TextContent": "duragent.domain.messages",
    "ImageContent": "duragent.domain.messages",
    "ThinkingContent": "duragent.domain.messages",
    "ToolCall": "duragent.domain.messages",
    "ScheduledMark": "duragent.domain.messages",
    "Usage": "duragent.domain.messages",
    # costs, budgets, approvals, questions
    "Cost": "duragent.domain.cost",
    "ModelCost": "duragent.domain.cost",
    "SessionCosts": "duragent.domain.cost",
    "TurnCost": "duragent.domain.cost",
    "BudgetView": "duragent.domain.budgets",
    "Reached": "duragent.domain.budgets",
    "Spent": "duragent.domain.budgets",
    "Scope": "duragent.domain.budgets",
    "ApprovalOutcome": "duragent.domain.approvals",
    "PendingApproval": "duragent.domain.approvals",
    "AnswerOutcome": "duragent.domain.questions",
    "PendingQuestion": "duragent.domain.questions",
    # triggers and schedules
    "TriggerWithSecret": "duragent.client.triggers",
    "Delivered": "duragent.client.triggers",
    "ScheduleView": "duragent.domain.schedules",
    "RecentFiring": "duragent.domain.schedules",
    "FiringOutcome": "duragent.domain.schedules",
    "ScheduleFiring": "duragent.domain.schedules",
    "DeliverScheduledPrompt": "duragent.domain.schedules",
    "BusyPolicy": "duragent.domain.schedules",
}

__all__ = [
    "ActiveToolsChangeEntry",
    "Agent",
    "AgentMessage",
    "AgentNotFound",
    "AgentRunFailed",
    "AgentRunResult",
    "AgentSession",
    "AnswerNotRecorded",
    "AnswerOutcome",
    "AnswerRefused",
    "ApprovalNotRecorded",
    "ApprovalOutcome",
    "ApprovalPolicy",
    "ApprovalPolicyChangeEntry",
    "ApprovalRefused",
    "ApprovalRule",
    "AssistantMessage",
    "BlockToolCall",
    "BranchSummaryEntry",
    "Budget",
    "BudgetView",
    "BusyPolicy",
    "CompactResult",
    "CompactionEntry",
    "CompactionSettings",
    "ConfigUpdate",
    "Cost",
    "CustomEntry",
    "CustomMessage",
    "CustomMessageEntry",
    "Database",
    "DeliverScheduledPrompt",
    "Delivered",
    "DisplayMessage",
    "DuragentClient",
    "DuragentError",
    "EntryNotInSession",
    "Extension",
    "FiringOutcome",
    "FunctionTool",
    "GuidanceIntent",
    "GuidanceItem",
    "ImageContent",
    "ImportNote",
    "Imported",
    "InputTooLarge",
    "InvalidChange",
    "InvalidHost",
    "InvalidPrompt",
    "InvalidWorkspace",
    "KnownToolNames",
    "LabelEntry",
    "LeafEntry",
    "MessageEntry",
    "ModelChangeEntry",
    "ModelCost",
    "MoveResult",
    "NavigateResult",
    "NextTurn",
    "OutputSpec",
    "PendingApproval",
    "PendingQuestion",
    "Phase",
    "Plugin",
    "PluginError",
    "QueueItem",
    "QueueItemNotFound",
    "QueueItemNotPending",
    "QueueMode",
    "QueuedMessage",
    "Reached",
    "RecentFiring",
    "ResourceKind",
    "ResourceNotFound",
    "RunHandle",
    "RunOptions",
    "RunRecord",
    "RunResult",
    "RunView",
    "ScheduleFiring",
    "ScheduleRecord",
    "ScheduleView",
    "ScheduledMark",
    "Scope",
    "SessionBusy",
    "SessionConfig",
    "SessionCosts",
    "SessionEntry",
    "SessionIdle",
    "SessionInfoEntry",
    "SessionNotFound",
    "SessionPage",
    "SessionRecord",
    "SessionStatus",
    "SettingError",
    "Settings",
    "Spent",
    "StoreFigures",
    "StoredEvent",
    "TemporalPlugin",
    "TemporalUnreachable",
    "TextContent",
    "ThinkingContent",
    "ThinkingLevel",
    "ThinkingLevelChangeEntry",
    "Tool",
    "ToolCall",
    "ToolCallContext",
    "ToolContext",
    "ToolInputError",
    "ToolProvider",
    "ToolRegistry",
    "ToolResult",
    "ToolResultMessage",
    "ToolResultOverride",
    "ToolSource",
    "ToolTraits",
    "TriggerRecord",
    "TriggerWithSecret",
    "TurnContext",
    "TurnCost",
    "TurnSummary",
    "Usage",
    "UserMessage",
    "WorkerNotAnswering",
    "WorkflowHooks",
    "WorkspaceNotAllowed",
    "WorkspacePolicy",
    "__version__",
    "build_worker",
    "local",
    "run_worker",
    "tool",
    "tool_registry",
    "tools_of",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("duragent")
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'duragent' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__version__: str
