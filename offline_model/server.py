"""The offline model's HTTP server: a Messages API endpoint that plays a script.

`create_app` builds the Starlette app around a `ScriptPlayer` (the thread-safe script cursors
and request log). `OfflineModelServer` runs that app in a background thread with its own event
loop, for tests and demos; `serve_forever` runs it in the foreground for the command line.

Endpoints:
- POST /v1/messages: validated like the real API, answered by the key's next step.
- POST /v1/messages/count_tokens: validated, answered with an estimate; consumes no step.
- GET /_offline/requests[?key=K]: the request log as JSON.
- POST /_offline/release/{gate}: opens a gate that `wait_for` steps hold on.
- POST /_offline/script {"key", "steps", "mode": "append"|"replace"}: queues more steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from offline_model.protocol import (
    JsonObject,
    build_message,
    conversation_key,
    encode_sse,
    error_body,
    estimate_tokens,
    exhausted_message,
    new_id,
    stream_events,
    validate_request,
)
from offline_model.script import DEFAULT_KEY, DEMO_SCRIPT, TEMPLATE_KEY, Script, Step, load_script

StepInput = Step | dict[str, Any]


class RecordedRequest(BaseModel):
    """One request the server received on a Messages API path.

    `step_index` is the index of the step it consumed within its key's conversation (None for
    invalid requests, token counts and requests past the end of the script). `status` is the
    HTTP status it was answered with, None while it is still held (hang, wait_for, delay).
    `deltas_sent_at` holds when each streamed delta event was handed to the connection.
    """

    path: str
    key: str
    body: dict[str, Any]
    headers: dict[str, str]
    received_at: float
    step_index: int | None = None
    status: int | None = None
    deltas_sent_at: list[float] = []


class ScriptPlayer:
    """The script's playback state and the request log, safe to use from any thread.

    The server thread consumes steps and records requests while test threads read the log and
    queue steps, so every access goes through one lock.
    """

    def __init__(self, script: Script) -> None:
        self._lock = threading.Lock()
        self.when_exhausted = script.when_exhausted
        self._template = list(script.conversations.get(TEMPLATE_KEY, []))
        self._steps = {k: list(v) for k, v in script.conversations.items() if k != TEMPLATE_KEY}
        self._played: dict[str, set[int]] = {}
        self._log: list[RecordedRequest] = []
        self._open_gates: set[str] = set()

    def _conversation(self, key: str) -> list[Step]:
        # A key seen for the first time starts its own copy of the template.
        if key not in self._steps:
            self._steps[key] = list(self._template)
        return self._steps[key]

    def take(self, key: str, body: JsonObject | None = None) -> tuple[int, Step] | None:
        """Consume a step of `key`: (its index, the step), or None when none are left.

        The first unplayed step whose `match` finds the request's last user text wins;
        otherwise the first unplayed step without a `match`, in order.
        """
        text = _last_user_text(body or {})
        with self._lock:
            steps = self._conversation(key)
            played = self._played.setdefault(key, set())
            unplayed = [(i, s) for i, s in enumerate(steps) if i not in played]
            chosen = next(
                ((i, s) for i, s in unplayed if s.match and re.search(s.match, text)), None
            ) or next(((i, s) for i, s in unplayed if not s.match), None)
            if chosen is not None and not chosen[1].repeat:
                played.add(chosen[0])
            return chosen

    def add_steps(self, key: str, steps: Sequence[StepInput], *, replace: bool = False) -> int:
        """Queue `steps` for `key` and return how many of its steps are now unplayed.

        Append adds them after the key's remaining steps; replace discards the remaining steps
        first. Key "*" edits the template that keys not seen yet will copy.
        """
        new = [s if isinstance(s, Step) else Step.model_validate(s) for s in steps]
        with self._lock:
            if key == TEMPLATE_KEY:
                self._template = new if replace else self._template + new
                return len(self._template)
            played = self._played.setdefault(key, set())
            current = self._conversation(key)
            kept = [s for i, s in enumerate(current) if i in played or not replace]
            self._steps[key] = kept + new
            self._played[key] = set(range(len(played))) if replace else played
            return len(self._steps[key]) - len(self._played[key])

    def remaining(self, key: str) -> int:
        """How many of `key`'s steps have not been played yet."""
        with self._lock:
            return len(self._conversation(key)) - len(self._played.get(key, set()))

    def record(self, path: str, key: str, body: JsonObject, headers: dict[str, str]) -> int:
        """Log a received request and return its position in the log."""
        entry = RecordedRequest(
            path=path, key=key, body=body, headers=headers, received_at=time.time()
        )
        with self._lock:
            self._log.append(entry)
            return len(self._log) - 1

    def annotate(self, position: int, **fields: int | None) -> None:
        """Set `step_index` and/or `status` of the logged request at `position`."""
        with self._lock:
            self._log[position] = self._log[position].model_copy(update=fields)

    def note_delta_sent(self, position: int) -> None:
        """Record that the request at `position` was just sent one more streamed delta."""
        with self._lock:
            entry = self._log[position]
            sent = [*entry.deltas_sent_at, time.time()]
            self._log[position] = entry.model_copy(update={"deltas_sent_at": sent})

    def requests(self, key: str | None = None) -> list[RecordedRequest]:
        """A copy of the request log, optionally only the requests of `key`."""
        with self._lock:
            return [r for r in self._log if key is None or r.key == key]

    def open_gate(self, gate: str) -> None:
        """Mark `gate` released; it stays open for every later `wait_for` on it."""
        with self._lock:
            self._open_gates.add(gate)

    def gate_open(self, gate: str) -> bool:
        with self._lock:
            return gate in self._open_gates


