"""OpenAI's Responses API behind the seam (`openai-responses:o4-mini`).

Through the official SDK's `AsyncOpenAI`. `openai_responses_format` builds the request;
the stream's raw events are read here, as they arrive (not through the SDK's accumulating
`responses.stream()` helper): each piece goes to `on_delta` at once, at the index its
block has in the final message, and what had arrived is there when the reply is aborted.
A reasoning item becomes thinking whose signature carries the item's encrypted content,
which the next request hands back (`openai_responses_format.reasoning_item`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import openai
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseErrorEvent,
    ResponseFailedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseIncompleteEvent,
    ResponseInProgressEvent,
    ResponseOutputItem,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseReasoningItem,
    ResponseReasoningSummaryPartAddedEvent,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseRefusalDeltaEvent,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
    ResponseUsage,
)

from duragent.activities.models.clients import ClientOptions
from duragent.activities.models.openai_errors import OVERFLOW_MARKERS, classify
from duragent.activities.models.openai_responses_format import (
    API,
    identity,
    reasoning_signature,
    request_params,
)
from duragent.activities.models.seam import Delta, ModelFailed, ModelRequest, SummaryRequest
from duragent.activities.models.transport_failures import IncompleteStream, interruption
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

_PIECES = (
    ResponseTextDeltaEvent
    | ResponseRefusalDeltaEvent
    | ResponseReasoningSummaryTextDeltaEvent
    | ResponseReasoningTextDeltaEvent
    | ResponseFunctionCallArgumentsDeltaEvent
)
"""The events that carry a piece of a block: text (or a refusal's), thinking (a summary's,
or the reasoning itself), a call's arguments."""

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
        return response.output_text, usage_of(response.usage)

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
            stream = await self._client.responses.create(**params, stream=True)
            async with stream:
                try:
                    async for event in stream:
                        self._reply.take(event, on_delta)
                except Exception as exc:
                    cut = interruption(exc)
                    if cut is None:
                        raise
                    raise cut from exc
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
    item: ResponseOutputItem
    """The item as last told: as added, then (`done`) complete."""
    done: bool = False
    streamed: list[str] = field(default_factory=list)


class ReplyState:
    """A reply read from the stream's events (`take`), as a message at any point."""

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}
        self.response: Response | None = None
        self.finished = False
        """The stream told the response's end (completed, or incomplete)."""

    def take(self, event: ResponseStreamEvent, on_delta: Callable[[Delta], None]) -> None:
        """Take one event in; a piece of content goes to `on_delta`. Raises
        `StreamFailure` when the event says the response failed."""
        if isinstance(event, ResponseCreatedEvent | ResponseInProgressEvent):
            self.response = event.response
        elif isinstance(event, ResponseOutputItemAddedEvent):
            self._item(event.output_index, event.item, done=False)
        elif isinstance(event, ResponseOutputItemDoneEvent):
            self._item(event.output_index, event.item, done=True)
        elif isinstance(event, _PIECES):
            self._piece(event.output_index, event.delta, on_delta)
        elif isinstance(event, ResponseReasoningSummaryPartAddedEvent):
            if event.summary_index > 0:  # the parts read as paragraphs (`_thinking`)
                self._piece(event.output_index, _PARAGRAPH, on_delta)
        elif isinstance(event, ResponseFunctionCallArgumentsDoneEvent):
            block = self._blocks.get(event.output_index)
            if block is not None and isinstance(block.item, ResponseFunctionToolCall):
                block.item = block.item.model_copy(update={"arguments": event.arguments})
        elif isinstance(event, ResponseCompletedEvent | ResponseIncompleteEvent):
            self.response = event.response
            self.finished = True
            for index, item in enumerate(event.response.output):
                if index not in self._blocks or not self._blocks[index].done:
                    self._item(index, item, done=True)
        elif isinstance(event, ResponseFailedEvent):
            error = event.response.error
            raise StreamFailure(
                _stream_failure(error.code if error else None, error.message if error else "")
            )
        elif isinstance(event, ResponseErrorEvent):
            raise StreamFailure(_stream_failure(event.code, event.message))

    def _item(self, output_index: int, item: ResponseOutputItem, *, done: bool) -> None:
        block = self._blocks.get(output_index)
        if block is None:
            kind = _KINDS.get(item.type)
            if kind is None:
                return
            block = self._blocks[output_index] = _Block(len(self._blocks), kind, item)
        block.item = item
        block.done = done

    def _piece(self, output_index: int, text: str, on_delta: Callable[[Delta], None]) -> None:
        block = self._blocks.get(output_index)
        if block is None or not text:
            return
        block.streamed.append(text)
        name = block.item.name if isinstance(block.item, ResponseFunctionToolCall) else None
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
        return AssistantMessage(
            content=content,
            api=API,
            provider=provider,
            model=model,
            usage=usage_of(response.usage if response else None),
            stop_reason="aborted" if partial else self._stop_reason(),
            timestamp=timestamp,
        )

    def _stop_reason(self) -> StopReason:
        response = self.response
        if response is not None and response.status == "incomplete":
            reason = response.incomplete_details.reason if response.incomplete_details else None
            return _INCOMPLETE.get(reason or "", "stop")
        if any(b.kind == "toolCall" for b in self._blocks.values()):
            return "toolUse"
        return "stop"


