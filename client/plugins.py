"""Plugins: tools, hooks, MCP servers and defaults, bundled for the stock commands to load.

A `Plugin` is a plain value a package exports. Workers and clients load the same plugins
(`load_plugins`): those installed packages register under the entry point group
`duragent.plugins`, then each `module:attr` of `Settings.plugins` (`DURAGENT_PLUGINS`,
`--plugin`). Workers serve the plugins' tools, hooks and MCP servers; clients know the
tools' names (so `configure --tools` accepts them) and apply the defaults to new sessions.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from duragent.activities.extensions import Extension
from duragent.activities.mcp.config import McpConfig, ServerConfig
from duragent.activities.tools import FunctionTool, Tool, function_tool
from duragent.activities.tools.function import unbound_method
from duragent.client.errors import DuragentError
from duragent.domain.hooks import WorkflowHooks
from duragent.settings import Settings

if TYPE_CHECKING:
    from duragent.client.agent import Agent

ENTRY_POINT_GROUP = "duragent.plugins"


class PluginError(DuragentError):
    """A plugin that cannot be loaded or is not a `duragent.Plugin`; the message names it."""


class AgentNotFound(DuragentError):
    """No plugin the workers and this client load has an agent of that name."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        listed = ", ".join(known) or "none (give one with --plugin module:agent)"
        super().__init__(f"no agent named {name!r}; the agents are: {listed}")
        self.name = name


@dataclass(frozen=True)
class Plugin:
    """What a plugin brings. Every field is optional but the name.

    - `tools`: `Tool` instances, or functions (made tools as `@duragent.tool` makes them).
    - `tools_active`: whether its tools are active in sessions that do not name their
      active tools (the default); False: offered only to sessions that name them.
    - `extensions`: hooks run in activities (`duragent.Extension`).
    - `workflow_hooks`: loop decisions run in the workflow (`duragent.WorkflowHooks`
      subclasses, or their `"module:Class"` paths).
    - `mcp_servers`: MCP servers by name, as in the MCP config file.
    - `system_prompt`, `model`, `active_tools`: defaults for new sessions (a later
      plugin's win; what the caller gives wins over all).
    - `agents`: `duragent.Agent`s; sessions made from one (`sessions.create(agent=...)`,
      `duragent run --agent`) get its model, instructions and tools; its tools, its
      output tool and its MCP servers are served by the workers, offered only to them.
    """

    name: str
    tools: Sequence[Tool[Any] | Callable[..., Any]] = ()
    tools_active: bool = True
    extensions: Sequence[Extension] = ()
    workflow_hooks: Sequence[type[WorkflowHooks] | str] = ()
    mcp_servers: Mapping[str, Any] = field(default_factory=dict)
    system_prompt: str | None = None
    model: str | None = None
    active_tools: Sequence[str] | None = None
    agents: Sequence[Agent[Any, Any]] = ()


@dataclass(frozen=True)
class Plugins:
    """The plugins a process loaded, in load order, and what they add up to."""

    items: tuple[Plugin, ...] = ()

    @cached_property
    def _tools(self) -> list[tuple[bool, Tool[Any]]]:
        """Each tool once (an agent's may be another's or a plugin's too), and whether it
        is active in sessions that do not name their tools."""
        found: dict[str, tuple[bool, Tool[Any]]] = {}

        def add(tool: Tool[Any], active: bool, where: str) -> None:
            seen = found.get(tool.name)
            if seen is None:
                found[tool.name] = (active, tool)
            elif not _same_tool(seen[1], tool):
                raise PluginError(f"{where}: tool {tool.name!r} is defined twice")

        for plugin in self.items:
            for tool in _tools_of(plugin):
                add(tool, plugin.tools_active, f"plugin {plugin.name!r}")
            for agent in plugin.agents:
                for tool in agent.own_tools():
                    add(tool, False, f"agent {agent.name!r}")
        return list(found.values())

    def tools(self) -> list[Tool[Any]]:
        return [tool for _, tool in self._tools]

    def tool_names(self) -> list[str]:
        return [tool.name for tool in self.tools()]

    def opt_in_tools(self) -> list[str]:
        """Tools offered only to sessions that name them (plugins with `tools_active=False`,
        and agents' tools)."""
        return [tool.name for active, tool in self._tools if not active]

    def agents_servers(self) -> list[str]:
        """The MCP servers agents define: used only by sessions that name them."""
        return [name for agent in self.agents() for name in agent.mcp_definitions]

    def agents(self) -> list[Agent[Any, Any]]:
        """The agents of every plugin, by name (two of one name are refused on loading)."""
        return [agent for plugin in self.items for agent in plugin.agents]

    def agent(self, name: str) -> Agent[Any, Any]:
        """The agent `name`, or `AgentNotFound` listing the agents there are."""
        for agent in self.agents():
            if agent.name == name:
                return agent
        raise AgentNotFound(name, [agent.name for agent in self.agents()])

    def extensions(self) -> list[Extension]:
        found = [extension for plugin in self.items for extension in plugin.extensions]
        for plugin in self.items:
            found.extend(_HookPath(_hook_path(hooks)) for hooks in plugin.workflow_hooks)
        return found

    def mcp_config(self, base: McpConfig | None = None) -> McpConfig:
        """`base` (the MCP config file's servers) with the plugins' servers added; a name
        two of them use is refused."""
        servers: dict[str, Any] = dict(base.servers) if base is not None else {}
        for plugin in self.items:
            defined = [plugin.mcp_servers, *(agent.mcp_definitions for agent in plugin.agents)]
            for name, server in (item for servers in defined for item in servers.items()):
                if name in servers:
                    raise PluginError(
                        f"plugin {plugin.name!r}: MCP server {name!r} is defined twice"
                    )
                try:
                    servers[name] = _SERVER.validate_python(server)
                except ValidationError as exc:
                    raise PluginError(
                        f"plugin {plugin.name!r}: MCP server {name!r}: {_first_error(exc)}"
                    ) from None
        try:
            return McpConfig(servers=servers)
        except ValidationError as exc:
            raise PluginError(f"plugins' MCP servers: {_first_error(exc)}") from None

    def default(self, name: str) -> Any:
        """The last plugin's default for `name` (system_prompt, model, active_tools)."""
        for plugin in reversed(self.items):
            value = getattr(plugin, name)
            if value is not None:
                return value
        return None


