"""`duragent agents`: the agents the plugins bring (`duragent.Agent`)."""

from __future__ import annotations

import typer
from rich.markup import escape

from duragent.client.cli import command
from duragent.client.cli.views import console
from duragent.client.plugins import load_plugins


def agents(ctx: typer.Context, plugin: command.PluginOption = None) -> None:
    """List the agents the plugins bring: each one's model, output and tools. Start a
    session of one with `duragent run --agent NAME "..."`."""
    settings = command.with_plugins(ctx.obj, plugin)
    with command.client_errors():
        found = load_plugins(settings).agents()
    if not found:
        console.print(
            "No agents. A plugin brings them: duragent.Plugin(agents=[...]), or give an "
            "agent itself with --plugin module:agent."
        )
        return
    for agent in found:
        output = agent.output.type_name if agent.output else "text"
        console.print(
            f"{escape(agent.name)}  model {escape(agent.model or settings.model)}  "
            f"output {escape(output)}  tools {escape(', '.join(agent.tool_names) or 'none')}",
            soft_wrap=True,
        )
