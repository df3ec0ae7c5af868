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

from duragent.activities.models import openai_client
from duragent.activities.models.clients import ClientOptions
from duragent.activities.models.openai_client import OpenAIModel, json_object, json_objects
from duragent.activities.models.openai_errors import OVERFLOW_MARKERS, classify
from duragent.activities.models.openai_responses_format import (
    API,
    identity,
    reasoning_signature,
    request_params,
)
from duragent.activities.models.reply_stream import read_events, reply_message, tool_arguments
from duragent.activities.models.seam import (
    Delta,
    ModelFailed,
    ModelRequest,
    SummaryRequest,
    provider_failures,
)
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


class OpenAIResponsesModel(OpenAIModel):
    """Models over the Responses API (see `OpenAIModel`)."""

    api: Api = "openai-responses"

    def __init__(self, client: openai.AsyncOpenAI, provider: str = "openai-responses") -> None:
        super().__init__(client, provider)

    def ask(self, request: ModelRequest) -> OpenAIResponsesCall:
        return OpenAIResponsesCall(self._client, request, self.provider)

    async def complete(self, request: SummaryRequest) -> tuple[str, Usage]:
        with provider_failures(classify):
            response = await self._client.responses.create(
                model=request.ref.model,
                input=request.prompt,
                max_output_tokens=request.max_tokens,
                store=False,
                **identity(request.session_id),
            )
        return response.output_text, usage_of(
            response.usage.model_dump() if response.usage else None
        )


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
        with provider_failures(classify):
            try:
                body = {**params, "stream": True}
                stream = await openai_client.post_stream(self._client, "/responses", body)
                async with stream:
                    await read_events(stream, self._reply.take, on_delta)
                if not self._reply.finished:
                    raise IncompleteStream("the model stream ended before the response did")
            except StreamFailure as exc:
                raise ModelFailed(exc.failure) from exc
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
            for index, item in enumerate(json_objects(response.get("output"))):
                if index not in self._blocks or not self._blocks[index].done:
                    self._item(index, item, done=True)
        elif kind == "response.failed":
            error = json_object(self._response(event).get("error"))
            raise StreamFailure(_stream_failure(_str(error, "code"), _str(error, "message")))
        elif kind == "error":
            raise StreamFailure(_stream_failure(_str(event, "code"), _str(event, "message")))

    def _response(self, event: dict[str, Any]) -> dict[str, Any]:
        response = json_object(event.get("response"))
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
        """The reply as a message. A partial one (aborted) is as `reply_message` makes it,
        and drops the signatures of its reasoning too (an item handed back without what
        followed it is refused). `model` is the model as asked (the API answers with a
        dated name): the next request knows its own reasoning by it."""
        blocks = sorted(self._blocks.values(), key=lambda b: b.index)
        content = [_content(block, partial=partial) for block in blocks]
        response = self.response
        usage = response.get("usage") if response else None
        return reply_message(
            content,
            partial=partial,
            stop=self._stop_reason(),
            api=API,
            provider=provider,
            model=model,
            usage=usage_of(usage if isinstance(usage, dict) else None),
            timestamp=timestamp,
        )

    def _stop_reason(self) -> StopReason:
        response = self.response
        if response is not None and response.get("status") == "incomplete":
            reason = _str(json_object(response.get("incomplete_details")), "reason")
            return _INCOMPLETE.get(reason, "stop")
        if any(b.kind == "toolCall" for b in self._blocks.values()):
            return "toolUse"
        return "stop"


_PARAGRAPH = "\n\n"


def _content(block: _Block, *, partial: bool) -> AssistantContent:
    item = block.item
    if block.kind == "toolCall":
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
        for p in json_objects(item.get("content"))
    ]
    return TextContent(text="".join(parts))


def _thinking(item: dict[str, Any]) -> str:
    """Its summary, the parts as paragraphs; or, from a model that shows its reasoning
    itself (gpt-oss behind an OpenAI-compatible server), that."""
    summary = json_objects(item.get("summary"))
    parts = summary or json_objects(item.get("content"))
    return _PARAGRAPH.join(_str(part, "text") for part in parts)


def _str(obj: Mapping[str, Any], name: str) -> str:
    """A text field of a JSON object; "" when absent or null."""
    value = obj.get(name)
    return value if isinstance(value, str) else ""


def usage_of(usage: Mapping[str, Any] | None) -> Usage:
    """Our usage for the API's (its JSON object): `openai_client.usage_from`."""
    return openai_client.usage_from(usage, read="input", written="output")


def _stream_failure(code: str | None, message: str) -> ProviderFailure:
    kind, retryable = _STREAM_ERRORS.get(code or "", ("bad_request", False))
    told = f"{code}: {message}" if code else message or "the response failed"
    if any(marker in told.lower() for marker in OVERFLOW_MARKERS):
        kind, retryable = "context_overflow", False
    return ProviderFailure(
        kind=kind, status=None, message=f"stream error: {told}", retryable=retryable
    )


def make(provider: Provider, where: Endpoint, options: ClientOptions) -> OpenAIResponsesModel:
    """The SDK's client (`openai_client.sdk_client`) for `provider`."""
    return OpenAIResponsesModel(openai_client.sdk_client(where, options), provider.name)
