"""The offline model's HTTP server: model API endpoints that play a script.

`offline_model.app.create_app` builds the Starlette app around an
`offline_model.player.ScriptPlayer` (the thread-safe script cursors and request log); this
module runs it. `OfflineModelServer` runs that app in a background thread with its own event
loop, for tests and demos; `serve_forever` runs it in the foreground for the command line.

Endpoints (each model endpoint validated like the real API, answered by the key's next step):
- POST /v1/messages: the Anthropic Messages API (`offline_model.protocol`); the Anthropic SDK
  takes `base_url`.
- POST /v1/chat/completions: OpenAI's Chat Completions (`offline_model.openai_chat`);
  OpenAI's SDK and OpenAI-compatible clients take `openai_base_url` (`base_url` + "/v1").
- POST /v1/responses: OpenAI's Responses API (`offline_model.openai_responses`).
- POST /v1/messages/count_tokens, POST /v1/responses/input_tokens: validated, answered with
  an estimate; consume no step.
- GET /_offline/requests[?key=K]: the request log as JSON.
- POST /_offline/release/{gate}: opens a gate that `wait_for` steps hold on.
- POST /_offline/script {"key", "steps", "mode": "append"|"replace"}: queues more steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import uvicorn

from duragent.offline_model.app import Holds, QuietCuts, create_app
from duragent.offline_model.player import RecordedRequest, ScriptPlayer, StepInput
from duragent.offline_model.script import DEMO_SCRIPT, Script, load_script

__all__ = ["OfflineModelServer", "QuickStopServer", "RecordedRequest", "StepInput", "serve_forever"]

_TICK_S = 0.1
"""uvicorn's tick: how often the main loop looks at `should_exit` set by a signal handler
(and refreshes its Date header, every tenth), and how often a wait for connections looks
at `force_exit`."""

_DRAIN_POLL_S = 0.005
"""How often the stop looks whether the last connection and request have ended."""


class QuickStopServer(uvicorn.Server):
    """uvicorn's `Server`, stopped at once by `exit_now`, as gracefully as uvicorn's own.

    uvicorn notices `should_exit` at its next 0.1 s tick, then sleeps 0.1 s after asking
    its connections to close and looks every 0.1 s whether they have: about 0.2 s a stop,
    which a test suite starting hundreds of servers pays hundreds of times. Here
    `exit_now` wakes the main loop, and the stop waits only as long as the connections
    and requests really take: idle connections close at once, a request still going
    finishes (within `timeout_graceful_shutdown`, then it is cancelled, as uvicorn does).
    A signal (`should_exit` set by uvicorn's handler) still stops it within a tick.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        # Not bound to a loop until awaited: made here, set and awaited on the server's.
        self._wake = asyncio.Event()

    def exit_now(self) -> None:
        """Stop serving now. Call it on the server's event loop (`call_soon_threadsafe`
        from another thread)."""
        self.should_exit = True
        self._wake.set()

    async def main_loop(self) -> None:
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_TICK_S):
                    await self._wake.wait()
            should_exit = await self.on_tick(counter)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # uvicorn's steps in uvicorn's order, without its fixed sleep and 0.1 s polls.
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        state = self.server_state
        try:
            async with asyncio.timeout(self.config.timeout_graceful_shutdown):
                await asyncio.sleep(0)  # a closed idle connection is lost at the next turn
                while (state.connections or state.tasks) and not self.force_exit:
                    await asyncio.sleep(_DRAIN_POLL_S)
                for server in self.servers:
                    await server.wait_closed()
        except TimeoutError:
            logging.getLogger("uvicorn.error").error(
                "Cancel %s running task(s), timeout graceful shutdown exceeded",
                len(state.tasks),
            )
            for task in state.tasks:
                task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
        if not self.force_exit:
            await self.lifespan.shutdown()


def _as_script(script: Script | Path | str | None) -> Script:
    if script is None:
        return Script()
    if isinstance(script, Script):
        return script
    return load_script(script)