_PARAGRAPH = "\n\n"


def _content(block: _Block, *, partial: bool) -> AssistantContent | None:
    item = block.item
    if isinstance(item, ResponseFunctionToolCall):
        if partial:
            return None
        arguments = item.arguments if block.done else "".join(block.streamed)
        return ToolCall(id=item.call_id, name=item.name, arguments=_arguments(arguments))
    if isinstance(item, ResponseReasoningItem):
        # The reasoning goes back only complete: its encrypted content is whole only once
        # the item is done, and the API refuses a cut one back without what followed it.
        whole = block.done and not partial and item.status != "incomplete"
        signature = (
            reasoning_signature(item.id, item.encrypted_content)
            if whole and item.encrypted_content
            else None
        )
        thinking = _thinking(item) if block.done else "".join(block.streamed)
        return ThinkingContent(thinking=thinking, signature=signature)
    if isinstance(item, ResponseOutputMessage):
        if not block.done:
            return TextContent(text="".join(block.streamed))
        parts = [p.text if p.type == "output_text" else p.refusal for p in item.content]
        return TextContent(text="".join(parts))
    return None


def _thinking(item: ResponseReasoningItem) -> str:
    """Its summary, the parts as paragraphs; or, from a model that shows its reasoning
    itself (gpt-oss behind an OpenAI-compatible server), that."""
    if item.summary:
        return _PARAGRAPH.join(part.text for part in item.summary)
    return _PARAGRAPH.join(part.text for part in item.content or [])


def _arguments(raw: str) -> dict[str, Any]:
    """Tool arguments; arguments that are not a JSON object are kept so the tool can
    report them."""
    try:
        value = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {"__invalid_json__": raw}
    if isinstance(value, dict):
        return value
    return {"__invalid_json__": raw}


def usage_of(usage: ResponseUsage | None) -> Usage:
    """Our usage for the API's. OpenAI counts the cached prompt tokens in `input_tokens`;
    ours (as Anthropic's) counts them apart, so input is what was read without the cache."""
    if usage is None:
        return Usage()
    details = usage.input_tokens_details
    cache_read = (details.cached_tokens or 0) if details else 0
    cache_write = (getattr(details, "cache_write_tokens", 0) or 0) if details else 0
    output_details = usage.output_tokens_details
    return Usage(
        input_tokens=max(0, (usage.input_tokens or 0) - cache_read - cache_write),
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=(output_details.reasoning_tokens or 0) if output_details else 0,
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
