"""Built-in tools the model can call: read, write, edit, bash, ls, grep, find, delegate,
ask_user (offered only where a session's active tools name it).

Plain async Python with no workflow or activity imports; the caller runs them wherever it
likes (an activity, a test) through a `ToolRegistry`. Beside one module per tool:
`contract` (what a tool is: `Tool`, `ToolContext`, `ToolSource`, `ToolInputError`),
`registry` (`ToolRegistry`), `schema` (argument schemas and validation messages for the
model), `paths` (paths kept inside the workspace) and `truncation` (long output cut to a
budget). What a plugin or a tool needs is importable from here.
"""

from __future__ import annotations

from typing import Any

from duragent.activities.tools.ask_user import AskUserTool
from duragent.activities.tools.bash import BashTool, process_group_alive, running_process_groups
from duragent.activities.tools.contract import (
    Tool,
    ToolContext,
    ToolInputError,
    ToolProvider,
    ToolSource,
)
from duragent.activities.tools.delegate import DelegateTool
from duragent.activities.tools.edit import EditTool
from duragent.activities.tools.find import FindTool
from duragent.activities.tools.function import (
    FunctionTool,
    ToolDecorator,
    function_tool,
    tool,
    tools_of,
)
from duragent.activities.tools.grep import GrepTool
from duragent.activities.tools.ls import LsTool
from duragent.activities.tools.read import ReadTool
from duragent.activities.tools.registry import ToolRegistry
from duragent.activities.tools.write import WriteTool

__all__ = [
    "AskUserTool",
    "BashTool",
    "DelegateTool",
    "EditTool",
    "FindTool",
    "FunctionTool",
    "GrepTool",
    "LsTool",
    "ReadTool",
    "Tool",
    "ToolContext",
    "ToolDecorator",
    "ToolInputError",
    "ToolProvider",
    "ToolRegistry",
    "ToolSource",
    "WriteTool",
    "default_tool_names",
    "default_tools",
    "function_tool",
    "process_group_alive",
    "running_process_groups",
    "tool",
    "tools_of",
]


def default_tools(bash: BashTool | None = None) -> list[Tool[Any]]:
    """Fresh instances of the built-in tools, in the order the model sees them; `bash` as
    given (its environment and sandbox), or one with the default allow-listed environment."""
    return [
        ReadTool(),
        WriteTool(),
        EditTool(),
        bash or BashTool(),
        LsTool(),
        GrepTool(),
        FindTool(),
        DelegateTool(),
        AskUserTool(),
    ]


def default_tool_names() -> list[str]:
    """The built-in tools' names: what a session's active tools may name (clients check
    against them, so there is one list: the tools themselves)."""
    return [tool.name for tool in default_tools()]
