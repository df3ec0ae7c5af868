"""The offline model played in-process: a `ModelClient` at the model seam, with no HTTP.

`ScriptedModel` plays an offline model `Script` with the player the HTTP server plays it
with (`offline_model.player.ScriptPlayer`), or with the very player of an
`OfflineModelServer` (then the server's `release`, `add_steps` and request log are its
own too). The same script plays the same: conversations keyed by the request's session id
(the `metadata.user_id` the Messages API is sent), steps chosen as the server chooses them
(`pick`, `match`, `repeat`, `when_exhausted`), the chaos dice, `delay_ms`, `chunk_delay_ms`,
`hang` and `wait_for` gates (real waits on the event loop: a cancelled reply stops there,
keeping what had arrived), scripted errors, usage and thinking. The tests that ask the
model through a worker need no HTTP for it; those about the wire keep the server.

What it gives is what the Anthropic client gives over the HTTP server:
- each request is logged as the Messages API body the client would send
  (`anthropic_format.request_params`), at /v1/messages, without headers, and checked as
  the server checks it (a broken tool pairing fails as the server's 400);
- the reply's `Delta`s are those of the events the server would stream
  (`protocol.stream_events`: the same content indexes, pieces and tool names);
- the message is read from those events as the client reads them (`anthropic_stream`),
  and a scripted error is sorted by the client's classification
  (`anthropic_errors.classify`) from the SDK's error for the status, body and headers the
  server would answer with.
tests/unit/test_in_process_model.py holds it to the HTTP path, script for script.
Whichever wire API (`api`) it stands for, it speaks the scripts' terms, the Messages API's:
requests are logged in its shape and errors sorted as Anthropic's client sorts them.

Out of its scope is what only a wire can do: cutting or stalling a stream
(`cut_after_chunks`, `stall_after_chunks`) and chaos that drops connections. A script that
has them is refused when the model is made (`WireOnly`); such a step queued later fails its
request with a non-retryable failure saying so. Play those scripts on `OfflineModelServer`.
It is used from one event loop (the worker's).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence

import anthropic
from anthropic.types import RawMessageStreamEvent
from pydantic import TypeAdapter

from duragent.activities.models.anthropic_errors import classify
from duragent.activities.models.anthropic_format import request_params
from duragent.activities.models.anthropic_stream import ReplyStream as AnthropicReplyStream
from duragent.activities.models.clients import ModelClients
from duragent.activities.models.seam import (
    Delta,
    ModelFailed,
    ModelRequest,
    SummaryRequest,
)
from duragent.domain.messages import AssistantMessage, Usage
from duragent.domain.models import PROVIDERS, Api
from duragent.domain.turns import ProviderFailure
from duragent.offline_model.app import Holds
from duragent.offline_model.player import RecordedRequest, ScriptPlayer, StepInput
from duragent.offline_model.protocol import (
    build_message,
    conversation_key,
    error_body,
    exhausted_message,
    stream_events,
    validate_request,
)
from duragent.offline_model.script import Script, Step
from duragent.offline_model.server import OfflineModelServer
from duragent.offline_model.wire import ApiError, JsonObject, new_id

try:  # the SDK's HTTP library, whose response its errors carry: httpx2 from anthropic 2.17
    import httpx2 as sdk_http
except ModuleNotFoundError:  # pragma: no cover - older SDKs speak httpx
    import httpx as sdk_http  # type: ignore[no-redef]

MESSAGES_PATH = "/v1/messages"
"""Where the requests are logged: the Messages API's path, the shape they are logged in."""

_REQUEST = sdk_http.Request("POST", f"http://offline-model.invalid{MESSAGES_PATH}")
_CLOSED = ApiError(500, "api_error", "The offline model stopped.")


class WireOnly(ValueError):
    """The script asks for what only a wire can do (a cut or stalled stream, dropped
    connections): play it on `OfflineModelServer`."""


def wire_only(step: Step) -> str | None:
    """What of `step` only a wire can play, or None."""
    for name in ("cut_after_chunks", "stall_after_chunks"):
        if getattr(step, name) is not None:
            return f"{name} (a stream broken on the wire)"
    return None


def check_playable(script: Script) -> None:
    """Raise `WireOnly` naming the first step (or the chaos) the in-process model cannot
    play."""
    if script.chaos is not None and script.chaos.dropped > 0:
        raise WireOnly(
            "the in-process offline model cannot play chaos that drops connections "
            "(chaos.dropped): play this script on OfflineModelServer"
        )
    for key, steps in script.conversations.items():
        for index, step in enumerate(steps):
            what = wire_only(step)
            if what is not None:
                raise WireOnly(
                    f"the in-process offline model cannot play step {index} of "
                    f"conversation {key!r}: {what}; play this script on OfflineModelServer"
                )


