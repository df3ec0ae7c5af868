"""OpenAI's Responses API behind the seam (`openai-responses:o4-mini`).

Through the official SDK's `AsyncOpenAI` (its auth, base URL, timeouts, transport and
errors), but lean: `openai_responses_format` builds the request as the API's JSON and it is
posted as it is (`client.post`), without `responses.create`, whose conversion of its typed
parameters walks the whole transcript on every request; and the stream's events are read
as the JSON objects they are, not built into the SDK's pydantic event models (together
about four fifths of the client's CPU per request, more the longer the transcript). The
raw events are read here, as they arrive (not through the SDK's accumulating
`responses.stream()` helper): each piece goes to `on_delta` at once, at the index its
block has in the final message, and what had arrived is there when the reply is aborted.
A reasoning item becomes thinking whose signature carries the item's encrypted content,
which the next request hands back (`openai_responses_format.reasoning_item`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import openai

from duragent.activities.models.clients import ClientOptions
from duragent.activities.models.openai_errors import OVERFLOW_MARKERS, classify
from duragent.activities.models.openai_responses_format import (
    API,
    identity,
    reasoning_signature,
    request_params,
)
from duragent.activities.models.reply_stream import read_events, tool_arguments
from duragent.activities.models.seam import Delta, ModelFailed, ModelRequest, SummaryRequest
from duragent.activities.models.transport_failures import IncompleteStream, UnreadableStream
from duragent.domain.messages import (
    AssistantContent,
    AssistantMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)
from duragent.domain.models import Api, Endpoint, Provider
from duragent.domain.turns import ProviderErrorKind, ProviderFailure

BlockKind = Literal["text", "thinking", "toolCall"]

_KINDS: dict[str, BlockKind] = {
    "message": "text",
    "reasoning": "thinking",
    "function_call": "toolCall",
}
"""The output items that become content blocks; others (a hosted tool's call) do not."""

_PIECES = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_text.delta",
        "response.function_call_arguments.delta",
    }
)
"""The events that carry a piece of a block (in `delta`): text (or a refusal's), thinking
(a summary's, or the reasoning itself), a call's arguments."""

_INCOMPLETE: dict[str, StopReason] = {"max_output_tokens": "length", "content_filter": "error"}

_STREAM_ERRORS: dict[str, tuple[ProviderErrorKind, bool]] = {
    "server_error": ("server", True),
    "rate_limit_exceeded": ("rate_limit", True),
    "vector_store_timeout": ("timeout", True),
}
"""How a failure the stream reports in its own event (`response.failed`, `error`) is
sorted, by its code. The Responses API's codes are few, and all but these are the
request's fault (an invalid prompt or image, a policy): retrying would not pass. (An
`error` event in the shape of an error body the SDK raises as `APIError`, which
`openai_errors` sorts.)"""


class OpenAIResponsesModel:
    """Models over the Responses API, through `client` (one per worker and provider)."""

    api: Api = "openai-responses"

    def __init__(self, client: openai.AsyncOpenAI, provider: str = "openai-responses") -> None:
        self._client = client
        self.provider = provider

    @property
    def sdk(self) -> openai.AsyncOpenAI:
        """The SDK's client it asks through."""
        return self._client

    def ask(self, request: ModelRequest) -> OpenAIResponsesCall:
        return OpenAIResponsesCall(self._client, request, self.provider)

    async def complete(self, request: SummaryRequest) -> tuple[str, Usage]:
        try:
            response = await self._client.responses.create(
                model=request.ref.model,
                input=request.prompt,
                max_output_tokens=request.max_tokens,
                store=False,
                **identity(request.session_id),
            )
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
            raise ModelFailed(failure) from exc
        return response.output_text, usage_of(
            response.usage.model_dump() if response.usage else None
        )

    async def aclose(self) -> None:
        await self._client.close()


class OpenAIResponsesCall:
    def __init__(self, client: openai.AsyncOpenAI, request: ModelRequest, provider: str) -> None:
        self._client = client
        self._request = request
        self._provider = provider
        self._reply = ReplyState()

    async def reply(self, on_delta: Callable[[Delta], None]) -> AssistantMessage:
        request = self._request
        params = request_params(
            request.ref,
            self._provider,
            request.snapshot,
            request.messages,
            request.tools,
            session_id=request.session_id,
        )
        try:
            # What `responses.create` does, without converting the body (it is the API's
            # JSON already); `AsyncStream[object]` hands each event over as parsed.
            stream = await self._client.post(
                "/responses",
                body={**params, "stream": True},
                cast_to=object,
                options={"security": {"bearer_auth": True}},
                stream=True,
                stream_cls=openai.AsyncStream[object],
            )
            async with stream:
                await read_events(stream, self._reply.take, on_delta)
            if not self._reply.finished:
                raise IncompleteStream("the model stream ended before the response did")
        except StreamFailure as exc:
            raise ModelFailed(exc.failure) from exc
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
            raise ModelFailed(failure) from exc
        return self._message(partial=False)

    def so_far(self) -> AssistantMessage:
        return self._message(partial=True)

    def _message(self, *, partial: bool) -> AssistantMessage:
        return self._reply.message(
            provider=self._provider,
            model=self._request.ref.model,
            timestamp=self._request.timestamp,
            partial=partial,
        )


