"""What the tests share: a real dev server, a store, the offline model, workers.

`Stack` bundles one test's parts. Workers run in-process (same event loop) or as real
child processes that a test can SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from postgres_server import new_database
from processes import REPO as REPO  # where the tests find the repository
from processes import WORKER_ARGS, kill_group, spawn_python, stack_env
from temporalio.client import Client
from temporalio.worker import Worker
from wire import user_texts as user_texts  # the tests' way to read a request's user text

from duragent.activities.models.clients import ModelClients
from duragent.client.api import DuragentClient
from duragent.domain.entries import MessageEntry, SessionEntry
from duragent.domain.messages import AssistantMessage, ToolResultMessage
from duragent.domain.models import parse_model
from duragent.offline_model import WIRE_MODELS, OfflineModelServer, Script
from duragent.offline_model.in_process import scripted_clients
from duragent.settings import Settings
from duragent.store.db import Database
from duragent.worker import build_worker


@dataclass
class Stack:
    settings: Settings
    db: Database
    temporal: Client
    model: OfflineModelServer
    client: DuragentClient
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    models: ModelClients | None = None
    """The script played in-process (`IN_PROCESS_MODEL`), the clients its in-process
    workers ask the model through; None: they ask `model` over HTTP."""

    def heartbeat_every(self, timeout_s: float) -> None:
        """Calls of runs started from now on (and workers spawned) get this heartbeat
        timeout: for the tests about heartbeats (what a heartbeat carries, how soon a
        lost call moves on without a lease)."""
        self.settings = self.settings.model_copy(update={"heartbeat_timeout_s": timeout_s})
        self.client.settings = self.settings

    def worker(self, **kwargs: Any) -> Worker:
        """An in-process worker: `async with stack.worker():`."""
        if self.models is not None:
            kwargs.setdefault("models", self.models)
        return build_worker(self.temporal, self.db, self.settings, **kwargs)

    def env(self) -> dict[str, str]:
        """The environment of the stack's processes (spawned workers, the CLI): they
        reach the model over HTTP, so an in-process stack's server starts now."""
        if not self.model.running:
            self.model.start()
            url = self.model.base_url
            self.settings = self.settings.model_copy(
                update={"anthropic_base_url": url, "offline_model_url": url}
            )
            self.client.settings = self.settings
        return stack_env(self.settings, self.model.base_url)

    def spawn_worker(
        self, env: dict[str, str] | None = None, name: str | None = None
    ) -> subprocess.Popen[bytes]:
        """A worker in its own process (its own process group), for crash tests, with
        `env` on top of the stack's environment; its output goes to `<name>.log`."""
        name = name or f"worker-{len(self.processes)}"
        with open(self.settings.home / f"{name}.log", "wb") as log:  # the child has its own
            process = spawn_python(WORKER_ARGS, {**self.env(), **(env or {})}, log)
        self.processes.append(process)
        return process

    async def cli(self, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        """The real `duragent` command against this stack, 200 columns wide (with `env`
        on top of the stack's environment): its exit code, stdout and stderr."""
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "duragent.client.cli",
            *args,
            cwd=REPO,
            env={**self.env(), "COLUMNS": "200", **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = await process.communicate()
        return await process.wait(), out.decode(), err.decode()

    async def cli_ok(self, *args: str) -> str:
        """The real `duragent` command's output; it must succeed."""
        code, out, err = await self.cli(*args)
        assert code == 0, err
        return out

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        """SIGKILL the worker's whole process group, as a machine failure would."""
        kill_group(process)

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                self.kill(process)


async def eventually(
    check: Callable[[], Awaitable[bool] | bool], *, timeout: float = 20.0, interval: float = 0.05
) -> None:
    """Wait until `check()` is true; fail with the timeout otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if isinstance(result, Awaitable):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(interval)


async def serves(url: str) -> bool:
    """Whether an HTTP server answers `url` with 200 (a check for `eventually`)."""
    try:
        async with httpx.AsyncClient() as http:
            return (await http.get(url)).status_code == 200
    except httpx.TransportError:
        return False


PROTOCOL_MODELS = {name: WIRE_MODELS[name] for name in ("anthropic", "openai")}
"""The stack's default model for each wire API the scenarios run on (Anthropic's Messages
API; OpenAI's Chat Completions)."""

BOTH_PROTOCOLS = pytest.mark.parametrize("protocol", list(PROTOCOL_MODELS), indirect=True)
"""Run the test with its sessions on a model of each wire API (the same script played)."""

IN_PROCESS_MODEL = pytest.mark.in_process_model
"""The test's stacks play their script in-process (`offline_model.in_process`): their
in-process workers ask the model with no HTTP, the same script playing the same (deltas,
messages, errors, delays, gates). `stack.model` is the same control surface (`release`,
`add_steps`, `requests_for`: one player for both); its HTTP server starts only for the
stack's processes (`Stack.env`: spawned workers, the CLI). A stack whose sessions speak
OpenAI's wires (`BOTH_PROTOCOLS`) keeps HTTP: how those are spoken is what it tests, and
the in-process model logs requests as the Messages API's. Not for tests of the wire (cut
streams, HTTP errors as such, sockets). A file converts with `pytestmark = IN_PROCESS_MODEL`."""

BOTH_STORES = pytest.mark.parametrize("database", ["sqlite", "postgresql"], indirect=True)
"""Run the test on SQLite and on PostgreSQL (a throwaway server, see `postgres_server`)."""

POSTGRES_ENV = "DURAGENT_TEST_POSTGRES"
"""A PostgreSQL server URL (`postgresql+psycopg://user@host:port/db`): when set, every
stack gets a fresh database on that server instead of a SQLite file."""


def stack_database_url(home: Path) -> str:
    server = os.environ.get(POSTGRES_ENV)
    return new_database(server) if server else f"sqlite:///{home / 'duragent.db'}"


@contextlib.asynccontextmanager
async def open_stack(
    home: Path,
    temporal: Client,
    address: str,
    script: Script | dict[str, Any],
    database_url: str | None = None,
    heartbeat_timeout_s: float | None = None,
    default_model: str | None = None,
    in_process_model: bool = False,
) -> AsyncIterator[Stack]:
    """A stack on `temporal`: its store, offline model and settings (a task queue of its
    own). Calls heartbeat at the product's pace: a lost worker is found by its lease, and
    a test about heartbeat timeouts sets `heartbeat_timeout_s` (a tight one everywhere
    made a loaded machine take live calls for lost). `in_process_model`: see
    `IN_PROCESS_MODEL`."""
    script_model = script if isinstance(script, Script) else Script.model_validate(script)
    model = OfflineModelServer(script_model)
    # Its sessions on OpenAI's wires keep HTTP: what they test is how those are spoken.
    messages_api = default_model is None or parse_model(default_model).api == "anthropic-messages"
    models = scripted_clients(model) if in_process_model and messages_api else None
    if models is None:
        await model.__aenter__()
    settings = Settings.from_env(
        home=home,
        database_url=database_url or stack_database_url(home),
        temporal_address=address,
        task_queue=f"test-{uuid.uuid4().hex[:12]}",
        anthropic_base_url=model.base_url,
        offline_model_url=model.base_url,
        heartbeat_timeout_s=heartbeat_timeout_s,
        **({"model": default_model} if default_model else {}),
    )
    settings = settings.model_copy(update={"anthropic_api_key": None})
    db = Database(settings.database_url)
    stack = Stack(
        settings=settings,
        db=db,
        temporal=temporal,
        model=model,
        client=DuragentClient(temporal, db, settings),
        models=models,
    )
    try:
        yield stack
    finally:
        stack.close()
        await model.__aexit__(None, None, None)  # a no-op if it never started
        db.dispose()


def transcript_roles(path: list[SessionEntry]) -> list[str]:
    """The message roles along a path, e.g. ['user', 'assistant', 'toolResult', ...]."""
    return [e.message.role for e in path if isinstance(e, MessageEntry)]


def assert_valid_pairing(path: list[SessionEntry]) -> None:
    """Every tool call on the path has exactly one result right after its message."""
    messages = [e.message for e in path if isinstance(e, MessageEntry)]
    for i, message in enumerate(messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            following: list[str] = []
            for nxt in messages[i + 1 :]:
                if not isinstance(nxt, ToolResultMessage):
                    break
                following.append(nxt.tool_call_id)
            assert following == [c.id for c in message.tool_calls], (
                f"tool calls {[c.id for c in message.tool_calls]} answered by {following}"
            )
        if isinstance(message, ToolResultMessage):
            previous = next(
                (m for m in reversed(messages[:i]) if not isinstance(m, ToolResultMessage)), None
            )
            assert isinstance(previous, AssistantMessage), "tool result without a tool call"
            assert message.tool_call_id in [c.id for c in previous.tool_calls]


class ApiServer:
    """The HTTP API on a real port, served from the test's own event loop."""

    TOKEN = "test-token"
    OTHER_TOKEN = "other-token"
    OPERATOR_TOKEN = "operator-token"
    """The machine's operator's (the user `duragent serve` prints a token for)."""

    def __init__(self, stack: Stack) -> None:
        self._stack = stack
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None
        self.port = 0

    async def start(self) -> None:
        import socket

        import uvicorn

        from duragent.api.app import create_app
        from duragent.api.ownership import LOCAL_USER
        from duragent.offline_model.server import QuickStopServer

        tokens = {self.TOKEN: "alice", self.OTHER_TOKEN: "bob", self.OPERATOR_TOKEN: LOCAL_USER}
        app = create_app(self._stack.client, tokens)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        # Stopped at once, as gracefully as uvicorn's Server (whose stop takes 0.2 s, paid
        # by every test with an API): idle connections close, a request going finishes.
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self._server = QuickStopServer(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.exit_now()
            await self._task
            self._server = self._task = None

    def client(self, token: str | None = TOKEN) -> Any:
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{self.port}", headers=headers, timeout=30
        )


def run_finished(stack: Stack, session_id: str) -> bool:
    """The session's latest run exists and is no longer running."""
    runs = stack.client.sync.runs.list(session_id)
    return bool(runs) and runs[0].status != "running"


async def event_seen(stack: Stack, session_id: str, kind: str, **match: object) -> bool:
    """The session has a stored event of `kind` whose payload fields equal `match`."""
    async for event in stack.client.events.stream(session_id, follow=False):
        if event.type == kind and all(event.payload.get(k) == v for k, v in match.items()):
            return True
    return False


UNTIL_GO = "while [ ! -f go ]; do sleep 0.05; done"
"""A bash command that waits until the test creates `go` in the workspace (`let_go`)."""


def let_go(stack: Stack, session_id: str) -> None:
    """Release the session's commands waiting in `UNTIL_GO`."""
    (Path(stack.client.sync.sessions.get(session_id).workspace) / "go").touch()


def bash_then_text(command: str, *texts: str) -> dict[str, Any]:
    """A script: a reply with one bash call running `command`, then one reply per text."""
    bash = {"tool_use": {"name": "bash", "input": {"command": command}}}
    return {"conversations": {"*": [{"reply": [bash]}, *({"reply": [{"text": t}]} for t in texts)]}}


GATED_THEN_REPLIES: dict[str, Any] = {
    "conversations": {
        "*": [
            {"wait_for": "go", "reply": [{"text": "first"}]},
            {"reply": [{"text": "second"}]},
            {"reply": [{"text": "third"}]},
        ]
    }
}
"""A script whose first reply waits for `stack.model.release("go")`, then two more."""
