"""`duragent tools`: the tools a session can be given, as the workers of these settings
and plugins serve them."""

from __future__ import annotations

import typer
from rich.markup import escape

from duragent.client.cli import command
from duragent.client.cli.views import console


def tools(ctx: typer.Context, plugin: command.PluginOption = None) -> None:
    """List the tools a session can be given (`configure --tools`): the built-in ones, the
    plugins' (opt-in: offered only to sessions that name them) and the MCP servers' (their
    tools are listed by the workers at run time, as SERVER__TOOL)."""
    from duragent.activities.mcp.config import load_config
    from duragent.activities.tools import default_tools
    from duragent.client.plugins import load_plugins

    settings = command.with_plugins(ctx.obj, plugin)
    with command.client_errors():
        plugins = load_plugins(settings)
        file = load_config(settings.mcp_config) if settings.mcp_config else None
        servers = list(plugins.mcp_config(file).servers)
    opt_in = set(plugins.opt_in_tools())
    rows = [
        (tool.name, "built-in, opt-in" if tool.opt_in else "built-in", tool.description)
        for tool in default_tools()
    ]
    rows += [
        (tool.name, "plugin, opt-in" if tool.name in opt_in else "plugin", tool.description)
        for tool in plugins.tools()
    ]
    width = max(len(name) for name, _, _ in rows)
    for name, kind, description in rows:
        line = f"{escape(name.ljust(width))}  {kind:<16}  {escape(_first_sentence(description))}"
        console.print(line, soft_wrap=True)
    for server in servers:
        console.print(f"{escape(server)}__*  MCP server  (its tools are listed at run time)")


def _first_sentence(description: str) -> str:
    """What a description's first sentence says (the model reads the whole of it)."""
    text = " ".join(description.split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]