class ScriptedModel:
    """A `ModelClient` playing an offline model script in-process (see the module).

    `source` is a `Script` (played by a player of its own), an `OfflineModelServer`
    (played by the server's player, whether or not the server runs: both may answer the
    same conversations) or a player. `api` is the wire API it stands for, stamped on its
    messages; the provider stamped is the request's (`parse_model(snapshot.model).provider`).
    Raises `WireOnly` for a script it cannot play.
    """

    def __init__(
        self,
        source: Script | OfflineModelServer | ScriptPlayer,
        *,
        api: Api = "anthropic-messages",
    ) -> None:
        self.api: Api = api
        if isinstance(source, OfflineModelServer):
            source = source.player
        self.player = source if isinstance(source, ScriptPlayer) else ScriptPlayer(source)
        check_playable(self.player.script)
        self._holds = Holds(self.player)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.player.watch_gates(self._gate_released)

    # -- the seam

    def ask(self, request: ModelRequest) -> ScriptedReply:
        return ScriptedReply(self, request)

    async def complete(self, request: SummaryRequest) -> tuple[str, Usage]:
        body: JsonObject = {
            "model": request.ref.model,
            "max_tokens": request.max_tokens,
            "messages": [{"role": "user", "content": request.prompt}],
            "metadata": {"user_id": request.session_id},
        }
        answer = await self.play(body, None)
        text = "".join(b["text"] for b in answer["content"] if b["type"] == "text")
        return text, _usage(answer["usage"])

    async def aclose(self) -> None:
        """End the replies it holds (hang, wait_for, delays) as the server does when it
        stops: those not yet streaming fail with a 500 api_error."""
        self._holds.close()
        self.player.unwatch_gates(self._gate_released)

    # -- the offline model's controls, as `OfflineModelServer` has them

    def release(self, gate: str) -> None:
        """Open `gate`: replies held by `wait_for: gate` go on, and so will later ones."""
        self.player.open_gate(gate)

    def add_steps(self, key: str, steps: Sequence[StepInput], replace: bool = False) -> int:
        """Queue steps for `key`; see `ScriptPlayer.add_steps`."""
        return self.player.add_steps(key, steps, replace=replace)

    def remaining(self, key: str) -> int:
        return self.player.remaining(key)

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.player.requests()

    def requests_for(self, key: str) -> list[RecordedRequest]:
        return self.player.requests(key)

    # -- playing one request

    def _gate_released(self, gate: str) -> None:
        # Called from the releaser's thread; the held replies wait on this model's loop.
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._holds.wake, gate)

    async def play(
        self, body: JsonObject, take: Callable[[RawMessageStreamEvent], None] | None
    ) -> JsonObject:
        """Answer the Messages API request `body` as the server would: the message it
        would send, its stream's events handed to `take` when given, as the SDK hands
        them over (the pings left out). Raises `ModelFailed` as the Anthropic client would
        for the server's error answer."""
        self._loop = asyncio.get_running_loop()
        player, holds = self.player, self._holds
        key = conversation_key(body)
        position = player.record(MESSAGES_PATH, key, body, {})

        def fail(error: ApiError, headers: dict[str, str] | None = None) -> ModelFailed:
            player.annotate(position, status=error.status)
            return _failed(error, headers or {})

        problem = validate_request(body)
        if problem is not None:
            raise fail(ApiError(400, "invalid_request_error", problem))
        dice = player.roll(key)
        if dice is not None:
            if dice.delay_ms and not await holds.pause(dice.delay_ms):
                raise fail(_CLOSED)
            if dice.fault == "overloaded":
                raise fail(ApiError(529, "overloaded_error", "Overloaded (chaos)."))
            if dice.fault == "server_error":
                raise fail(ApiError(500, "api_error", "Internal server error (chaos)."))
            if dice.fault == "dropped":
                raise _not_playable(f"conversation {key!r}: chaos that drops connections")
        taken = player.take(key, body)
        if taken is None:
            if player.when_exhausted == "error":
                message = f"The offline script has no more steps for key {key!r}."
                raise fail(ApiError(500, "api_error", message))
            step, answer = Step(reply=[]), exhausted_message(body)
        else:
            index, step = taken
            player.annotate(position, step_index=index)
            what = wire_only(step)
            if what is not None:
                raise _not_playable(f"step {index} of conversation {key!r}: {what}")
            if step.hang and not await holds.hold(None):
                raise fail(_CLOSED)
            if step.wait_for is not None and not await holds.hold(step.wait_for):
                raise fail(_CLOSED)
            if step.delay_ms and not await holds.pause(step.delay_ms):
                raise fail(_CLOSED)
            if step.error is not None:
                raise fail(*_scripted_error(step))
            answer = build_message(step, body)
        player.annotate(position, status=200)
        if take is not None:
            sent = 0
            for name, event in stream_events(answer):
                if name == "content_block_delta":
                    # Paced as the server paces its delta events; a stopping model ends
                    # the reply as a cut one ends.
                    if sent and step.chunk_delay_ms and not await holds.pause(step.chunk_delay_ms):
                        raise fail(_CLOSED)
                    sent += 1
                    player.note_delta_sent(position)
                if name != "ping":
                    take(_STREAM_EVENT.validate_python(event))
        return answer