class StreamCut(Exception):
    """Raised inside a response to drop its connection on purpose (a scripted cut)."""


class _QuietCuts(logging.Filter):
    # The server logs every exception that escapes a response, with a traceback; a scripted
    # cut is not a fault, so its record is dropped.
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], StreamCut))


class Holds:
    """Gate wake-ups and the stop signal for held responses; used on the server's loop only."""

    def __init__(self, player: ScriptPlayer) -> None:
        self._player = player
        self._gates: dict[str, asyncio.Event] = {}
        self._closing = asyncio.Event()

    def wake(self, gate: str) -> None:
        """Wake the responses waiting on `gate` (already marked open in the player)."""
        self._gates.setdefault(gate, asyncio.Event()).set()

    def close(self) -> None:
        """Release every held response: the server is stopping."""
        self._closing.set()

    async def hold(self, gate: str | None) -> bool:
        """Wait until `gate` opens (forever when None). False if the server stops first."""
        if gate is not None and self._player.gate_open(gate):
            return True
        waiters = [asyncio.ensure_future(self._closing.wait())]
        if gate is not None:
            waiters.append(
                asyncio.ensure_future(self._gates.setdefault(gate, asyncio.Event()).wait())
            )
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        return not self._closing.is_set()

    async def pause(self, ms: int) -> bool:
        """Sleep `ms` milliseconds. False if the server stops first."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(ms / 1000):
                await self._closing.wait()
        return not self._closing.is_set()


def _error(status: int, error_type: str, message: str, request_id: str) -> JSONResponse:
    return JSONResponse(
        error_body(error_type, message, request_id),
        status_code=status,
        headers={"request-id": request_id},
    )


def _stopped(request_id: str) -> JSONResponse:
    return _error(500, "api_error", "The offline model server stopped.", request_id)


_PARSE_ERROR = "There was an error parsing the body"


def _parse_body(raw: bytes) -> JsonObject | None:
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


async def _sse(
    events: list[tuple[str, JsonObject]], step: Step, holds: Holds, on_delta: Callable[[], None]
) -> AsyncIterator[bytes]:
    limit = step.cut_after_chunks if step.cut_after_chunks is not None else step.stall_after_chunks
    sent_deltas = 0
    for event in events:
        is_delta = event[0] == "content_block_delta"
        if limit is not None and (
            (is_delta and sent_deltas >= limit) or event[0] == "message_stop"
        ):
            if step.stall_after_chunks is not None:
                await holds.hold(None)
            raise StreamCut
        if is_delta:
            # A stopping server ends a slow stream as a cut rather than waiting it out.
            if sent_deltas and step.chunk_delay_ms and not await holds.pause(step.chunk_delay_ms):
                raise StreamCut
            sent_deltas += 1
            on_delta()
        yield encode_sse(event)


async def _broken_json(body: bytes, step: Step, holds: Holds) -> AsyncIterator[bytes]:
    yield body[: len(body) // 2]
    if step.stall_after_chunks is not None:
        await holds.hold(None)
    raise StreamCut


def _answer(
    step: Step,
    body: JsonObject,
    message: JsonObject,
    request_id: str,
    holds: Holds,
    on_delta: Callable[[], None] = lambda: None,
) -> Response:
    headers = {"request-id": request_id}
    if body.get("stream") is True:
        headers["cache-control"] = "no-cache"
        return StreamingResponse(
            _sse(stream_events(message), step, holds, on_delta),
            media_type="text/event-stream; charset=utf-8",
            headers=headers,
        )
    if step.cut_after_chunks is None and step.stall_after_chunks is None:
        return JSONResponse(message, headers=headers)
    payload = json.dumps(message).encode()
    headers["content-length"] = str(len(payload))
    return StreamingResponse(
        _broken_json(payload, step, holds), media_type="application/json", headers=headers
    )


def create_app(player: ScriptPlayer, holds: Holds | None = None) -> Starlette:
    """The Starlette app serving `player`'s script; `holds` defaults to a fresh one."""
    holds = holds or Holds(player)

    async def receive(
        request: Request, *, count_tokens: bool
    ) -> Response | tuple[int, str, JsonObject]:
        """Parse, log and validate a request: (log position, key, body) or a 400 response."""
        body = _parse_body(await request.body())
        key = conversation_key(body) if body is not None else DEFAULT_KEY
        position = player.record(request.url.path, key, body or {}, dict(request.headers))
        problem = (
            _PARSE_ERROR if body is None else validate_request(body, count_tokens=count_tokens)
        )
        if body is None or problem is not None:
            player.annotate(position, status=400)
            message = problem or _PARSE_ERROR
            return _error(400, "invalid_request_error", message, new_id("req_"))
        return position, key, body

    async def messages(request: Request) -> Response:
        received = await receive(request, count_tokens=False)
        if isinstance(received, Response):
            return received
        position, key, body = received
        response = await play(key, body, position, new_id("req_"))
        player.annotate(position, status=response.status_code)
        return response

    async def play(key: str, body: JsonObject, position: int, request_id: str) -> Response:
        taken = player.take(key, body)
        if taken is None:
            if player.when_exhausted == "error":
                message = f"The offline script has no more steps for key {key!r}."
                return _error(500, "api_error", message, request_id)
            return _answer(Step(reply=[]), body, exhausted_message(body), request_id, holds)
        step_index, step = taken
        player.annotate(position, step_index=step_index)
        if step.hang and not await holds.hold(None):
            return _stopped(request_id)
        if step.wait_for is not None and not await holds.hold(step.wait_for):
            return _stopped(request_id)
        if step.delay_ms and not await holds.pause(step.delay_ms):
            return _stopped(request_id)
        if step.error is not None:
            error = step.error
            response = _error(error.status, error.error_type, error.error_message, request_id)
            if error.retry_after is not None:
                seconds = error.retry_after
                whole = seconds == int(seconds)
                response.headers["retry-after"] = str(int(seconds)) if whole else str(seconds)
            if error.should_retry is not None:
                response.headers["x-should-retry"] = "true" if error.should_retry else "false"
            return response
        reply = build_message(step, body)
        return _answer(
            step, body, reply, request_id, holds, lambda: player.note_delta_sent(position)
        )

    async def count_tokens(request: Request) -> Response:
        received = await receive(request, count_tokens=True)
        if isinstance(received, Response):
            return received
        position, _, body = received
        player.annotate(position, status=200)
        prompt = {k: body.get(k) for k in ("system", "messages", "tools")}
        return JSONResponse(
            {"input_tokens": estimate_tokens(prompt)}, headers={"request-id": new_id("req_")}
        )

    async def list_requests(request: Request) -> Response:
        key = request.query_params.get("key")
        return JSONResponse([r.model_dump(mode="json") for r in player.requests(key)])

    async def release(request: Request) -> Response:
        gate = request.path_params["gate"]
        player.open_gate(gate)
        holds.wake(gate)
        return JSONResponse({"released": gate})

    async def add_script(request: Request) -> Response:
        request_id = new_id("req_")
        data = _parse_body(await request.body())
        if data is None or not isinstance(data.get("key"), str):
            return _error(400, "invalid_request_error", "key: Field required", request_id)
        if data.get("mode", "append") not in ("append", "replace"):
            return _error(400, "invalid_request_error", "mode: append or replace", request_id)
        try:
            pending = player.add_steps(
                data["key"], list(data.get("steps") or []), replace=data.get("mode") == "replace"
            )
        except (ValidationError, TypeError) as exc:
            return _error(400, "invalid_request_error", str(exc), request_id)
        return JSONResponse({"key": data["key"], "pending": pending})

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        kind = "not_found_error" if status == 404 else "invalid_request_error"
        detail = exc.detail if isinstance(exc, HTTPException) else "Not Found"
        return _error(status, kind, detail, new_id("req_"))

    routes = [
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        Route("/_offline/requests", list_requests, methods=["GET"]),
        Route("/_offline/release/{gate}", release, methods=["POST"]),
        Route("/_offline/script", add_script, methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})


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
        self._server: uvicorn.Server | None = None
        self._holds: Holds | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def base_url(self) -> str:
        """ "http://HOST:PORT", the `base_url` to give the SDK client (valid once started)."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self._port}"

    @property
    def port(self) -> int:
        return self._port

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
        self._server = uvicorn.Server(config)
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

    def _run(self, server: uvicorn.Server, sock: socket.socket) -> None:
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
        server.should_exit = True
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


_QUIET_CUTS = _QuietCuts()


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
    try:
        # A timed wait keeps the main thread returning to the interpreter, where signal
        # handlers run.
        while not stopped.wait(0.5):
            pass
    finally:
        server.stop()


def _last_user_text(body: JsonObject) -> str:
    """The text of the request's last user message (what a step's `match` looks at)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""