class StreamFailure(Exception):
    """The stream said the response failed (`response.failed`, or an `error` event)."""

    def __init__(self, failure: ProviderFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


@dataclass
class _Block:
    """One content block of the reply: an output item as far as it arrived."""

    index: int
    """Its index in the final message's content."""
    kind: BlockKind
    item: dict[str, Any]
    """The item (its JSON object) as last told: as added, then (`done`) complete."""
    done: bool = False
    streamed: list[str] = field(default_factory=list)


class ReplyState:
    """A reply read from the stream's events (`take`), as a message at any point."""

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}
        self.response: dict[str, Any] | None = None
        """The response (its JSON object) as last told."""
        self.finished = False
        """The stream told the response's end (completed, or incomplete)."""

    def take(self, event: object, on_delta: Callable[[Delta], None]) -> None:
        """Take one event (its JSON object) in; a piece of content goes to `on_delta`.
        Raises `StreamFailure` when the event says the response failed. Events of other
        types (a hosted tool's progress, ...) are let by. Pieces come first: they are
        nearly all of a stream's events."""
        if not isinstance(event, dict):
            raise UnreadableStream("the model stream could not be read: an event not an object")
        kind = event.get("type")
        if kind in _PIECES:
            self._piece(event.get("output_index"), event.get("delta"), on_delta)
        elif kind == "response.output_item.added" or kind == "response.output_item.done":
            item = event.get("item")
            if isinstance(item, dict):
                done = kind == "response.output_item.done"
                self._item(event.get("output_index"), item, done=done)
        elif kind == "response.reasoning_summary_part.added":
            index = event.get("summary_index")
            if isinstance(index, int) and index > 0:  # the parts read as paragraphs (`_thinking`)
                self._piece(event.get("output_index"), _PARAGRAPH, on_delta)
        elif kind == "response.function_call_arguments.done":
            block = self._block(event.get("output_index"))
            arguments = event.get("arguments")
            if block is not None and block.kind == "toolCall" and isinstance(arguments, str):
                block.item = {**block.item, "arguments": arguments}
        elif kind == "response.created" or kind == "response.in_progress":
            self._response(event)
        elif kind == "response.completed" or kind == "response.incomplete":
            response = self._response(event)
            self.finished = True
            for index, item in enumerate(_dicts(response.get("output"))):
                if index not in self._blocks or not self._blocks[index].done:
                    self._item(index, item, done=True)
        elif kind == "response.failed":
            error = _dict(self._response(event).get("error"))
            raise StreamFailure(_stream_failure(_str(error, "code"), _str(error, "message")))
        elif kind == "error":
            raise StreamFailure(_stream_failure(_str(event, "code"), _str(event, "message")))

    def _response(self, event: dict[str, Any]) -> dict[str, Any]:
        response = _dict(event.get("response"))
        self.response = response
        return response

    def _block(self, output_index: object) -> _Block | None:
        return self._blocks.get(output_index) if isinstance(output_index, int) else None

    def _item(self, output_index: object, item: dict[str, Any], *, done: bool) -> None:
        if not isinstance(output_index, int):
            return
        block = self._blocks.get(output_index)
        if block is None:
            kind = _KINDS.get(_str(item, "type"))
            if kind is None:
                return
            block = self._blocks[output_index] = _Block(len(self._blocks), kind, item)
        block.item = item
        block.done = done

    def _piece(self, output_index: object, text: object, on_delta: Callable[[Delta], None]) -> None:
        block = self._block(output_index)
        if block is None or not text or not isinstance(text, str):
            return
        block.streamed.append(text)
        name = (_str(block.item, "name") or None) if block.kind == "toolCall" else None
        on_delta(Delta(block.index, block.kind, text, tool_name=name))

    def message(
        self, *, provider: str, model: str, timestamp: int, partial: bool
    ) -> AssistantMessage:
        """The reply as a message. A partial one (aborted) drops its tool calls (none of
        them will run, and a call without a result would break the transcript) and the
        signatures of its reasoning (an item handed back without what followed it is
        refused). `model` is the model as asked (the API answers with a dated name): the
        next request knows its own reasoning by it."""
        content: list[AssistantContent] = []
        for block in sorted(self._blocks.values(), key=lambda b: b.index):
            converted = _content(block, partial=partial)
            if converted is not None:
                content.append(converted)
        response = self.response
        usage = response.get("usage") if response else None
        return AssistantMessage(
            content=content,
            api=API,
            provider=provider,
            model=model,
            usage=usage_of(usage if isinstance(usage, dict) else None),
            stop_reason="aborted" if partial else self._stop_reason(),
            timestamp=timestamp,
        )

    def _stop_reason(self) -> StopReason:
        response = self.response
        if response is not None and response.get("status") == "incomplete":
            reason = _str(_dict(response.get("incomplete_details")), "reason")
            return _INCOMPLETE.get(reason, "stop")
        if any(b.kind == "toolCall" for b in self._blocks.values()):
            return "toolUse"
        return "stop"