class ScriptedReply:
    """One request to the scripted model, streamed once (`ReplyStream`): its events read
    as the Anthropic client reads them (`anthropic_stream.ReplyStream`)."""

    def __init__(self, model: ScriptedModel, request: ModelRequest) -> None:
        self._model = model
        self._request = request
        self._stream = AnthropicReplyStream()

    async def reply(self, on_delta: Callable[[Delta], None]) -> AssistantMessage:
        request = self._request
        params = request_params(
            request.snapshot, request.messages, request.tools, session_id=request.session_id
        )
        # As the client sends it: JSON (a copy of its own), the stream asked for.
        body: JsonObject = {**json.loads(json.dumps(params)), "stream": True}
        stream = self._stream
        await self._model.play(body, lambda event: stream.take(event, on_delta))
        return self._message(partial=False)

    def so_far(self) -> AssistantMessage:
        return self._message(partial=True)

    def _message(self, *, partial: bool) -> AssistantMessage:
        request = self._request
        return self._stream.message(
            model=request.ref.model,
            timestamp=request.timestamp,
            partial=partial,
            provider=request.ref.provider,
            api=self._model.api,
        )


_STREAM_EVENT: TypeAdapter[RawMessageStreamEvent] = TypeAdapter(RawMessageStreamEvent)
"""A stream event's JSON as the SDK's event."""


def _usage(usage: JsonObject) -> Usage:
    return Usage(
        input_tokens=usage.get("input_tokens") or 0,
        output_tokens=usage.get("output_tokens") or 0,
        cache_read_tokens=usage.get("cache_read_input_tokens") or 0,
        cache_write_tokens=usage.get("cache_creation_input_tokens") or 0,
    )


def _scripted_error(step: Step) -> tuple[ApiError, dict[str, str]]:
    """A step's error, and the headers the server answers it with."""
    error = step.error
    assert error is not None
    headers: dict[str, str] = {}
    if error.retry_after is not None:
        seconds = error.retry_after
        headers["retry-after"] = str(int(seconds)) if seconds == int(seconds) else str(seconds)
    if error.should_retry is not None:
        headers["x-should-retry"] = "true" if error.should_retry else "false"
    scripted = ApiError(error.status, error.error_type, error.error_message, code=error.code)
    return scripted, headers


def _failed(error: ApiError, headers: dict[str, str]) -> ModelFailed:
    """The failure the Anthropic client raises for the server's answer to `error`: the
    SDK's own error, from the status, body and headers, sorted by its classification."""
    request_id = new_id("req_")
    body = error_body(error.type, error.message, request_id)
    response = sdk_http.Response(
        error.status,
        headers={**headers, "request-id": request_id},
        json=body,
        request=_REQUEST,
    )
    exc = anthropic.APIStatusError(
        f"Error code: {error.status} - {body}", response=response, body=body
    )
    failure = classify(exc)
    assert failure is not None  # every status error is a provider failure
    failed = ModelFailed(failure)
    failed.__cause__ = exc
    return failed


def _not_playable(what: str) -> ModelFailed:
    """A wire-only step reached: the request fails for good, saying why."""
    reason = WireOnly(
        f"the in-process offline model cannot play {what}; play this script on OfflineModelServer"
    )
    failed = ModelFailed(
        ProviderFailure(kind="other", status=None, message=str(reason), retryable=False)
    )
    failed.__cause__ = reason
    return failed


def scripted_clients(
    source: Script | OfflineModelServer | ScriptPlayer | ScriptedModel,
) -> ModelClients:
    """A worker's model clients where every provider is the script played in-process
    (`build_worker(..., models=...)`): one `ScriptedModel` per wire API, on one player
    (a given `ScriptedModel` is its API's)."""
    first = source if isinstance(source, ScriptedModel) else ScriptedModel(source)
    by_api: dict[Api, ScriptedModel] = {first.api: first}
    for api in sorted({p.api for p in PROVIDERS.values()} - {first.api}):
        by_api[api] = ScriptedModel(first.player, api=api)
    return ModelClients(given={p.name: by_api[p.api] for p in PROVIDERS.values()})
