"""`duragent configure`: change a session's config."""

from __future__ import annotations

from typing import Annotated, cast

import typer

from duragent.activities.mcp.names import check_server_names
from duragent.activities.tools import default_tool_names
from duragent.client.api import DuragentClient
from duragent.client.cli import command
from duragent.client.cli.command import SessionArg, fail, require_session, store_client
from duragent.client.cli.views import announce, config_line, console
from duragent.client.services import local_services
from duragent.domain.changes import ConfigUpdate
from duragent.domain.config import (
    QUEUE_MODES,
    THINKING_LEVELS,
    QueueMode,
    ThinkingLevel,
    check_tool_names,
)
from duragent.settings import Settings


def configure(
    ctx: typer.Context,
    session: SessionArg,
    model: Annotated[str | None, typer.Option(help="Model for the next turns.")] = None,
    thinking: Annotated[
        str | None, typer.Option(help="Thinking level: off, minimal, low, medium, high.")
    ] = None,
    tools: Annotated[
        str | None,
        typer.Option(
            help=f"Active tools, comma-separated (empty: none): {', '.join(default_tool_names())}, "
            "and MCP tools (`SERVER__TOOL`)."
        ),
    ] = None,
    system_prompt: Annotated[str | None, typer.Option(help="System prompt.")] = None,
    steering_mode: Annotated[
        str | None, typer.Option(help="Steering queue mode: all or one-at-a-time.")
    ] = None,
    follow_up_mode: Annotated[
        str | None, typer.Option(help="Follow-up queue mode: all or one-at-a-time.")
    ] = None,
    mcp_servers: Annotated[
        str | None,
        typer.Option(
            help="MCP servers the session uses, comma-separated (empty: none), among those "
            "in the workers' config file [env DURAGENT_MCP_CONFIG]; their tools are "
            "`SERVER__TOOL`."
        ),
    ] = None,
) -> None:
    """Change a session's config. A running run uses it from its next turn."""
    settings: Settings = ctx.obj
    active_tools = _names(tools)
    servers = _names(mcp_servers)
    # Bad values are refused here, before any service starts.
    _choose("--thinking", thinking, THINKING_LEVELS)
    _choose("--steering-mode", steering_mode, QUEUE_MODES)
    _choose("--follow-up-mode", follow_up_mode, QUEUE_MODES)
    store = store_client(settings)
    if active_tools is not None:
        try:
            check_tool_names(active_tools, store.known_tools())
        except ValueError as error:
            fail(f"--tools: {error}")
    if servers is not None:
        try:
            check_server_names(servers, store.mcp_servers())
        except ValueError as error:
            fail(f"--mcp-servers: {error}")
    # Checked above (`_choose`): the strings are the settings' own values.
    fields = ConfigUpdate(
        model=model,
        thinking_level=cast(ThinkingLevel | None, thinking),
        active_tools=active_tools,
        system_prompt=system_prompt,
        steering_mode=cast(QueueMode | None, steering_mode),
        follow_up_mode=cast(QueueMode | None, follow_up_mode),
        mcp_servers=servers,
    )
    require_session(store, session)

    async def main() -> None:
        async with local_services(settings, announce) as ready:
            client = await DuragentClient.connect(ready)
            await client.config.update(session, **fields)  # None: left as it is
            console.print(config_line((await client.sessions.status(session)).config))

    command.run(main())


def _names(listed: str | None) -> list[str] | None:
    return None if listed is None else [n.strip() for n in listed.split(",") if n.strip()]


def _choose(option: str, value: str | None, allowed: tuple[str, ...]) -> None:
    if value is not None and value not in allowed:
        fail(f"{option} must be one of {', '.join(allowed)} (got {value!r})")
