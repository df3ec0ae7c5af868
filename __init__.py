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
    from duragent.client.api import DuragentClient, RunHandle, SessionStatus
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
    from duragent.client.plugins import Plugin, PluginError
    from duragent.client.temporal_plugin import TemporalPlugin
    from duragent.client.workers import build_worker, run_worker, tool_registry
    from duragent.domain.approvals import ApprovalPolicy, ApprovalRule
    from duragent.domain.budgets import Budget
    from duragent.domain.hooks import NextTurn, TurnSummary, WorkflowHooks
    from duragent.domain.tools import ToolResult, ToolTraits
    from duragent.settings import SettingError, Settings

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
}

__all__ = [
    "AnswerNotRecorded",
    "AnswerRefused",
    "ApprovalNotRecorded",
    "ApprovalPolicy",
    "ApprovalRefused",
    "ApprovalRule",
    "BlockToolCall",
    "Budget",
    "DuragentClient",
    "DuragentError",
    "EntryNotInSession",
    "Extension",
    "FunctionTool",
    "InputTooLarge",
    "InvalidChange",
    "InvalidHost",
    "InvalidPrompt",
    "InvalidWorkspace",
    "NextTurn",
    "Plugin",
    "PluginError",
    "QueueItemNotFound",
    "QueueItemNotPending",
    "ResourceNotFound",
    "RunHandle",
    "SessionBusy",
    "SessionIdle",
    "SessionNotFound",
    "SessionStatus",
    "SettingError",
    "Settings",
    "TemporalPlugin",
    "TemporalUnreachable",
    "Tool",
    "ToolCallContext",
    "ToolContext",
    "ToolInputError",
    "ToolProvider",
    "ToolRegistry",
    "ToolResult",
    "ToolResultOverride",
    "ToolSource",
    "ToolTraits",
    "TurnContext",
    "TurnSummary",
    "WorkerNotAnswering",
    "WorkflowHooks",
    "WorkspaceNotAllowed",
    "__version__",
    "build_worker",
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