class OfflineModelServer:
    """Runs the offline model in a background thread, on its own event loop.

    `script` is a `Script`, or the path of a script file; None means an empty script, where
    every request gets the `when_exhausted` answer (queue steps later with `add_steps`).
    Port 0 picks a free port; after the first start the server keeps that port, so a stopped
    server can be started again at the same `base_url` with its log and cursors intact.
    """

    def __init__(
        self,
        script: Script | Path | str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._player = ScriptPlayer(_as_script(script))
        self._host = host
        self._port = port
        self._thread: threading.Thread | None = None
        self._server: QuickStopServer | None = None
        self._holds: Holds | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def base_url(self) -> str:
        """ "http://HOST:PORT", the `base_url` to give the SDK client (valid once started)."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self._port}"

    @property
    def openai_base_url(self) -> str:
        """ "http://HOST:PORT/v1", the `base_url` to give OpenAI's SDK (valid once started)."""
        return f"{self.base_url}/v1"

    @property
    def port(self) -> int:
        return self._port

    @property
    def player(self) -> ScriptPlayer:
        """Its script's player: the steps, gates and request log it serves from, which an
        in-process model (`offline_model.in_process.ScriptedModel`) may play as well."""
        return self._player

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, timeout: float = 10.0) -> OfflineModelServer:
        """Start serving; returns once the server accepts connections (RuntimeError if not)."""
        if self.running:
            raise RuntimeError("the offline model server is already running")
        logging.getLogger("uvicorn.error").addFilter(_QUIET_CUTS)
        # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on accepted sockets whose
        # protocol says TCP, and with Nagle on, each response waits ~40 ms for a delayed ACK.
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._port))
        self._port = sock.getsockname()[1]
        self._holds = Holds(self._player)
        config = uvicorn.Config(
            create_app(self._player, self._holds),
            log_config=None,
            access_log=False,
            lifespan="off",
            http="h11",
            ws="none",
            timeout_graceful_shutdown=5,
        )
        self._server = QuickStopServer(config)
        self._thread = threading.Thread(
            target=self._run, args=(self._server, sock), name="offline-model", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the offline model server did not start on {self.base_url}")
            time.sleep(0.01)
        return self

    def _run(self, server: QuickStopServer, sock: socket.socket) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            await server.serve(sockets=[sock])

        try:
            asyncio.run(serve())
        finally:
            self._loop = None
            sock.close()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving. Held responses (hang, wait_for, stalls, delays) end first: those
        not yet started get a 500 api_error, started streams are cut. No-op if not running."""
        loop, holds, server, thread = self._loop, self._holds, self._server, self._thread
        if thread is None or server is None:
            return
        if loop is not None and holds is not None:
            with contextlib.suppress(RuntimeError):  # the loop may have closed meanwhile
                loop.call_soon_threadsafe(holds.close)
                loop.call_soon_threadsafe(server.exit_now)
        server.should_exit = True  # a loop not yet running sees it at its first tick
        thread.join(timeout)
        self._thread = self._server = None

    def release(self, gate: str) -> None:
        """Open `gate`: responses held by `wait_for: gate` proceed, and so will later ones."""
        self._player.open_gate(gate)
        loop, holds = self._loop, self._holds
        if loop is not None and holds is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(holds.wake, gate)

    def add_steps(self, key: str, steps: Sequence[StepInput], replace: bool = False) -> int:
        """Queue steps for `key` (dicts are validated as `Step`); see `ScriptPlayer.add_steps`."""
        return self._player.add_steps(key, steps, replace=replace)

    def remaining(self, key: str) -> int:
        """How many of `key`'s steps have not been played yet."""
        return self._player.remaining(key)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of every request received so far, oldest first."""
        return self._player.requests()

    def requests_for(self, key: str) -> list[RecordedRequest]:
        """The received requests of conversation `key`, oldest first."""
        return self._player.requests(key)

    def __enter__(self) -> OfflineModelServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> OfflineModelServer:
        # Starting waits on another thread; keep the caller's loop free meanwhile.
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)


_QUIET_CUTS = QuietCuts()


def serve_forever(
    script_path: str | Path | None = None, host: str = "127.0.0.1", port: int = 0
) -> None:
    """Serve `script_path` (default: the bundled demo script) until interrupted.

    Prints the base URL once listening; returns after Ctrl-C or SIGTERM.
    """
    path = Path(script_path) if script_path is not None else DEMO_SCRIPT
    server = OfflineModelServer(path, host=host, port=port)
    stopped = threading.Event()
    if threading.current_thread() is threading.main_thread():
        # Handle SIGINT explicitly too: a shell starts background jobs with it ignored.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda received, frame: stopped.set())
    server.start()
    print(f"Offline model serving {path} at {server.base_url}", flush=True)
    print(f"Point the client at it with ANTHROPIC_BASE_URL={server.base_url}", flush=True)
    print(f"or, for OpenAI's APIs, OPENAI_BASE_URL={server.openai_base_url}", flush=True)
    try:
        # A timed wait keeps the main thread returning to the interpreter, where signal
        # handlers run.
        while not stopped.wait(0.5):
            pass
    finally:
        server.stop()
