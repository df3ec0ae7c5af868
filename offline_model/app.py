"""The offline model's Starlette app: the Messages API endpoints and the test controls.

See `offline_model.server` for the endpoints it answers and how it is run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from duragent.offline_model.chaos import Fault
from duragent.offline_model.player import ScriptPlayer
from duragent.offline_model.protocol import (
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
from duragent.offline_model.script import DEFAULT_KEY, Step, TextPart


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


def _error(status: int, error_type: str, message: str, request_id: str) -> JSONResponse:
    return JSONResponse(
        error_body(error_type, message, request_id),
        status_code=status,
        headers={"request-id": request_id},
    )


def _stopped(request_id: str) -> JSONResponse:
    return _error(500, "api_error", "The offline model server stopped.", request_id)


_PARSE_ERROR = "There was an error parsing the body"
_DROPPED_TEXT = "This answer is cut off by a dropped connection before it ends. " * 2


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
        dice = player.roll(key)
        if dice is not None:
            if dice.delay_ms and not await holds.pause(dice.delay_ms):
                return _stopped(request_id)
            if dice.fault is not None:  # before a step is taken: the retry gets it
                return chaos_fault(dice.fault, body, position, request_id)
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

    def chaos_fault(fault: Fault, body: JsonObject, position: int, request_id: str) -> Response:
        if fault == "overloaded":
            return _error(529, "overloaded_error", "Overloaded (chaos).", request_id)
        if fault == "server_error":
            return _error(500, "api_error", "Internal server error (chaos).", request_id)
        cut = Step(reply=[TextPart(text=_DROPPED_TEXT)], cut_after_chunks=1)
        return _answer(
            cut,
            body,
            build_message(cut, body),
            request_id,
            holds,
            lambda: player.note_delta_sent(position),
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