_PARAGRAPH = "\n\n"


def _content(block: _Block, *, partial: bool) -> AssistantContent | None:
    item = block.item
    if block.kind == "toolCall":
        if partial:
            return None
        arguments = _str(item, "arguments") if block.done else "".join(block.streamed)
        return ToolCall(
            id=_str(item, "call_id"), name=_str(item, "name"), arguments=tool_arguments(arguments)
        )
    if block.kind == "thinking":
        # The reasoning goes back only complete: its encrypted content is whole only once
        # the item is done, and the API refuses a cut one back without what followed it.
        whole = block.done and not partial and item.get("status") != "incomplete"
        encrypted = _str(item, "encrypted_content")
        signature = (
            reasoning_signature(_str(item, "id"), encrypted) if whole and encrypted else None
        )
        thinking = _thinking(item) if block.done else "".join(block.streamed)
        return ThinkingContent(thinking=thinking, signature=signature)
    if not block.done:
        return TextContent(text="".join(block.streamed))
    parts = [
        _str(p, "text") if p.get("type") == "output_text" else _str(p, "refusal")
        for p in _dicts(item.get("content"))
    ]
    return TextContent(text="".join(parts))


def _thinking(item: dict[str, Any]) -> str:
    """Its summary, the parts as paragraphs; or, from a model that shows its reasoning
    itself (gpt-oss behind an OpenAI-compatible server), that."""
    summary = _dicts(item.get("summary"))
    parts = summary or _dicts(item.get("content"))
    return _PARAGRAPH.join(_str(part, "text") for part in parts)


def _dict(value: object) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one (a field left out, or null)."""
    return value if isinstance(value, dict) else {}


def _dicts(value: object) -> list[dict[str, Any]]:
    """The JSON objects of `value` if it is an array, else none."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _str(obj: Mapping[str, Any], name: str) -> str:
    """A text field of a JSON object; "" when absent or null."""
    value = obj.get(name)
    return value if isinstance(value, str) else ""


def _count(obj: Mapping[str, Any], name: str) -> int:
    value = obj.get(name)
    return value if isinstance(value, int) else 0


def usage_of(usage: Mapping[str, Any] | None) -> Usage:
    """Our usage for the API's (its JSON object). OpenAI counts the cached prompt tokens in
    `input_tokens`; ours (as Anthropic's) counts them apart, so input is what was read
    without the cache."""
    if usage is None:
        return Usage()
    details = _dict(usage.get("input_tokens_details"))
    cache_read = _count(details, "cached_tokens")
    cache_write = _count(details, "cache_write_tokens")
    return Usage(
        input_tokens=max(0, _count(usage, "input_tokens") - cache_read - cache_write),
        output_tokens=_count(usage, "output_tokens"),
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=_count(_dict(usage.get("output_tokens_details")), "reasoning_tokens"),
    )


def _stream_failure(code: str | None, message: str) -> ProviderFailure:
    kind, retryable = _STREAM_ERRORS.get(code or "", ("bad_request", False))
    told = f"{code}: {message}" if code else message or "the response failed"
    if any(marker in told.lower() for marker in OVERFLOW_MARKERS):
        kind, retryable = "context_overflow", False
    return ProviderFailure(
        kind=kind, status=None, message=f"stream error: {told}", retryable=retryable
    )


def make(provider: Provider, where: Endpoint, options: ClientOptions) -> OpenAIResponsesModel:
    """The SDK's client for `provider`. Its HTTP goes over aiohttp, as Anthropic's does
    (`anthropic_model.make`); retries are the workflow's, where they are visible and
    abortable."""
    timeout = openai.Timeout(connect=10.0, read=options.read_timeout_s, write=30.0, pool=10.0)
    client = openai.AsyncOpenAI(
        api_key=where.api_key or "none",  # a server of the user's own may want none
        base_url=where.base_url,
        http_client=openai.DefaultAioHttpClient(),
        max_retries=0,
        timeout=timeout,
    )
    return OpenAIResponsesModel(client, provider.name)
