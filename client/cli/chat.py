"""`duragent chat`: a session's chat in the terminal (client/chat/), and the services it
needs, started in the background so that leaving the chat never stops a run."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated

import typer
from filelock import AsyncFileLock

from duragent.client.api import DuragentClient
from duragent.client.chat.link import Link
from duragent.client.cli import command
from duragent.client.cli.command import fail
from duragent.client.cli.views import announce, console
from duragent.client.connection import connect_temporal, temporal_reachable
from duragent.client.errors import DuragentError
from duragent.client.home_temporal import running_home_server
from duragent.client.plugins import load_plugins
from duragent.client.services import live_workers
from duragent.domain.models import UnknownModel, parse_model
from duragent.settings import Settings

START_WAIT_S = 90.0
"""How long a background service may take to answer once started (a worker imports the
model SDKs and every activity first)."""
LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def chat(
    ctx: typer.Context,
    session: Annotated[
        str | None, typer.Argument(help="The session to chat with (default: a new one).")
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(help="A new session of this agent (a duragent.Agent a plugin brings)."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Model (provider:model; a bare name is Claude's) for a new session, or for "
            "SESSION's turns from now on [env DURAGENT_MODEL]."
        ),
    ] = None,
    workspace: Annotated[
        Path | None,
        typer.Option(help="Directory the tools work in (a new session; default: a fresh one)."),
    ] = None,
    name: Annotated[str | None, typer.Option(help="Name for a new session.")] = None,
    theme: Annotated[
        str, typer.Option(help="dark, light, or auto (the terminal's, from COLORFGBG).")
    ] = "auto",
    plugin: command.PluginOption = None,
) -> None:
    """Chat with a session in a full-screen terminal app: the conversation, the running
    tools' output, the header's phase, turn, tokens and cost, and a message box that is
    always open.

    Enter sends: an idle session starts a run, a busy one queues the message (a chip above
    the box: e edit, g guide, d delete; Up from an empty box reaches them). Ctrl+G sends
    guidance to the run now, Ctrl+T steers, Ctrl+F queues a follow-up, Ctrl+J is a new
    line, Ctrl+R goes to an approval, a question or a budget that waits. Esc (or Ctrl+C
    once) stops the run; Ctrl+C twice leaves. /help lists the commands (/model, /compact,
    /tree, /goto, /fork, /cost, /budget, /export).

    Leaving never stops a run: it goes on with the workers. When none is running, a
    worker (and, without TEMPORAL_ADDRESS, this folder's Temporal dev server) is started
    in the background, and stays. `duragent chat SESSION` later, from any terminal that
    reaches the same Temporal and store, shows what happened meanwhile and follows the run.
    With TERM=dumb, or when input or output is not a terminal, it prints `duragent run`'s
    plain lines instead and sends each line read as a message.
    """
    settings = command.with_plugins(ctx.obj, plugin)
    if agent is not None:
        if session is not None:
            fail("--agent starts a new session of the agent: leave out SESSION")
        with command.client_errors():
            load_plugins(settings).agent(agent)
    if model is not None:
        try:
            parse_model(model)
        except UnknownModel as error:
            fail(f"--model: {error}")
    if theme not in ("auto", "dark", "light"):
        fail(f"--theme is dark, light or auto (got {theme!r})")
    if session is not None:
        command.require_session(command.store_client(settings), session)
    plain = os.environ.get("TERM", "") in ("", "dumb") or not (
        sys.stdin.isatty() and sys.stdout.isatty()
    )

    async def main() -> int:
        ready = await background_services(settings)
        link = Link(await DuragentClient.connect(ready))
        if session is None:
            record = await link.create_session(
                agent=agent, model=model, workspace=workspace, name=name
            )
            announce(f"Session {record.id} (workspace {record.workspace})")
        else:
            record = await link.session(session)
            if model is not None:
                await link.set_model(record.id, model)
        if plain:
            from duragent.client.chat.plain import plain_chat

            return await plain_chat(link, record.id, sys.stdin, console, announce)
        from duragent.client.chat.app import ChatApp

        left = await ChatApp(link, record.id, light=_light(theme)).run_async()
        where = left.session_id if left is not None else record.id
        if left is not None and left.run_open:
            announce(f"Left session {where}: its run goes on with the workers.")
        announce(f"Come back: duragent chat {where}")
        return 0

    raise typer.Exit(command.run(main()))


def _light(theme: str) -> bool:
    if theme != "auto":
        return theme == "light"
    # COLORFGBG is "foreground;background" as colour numbers: 7 and 15 are white.
    background = os.environ.get("COLORFGBG", "").rpartition(";")[2]
    return background in ("7", "15")


# Services in the background -------------------------------------------------------------


async def background_services(settings: Settings) -> Settings:
    """Temporal and a worker for the chat: those running are used; missing ones are
    started as processes of their own (their own session: a closed terminal does not stop
    them), which stay when the chat ends, so its runs go on. Yields the settings at
    Temporal. Under a lock of the home: two chats starting at once start one of each."""
    settings.home.mkdir(parents=True, exist_ok=True)
    async with AsyncFileLock(str(settings.home / "chat-services.lock")):
        ready = await _temporal(settings)
        client = await connect_temporal(ready)
        workers = await live_workers(client, ready)
        if workers:
            announce(f"Using the worker{'s' * (len(workers) > 1)} {', '.join(workers)}.")
            return ready
        pid, log = _spawn(ready, "worker", ["worker"])
        announce(
            f"Started a worker in the background (PID {pid}, log {log}): runs go on when "
            f"the chat ends. Stop it with: kill {pid}"
        )
        await _wait_for(lambda: _has_worker(ready), "the worker", log)
        return ready


async def _has_worker(settings: Settings) -> bool:
    return bool(await live_workers(await connect_temporal(settings), settings))


async def _temporal(settings: Settings) -> Settings:
    if settings.home_dev_server:
        running = await running_home_server(settings)
        if running is not None:
            return running
    elif await temporal_reachable(settings):
        return settings
    else:
        host = settings.temporal_address.rpartition(":")[0]
        if settings.temporal_tls_on or host not in LOCAL_HOSTS:
            raise DuragentError(
                f"Temporal at {settings.temporal_address} is not reachable "
                f"(namespace {settings.temporal_namespace})"
            )
    pid, log = _spawn(settings, "dev-server", ["dev-server"])
    announce(f"Started a Temporal dev server in the background (PID {pid}, log {log}).")

    async def answers() -> bool:
        if settings.home_dev_server:  # the record it writes says where it is
            return await running_home_server(settings) is not None
        return await temporal_reachable(settings)

    await _wait_for(answers, "the Temporal dev server", log)
    if settings.home_dev_server:
        found = await running_home_server(settings)
        assert found is not None
        return found
    return settings


def _spawn(settings: Settings, name: str, args: list[str]) -> tuple[int, Path]:
    """`duragent ARGS` in its own session, logging to `<home>/background/NAME.log`; its
    PID is kept beside the log (NAME.pid)."""
    folder = settings.home.resolve() / "background"
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / f"{name}.log"
    env = dict(os.environ)
    env.update(
        DURAGENT_HOME=str(settings.home.resolve()),
        DURAGENT_DATABASE_URL=settings.database_url,
        TEMPORAL_NAMESPACE=settings.temporal_namespace,
        DURAGENT_TASK_QUEUE=settings.task_queue,
    )
    if not settings.home_dev_server:
        env["TEMPORAL_ADDRESS"] = settings.temporal_address
    if "model" in settings.model_fields_set:
        env["DURAGENT_MODEL"] = settings.model
    if settings.plugins:
        env["DURAGENT_PLUGINS"] = ",".join(settings.plugins)
    with open(log_path, "ab") as log:  # the child has its own
        log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} duragent {name}\n".encode())
        log.flush()
        process = subprocess.Popen(
            [sys.executable, "-m", "duragent", *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    (folder / f"{name}.pid").write_text(f"{process.pid}\n")
    return process.pid, log_path


async def _wait_for(check: Callable[[], Awaitable[bool]], what: str, log: Path) -> None:
    deadline = time.monotonic() + START_WAIT_S
    while not await check():
        if time.monotonic() > deadline:
            raise DuragentError(f"{what} did not answer within {START_WAIT_S:.0f} s: see {log}")
        await asyncio.sleep(0.5)