_SERVER: TypeAdapter[Any] = TypeAdapter(ServerConfig)


class _HookPath(Extension):
    """A plugin's workflow hooks, carried as an extension with nothing else."""

    def __init__(self, path: str) -> None:
        self.name = f"workflow hooks {path}"
        self.workflow_hooks = path


def _hook_path(hooks: type[WorkflowHooks] | str) -> str:
    if isinstance(hooks, str):
        return hooks
    return f"{hooks.__module__}:{hooks.__qualname__}"


def _same_tool(one: Tool[Any], other: Tool[Any]) -> bool:
    """The same tool given twice (one object, or one function made a tool twice)."""
    if one is other:
        return True
    if isinstance(one, FunctionTool) and isinstance(other, FunctionTool):
        return type(one).function is type(other).function
    return False


def _tools_of(plugin: Plugin) -> list[Tool[Any]]:
    tools: list[Tool[Any]] = []
    for item in plugin.tools:
        if isinstance(item, FunctionTool) and item.unbound:
            raise PluginError(f"plugin {plugin.name!r}: {unbound_method(item)}")
        if isinstance(item, Tool):
            tools.append(item)
        elif callable(item):
            try:
                tools.append(function_tool(item))
            except TypeError as exc:
                raise PluginError(f"plugin {plugin.name!r}: {exc}") from None
        else:
            raise PluginError(f"plugin {plugin.name!r}: {item!r} is neither a Tool nor a function")
    return tools


def _first_error(exc: ValidationError) -> str:
    error = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else error["msg"]


def load_plugin(path: str) -> Plugin:
    """The `Plugin` at `module:attr` (a Plugin, or a function of no arguments returning
    one); `PluginError` naming the path and what is wrong, in one line."""
    module_name, colon, attr = path.partition(":")
    if not colon or not module_name or not attr:
        raise PluginError(f"plugin {path!r}: give it as module:attribute")
    _import_from_working_directory()
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise PluginError(
            f"plugin {path!r}: cannot import {module_name}: {_one_line(exc)}"
        ) from None
    try:
        found: Any = module
        for part in attr.split("."):
            found = getattr(found, part)
    except AttributeError:
        raise PluginError(f"plugin {path!r}: {module_name} has no {attr}") from None
    return as_plugin(found, path)


def _import_from_working_directory() -> None:
    """Put the working directory first on the import path: a user's `mytools.py` in the
    project folder loads as `--plugin mytools:plugin` without PYTHONPATH=. (as
    `python -m` finds it, and uvicorn's `--app-dir`, '.' by default)."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


def as_plugin(found: Any, where: str) -> Plugin:
    """`found` as a `Plugin`: a plugin as it is, an agent as the plugin of its own
    (`Agent.plugin`), a function of no arguments as what it returns; else `PluginError`."""
    from duragent.client.agent import Agent

    if inspect.isfunction(found):  # a factory: a plugin made when it is loaded
        try:
            found = found()
        except Exception as exc:
            raise PluginError(
                f"plugin {where!r} failed: {type(exc).__name__}: {_one_line(exc)}"
            ) from None
    if isinstance(found, Agent):
        return found.plugin
    if not isinstance(found, Plugin):
        kind = f"the class {found.__name__}" if isinstance(found, type) else type(found).__name__
        raise PluginError(f"plugin {where!r} is {kind}, not a duragent.Plugin or Agent")
    return found


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def installed_plugins() -> list[tuple[str, Plugin]]:
    """The plugins installed packages register (entry point group `duragent.plugins`)."""
    loaded = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        where = f"{point.name} = {point.value}"
        try:
            found = point.load()
        except Exception as exc:
            raise PluginError(f"plugin {where!r}: cannot load it: {_one_line(exc)}") from None
        loaded.append((point.value, as_plugin(found, where)))
    return loaded


def load_plugins(settings: Settings, extra: Iterable[Plugin | Agent[Any, Any]] = ()) -> Plugins:
    """The installed plugins, then those `settings.plugins` names, then `extra` (plugins
    or agents); each
    once (by its path), and no two with one name."""
    by_path: dict[str, Plugin] = dict(installed_plugins())
    for path in settings.plugins:
        if path not in by_path:
            by_path[path] = load_plugin(path)
    plugins = [*by_path.values(), *(as_plugin(item, repr(item)) for item in extra)]
    names: dict[str, Plugin] = {}
    for plugin in plugins:
        if plugin.name in names and names[plugin.name] is not plugin:
            raise PluginError(f"two plugins are named {plugin.name!r}")
        names[plugin.name] = plugin
    unique = {id(plugin): plugin for plugin in plugins}  # one object loaded twice: once
    agents: dict[str, Any] = {}
    for agent in (agent for plugin in unique.values() for agent in plugin.agents):
        if agents.setdefault(agent.name, agent) is not agent:
            raise PluginError(f"two agents are named {agent.name!r}")
    return Plugins(tuple(unique.values()))
