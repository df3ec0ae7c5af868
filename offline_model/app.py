"""The offline model's Starlette app: the model API endpoints and the test controls.

Each API path has its wire protocol (`offline_model.wire.WireProtocol`): the Anthropic
Messages API, OpenAI's Chat Completions and OpenAI's Responses API. They share the player, so
a script plays the same on all of them, and one conversation key may even switch wires midway.
See `offline_model.server` for the endpoints and how the app is run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from duragent.offline_model.chaos import Fault
from duragent.offline_model.openai_chat import ChatCompletions
from duragent.offline_model.openai_responses import Responses, count_input_tokens
from duragent.offline_model.player import ScriptPlayer
from duragent.offline_model.protocol import AnthropicMessages, estimate_tokens
from duragent.offline_model.script import DEFAULT_KEY, Step, TextPart
from duragent.offline_model.wire import (
    EXHAUSTED_STEP,
    ApiError,
    Frame,
    JsonObject,
    WireProtocol,
    new_id,
)


class StreamCut(Exception):
    """Raised inside a response to drop its connection on purpose (a scripted cut)."""


class QuietCuts(logging.Filter):
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


def _error(wire: WireProtocol, error: ApiError, request_id: str) -> JSONResponse:
    status, body = wire.error(error, request_id)
    return JSONResponse(body, status_code=status, headers={wire.request_id_header: request_id})


def _stopped(wire: WireProtocol, request_id: str) -> JSONResponse:
    return _error(wire, ApiError(500, "api_error", "The offline model server stopped."), request_id)


_DROPPED_TEXT = "This answer is cut off by a dropped connection before it ends. " * 2


def _parse_body(raw: bytes) -> JsonObject | None:
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


async def _sse(
    frames: list[Frame], step: Step, holds: Holds, on_delta: Callable[[], None]
) -> AsyncIterator[bytes]:
    limit = step.cut_after_chunks if step.cut_after_chunks is not None else step.stall_after_chunks
    sent_deltas = 0
    for frame in frames:
        is_delta = frame.kind == "delta"
        if limit is not None and ((is_delta and sent_deltas >= limit) or frame.kind == "end"):
            if step.stall_after_chunks is not None:
                await holds.hold(None)
            raise StreamCut
        if is_delta:
            # A stopping server ends a slow stream as a cut rather than waiting it out.
            if sent_deltas and step.chunk_delay_ms and not await holds.pause(step.chunk_delay_ms):
                raise StreamCut
            sent_deltas += 1
            on_delta()
        yield frame.data


async def _broken_json(body: bytes, step: Step, holds: Holds) -> AsyncIterator[bytes]:
    yield body[: len(body) // 2]
    if step.stall_after_chunks is not None:
        await holds.hold(None)
    raise StreamCut


def _answer(
    wire: WireProtocol,
    step: Step,
    body: JsonObject,
    message: JsonObject,
    request_id: str,
    holds: Holds,
    on_delta: Callable[[], None] = lambda: None,
) -> Response:
    headers = {wire.request_id_header: request_id}
    if body.get("stream") is True:
        headers["cache-control"] = "no-cache"
        return StreamingResponse(
            _sse(wire.frames(message, body), step, holds, on_delta),
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
    anthropic, chat, responses = AnthropicMessages(), ChatCompletions(), Responses()

    async def receive(
        request: Request, wire: WireProtocol, validate: Callable[[JsonObject], ApiError | None]
    ) -> Response | tuple[int, str, JsonObject]:
        """Parse, log and validate a request: (log position, key, body) or a 400 response."""
        body = _parse_body(await request.body())
        key = wire.conversation_key(body) if body is not None else DEFAULT_KEY
        position = player.record(request.url.path, key, body or {}, dict(request.headers))
        problem = validate(body) if body is not None else None
        if body is None or problem is not None:
            player.annotate(position, status=400)
            problem = problem or ApiError(400, "invalid_request_error", wire.parse_error)
            return _error(wire, problem, new_id("req_"))
        return position, key, body

    def model_endpoint(wire: WireProtocol) -> Callable[[Request], Awaitable[Response]]:
        """The endpoint where requests in `wire`'s format take the script's steps."""

        async def endpoint(request: Request) -> Response:
            received = await receive(request, wire, wire.validate)
            if isinstance(received, Response):
                return received
            position, key, body = received
            response = await play(wire, key, body, position, new_id("req_"))
            player.annotate(position, status=response.status_code)
            return response

        return endpoint

    async def play(
        wire: WireProtocol, key: str, body: JsonObject, position: int, request_id: str
    ) -> Response:
        dice = player.roll(key)
        if dice is not None:
            if dice.delay_ms and not await holds.pause(dice.delay_ms):
                return _stopped(wire, request_id)
            if dice.fault is not None:  # before a step is taken: the retry gets it
                return chaos_fault(wire, dice.fault, body, position, request_id)
        taken = player.take(key, body)
        if taken is None:
            if player.when_exhausted == "error":
                message = f"The offline script has no more steps for key {key!r}."
                return _error(wire, ApiError(500, "api_error", message), request_id)
            exhausted = wire.build(EXHAUSTED_STEP, body)
            return _answer(wire, Step(reply=[]), body, exhausted, request_id, holds)
        step_index, step = taken
        player.annotate(position, step_index=step_index)
        if step.hang and not await holds.hold(None):
            return _stopped(wire, request_id)
        if step.wait_for is not None and not await holds.hold(step.wait_for):
            return _stopped(wire, request_id)
        if step.delay_ms and not await holds.pause(step.delay_ms):
            return _stopped(wire, request_id)
        if step.error is not None:
            error = step.error
            scripted = ApiError(
                error.status, error.error_type, error.error_message, code=error.code
            )
            response = _error(wire, scripted, request_id)
            if error.retry_after is not None:
                seconds = error.retry_after
                whole = seconds == int(seconds)
                response.headers["retry-after"] = str(int(seconds)) if whole else str(seconds)
            if error.should_retry is not None:
                response.headers["x-should-retry"] = "true" if error.should_retry else "false"
            return response
        reply = wire.build(step, body)
        return _answer(
            wire, step, body, reply, request_id, holds, lambda: player.note_delta_sent(position)
        )

    def chaos_fault(
        wire: WireProtocol, fault: Fault, body: JsonObject, position: int, request_id: str
    ) -> Response:
        if fault == "overloaded":
            overloaded = ApiError(529, "overloaded_error", "Overloaded (chaos).")
            return _error(wire, overloaded, request_id)
        if fault == "server_error":
            failed = ApiError(500, "api_error", "Internal server error (chaos).")
            return _error(wire, failed, request_id)
        cut = Step(reply=[TextPart(text=_DROPPED_TEXT)], cut_after_chunks=1)
        return _answer(
            wire,
            cut,
            body,
            wire.build(cut, body),
            request_id,
            holds,
            lambda: player.note_delta_sent(position),
        )

    async def count_tokens(request: Request) -> Response:
        received = await receive(
            request, anthropic, lambda body: anthropic.validate(body, count_tokens=True)
        )
        if isinstance(received, Response):
            return received
        position, _, body = received
        player.annotate(position, status=200)
        prompt = {k: body.get(k) for k in ("system", "messages", "tools")}
        return JSONResponse(
            {"input_tokens": estimate_tokens(prompt)}, headers={"request-id": new_id("req_")}
        )

    async def input_tokens(request: Request) -> Response:
        received = await receive(request, responses, responses.validate)
        if isinstance(received, Response):
            return received
        position, _, body = received
        player.annotate(position, status=200)
        headers = {responses.request_id_header: new_id("req_")}
        return JSONResponse(count_input_tokens(body), headers=headers)

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

        def refuse(message: str) -> Response:
            return _error(anthropic, ApiError(400, "invalid_request_error", message), request_id)

        if data is None or not isinstance(data.get("key"), str):
            return refuse("key: Field required")
        if data.get("mode", "append") not in ("append", "replace"):
            return refuse("mode: append or replace")
        try:
            pending = player.add_steps(
                data["key"], list(data.get("steps") or []), replace=data.get("mode") == "replace"
            )
        except (ValidationError, TypeError) as exc:
            return refuse(str(exc))
        return JSONResponse({"key": data["key"], "pending": pending})

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        kind = "not_found_error" if status == 404 else "invalid_request_error"
        detail = exc.detail if isinstance(exc, HTTPException) else "Not Found"
        path = request.url.path
        wire: WireProtocol = anthropic
        if path.startswith("/v1/chat/"):
            wire = chat
        elif path.startswith("/v1/responses"):
            wire = responses
        return _error(wire, ApiError(status, kind, detail), new_id("req_"))

    routes = [
        Route("/v1/messages", model_endpoint(anthropic), methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        Route("/v1/chat/completions", model_endpoint(chat), methods=["POST"]),
        Route("/v1/responses", model_endpoint(responses), methods=["POST"]),
        Route("/v1/responses/input_tokens", input_tokens, methods=["POST"]),
        Route("/_offline/requests", list_requests, methods=["GET"]),
        Route("/_offline/release/{gate}", release, methods=["POST"]),
        Route("/_offline/script", add_script, methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
