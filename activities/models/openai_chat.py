"""OpenAI's Chat Completions API behind the seam: OpenAI's models, and every server that
speaks the API (Ollama, vLLM, llama.cpp, OpenRouter, Gemini's OpenAI endpoint).

Through the official SDK's `AsyncOpenAI` (its auth, base URL, timeouts, transport and
errors), but lean: `openai_format` builds the request as the API's JSON and it is posted as
it is (`client.post`), without `chat.completions.create`, whose conversion of its typed
parameters walks the whole transcript on every request; and the stream's chunks are read
as the JSON objects they are, not built into the SDK's pydantic `ChatCompletionChunk` each
(together about three quarters of the client's CPU per request, more the longer the
transcript). `openai_errors` sorts the failures. The stream is read here, chunk by chunk:
each piece goes to `on_delta` the moment it arrives, what the servers add beyond OpenAI's
own chunks (their reasoning, as `reasoning_content` or `reasoning`) is read too, and a
stream that ends before its `finish_reason`, or whose connection fails, counts as cut off
(a retryable failure).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import openai

from duragent.activities.models import openai_client
from duragent.activities.models.clients import ClientOptions
from duragent.activities.models.openai_client import OpenAIModel, json_object, json_objects
from duragent.activities.models.openai_errors import classify
from duragent.activities.models.openai_format import request_params, user_id
from duragent.activities.models.reply_stream import read_events, reply_message, tool_arguments
from duragent.activities.models.seam import (
    Delta,
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

API: Api = "openai-chat"

_STOP_REASONS: dict[str, StopReason] = {
    "stop": "stop",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
    "length": "length",
    "content_filter": "error",
}

REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Where OpenAI-compatible servers stream a reply's reasoning (OpenAI's own models do not
return it): `reasoning_content` (vLLM, DeepSeek, llama.cpp, SGLang), `reasoning` (Ollama,
OpenRouter). The first that has text is read: a server sending both sends the same."""


class OpenAIChatModel(OpenAIModel):
    """A model over Chat Completions (see `OpenAIModel`)."""

    api: Api = API

    def __init__(self, client: openai.AsyncOpenAI, provider: str = "openai") -> None:
        super().__init__(client, provider)

    def ask(self, request: ModelRequest) -> OpenAIChatCall:
        return OpenAIChatCall(self._client, request, self.provider)

    async def complete(self, request: SummaryRequest) -> tuple[str, Usage]:
        with provider_failures(classify):
            reply = await self._client.chat.completions.create(
                model=request.ref.model,
                messages=[{"role": "user", "content": request.prompt}],
                max_completion_tokens=request.max_tokens,
                user=user_id(request.session_id),
            )
        text = "".join(choice.message.content or "" for choice in reply.choices[:1])
        return text, usage_of(reply.usage.model_dump() if reply.usage else None)


@dataclass
class _Call:
    """A tool call as its pieces arrive: the id and name from its first chunk, its
    argument JSON in fragments."""

    content_index: int
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Reply:
    """The reply as far as it arrived. Each block takes the next content index when its
    first piece arrives, so the index a delta names is the one the block has in the final
    message (the servers send reasoning, then text, then the tool calls in order)."""

    model: str
    thinking: list[str] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    order: list[str | int] = field(default_factory=list)
    """The blocks in content order: "thinking", "text", or a tool call's index."""
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)

    def index_of(self, block: str | int) -> int:
        if block not in self.order:
            self.order.append(block)
        return self.order.index(block)

    def content(self) -> list[AssistantContent]:
        content: list[AssistantContent] = []
        for block in self.order:
            if block == "thinking":
                content.append(ThinkingContent(thinking="".join(self.thinking)))
            elif block == "text":
                content.append(TextContent(text="".join(self.text)))
            elif isinstance(block, int):
                call = self.calls[block]
                content.append(
                    ToolCall(
                        id=call.id or f"call_{uuid.uuid4().hex[:24]}",
                        name=call.name,
                        arguments=tool_arguments("".join(call.arguments)),
                    )
                )
        return content


class OpenAIChatCall:
    """One request, streamed once with `reply`."""

    def __init__(self, client: openai.AsyncOpenAI, request: ModelRequest, provider: str) -> None:
        self._client = client
        self._request = request
        self._provider = provider
        self._reply = _Reply(model=request.ref.model)

    async def reply(self, on_delta: Callable[[Delta], None]) -> AssistantMessage:
        request = self._request
        params = request_params(
            request.ref,
            request.snapshot,
            request.messages,
            request.tools,
            session_id=request.session_id,
        )
        body = {**params, "stream": True, "stream_options": {"include_usage": True}}
        with provider_failures(classify):
            stream = await openai_client.post_stream(self._client, "/chat/completions", body)
            async with stream:
                await self._read(stream, on_delta)
        reply = self._reply
        calls = bool(reply.calls)
        stop = _STOP_REASONS.get(reply.finish_reason or "", "stop")
        if stop == "stop" and calls:
            stop = "toolUse"  # a server that says "stop" after tool calls (older Ollama)
        return self._message(partial=False, stop=stop)

    async def _read(
        self, stream: openai.AsyncStream[object], on_delta: Callable[[Delta], None]
    ) -> None:
        await read_events(stream, self._take, on_delta)
        if self._reply.finish_reason is None:
            raise IncompleteStream("the model stream ended before its finish_reason")

    def _take(self, chunk: object, on_delta: Callable[[Delta], None]) -> None:
        """Note one chunk (its JSON object): the pieces of its delta go to `on_delta`."""
        if not isinstance(chunk, dict):
            raise UnreadableStream("the model stream could not be read: a chunk not an object")
        reply = self._reply
        model = chunk.get("model")
        if model and isinstance(model, str):
            reply.model = model
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            reply.usage = usage_of(usage)
        for choice in json_objects(chunk.get("choices")):
            if (choice.get("index") or 0) != 0:
                continue  # one choice asked for (n = 1); a server may not number it
            for delta in _deltas(reply, json_object(choice.get("delta"))):
                on_delta(delta)
            finish = choice.get("finish_reason")
            if isinstance(finish, str):
                reply.finish_reason = finish

    def so_far(self) -> AssistantMessage:
        return self._message(partial=True)

    def _message(self, *, partial: bool, stop: StopReason = "stop") -> AssistantMessage:
        """Our message for what arrived (a partial one as `reply_message` makes it)."""
        reply = self._reply
        return reply_message(
            reply.content(),
            partial=partial,
            stop=stop,
            api=API,
            provider=self._provider,
            model=reply.model,
            usage=reply.usage,
            timestamp=self._request.timestamp,
        )


def _deltas(reply: _Reply, delta: dict[str, Any]) -> list[Delta]:
    """The pieces of one chunk's delta (its JSON object), kept in `reply` and told as
    `Delta`s."""
    told: list[Delta] = []
    reasoning = _reasoning(delta)
    if reasoning:
        reply.thinking.append(reasoning)
        told.append(Delta(reply.index_of("thinking"), "thinking", reasoning))
    for text in (delta.get("content"), delta.get("refusal")):
        if text and isinstance(text, str):
            reply.text.append(text)
            told.append(Delta(reply.index_of("text"), "text", text))
    for piece in json_objects(delta.get("tool_calls")):
        call = _call(reply, piece)
        fragment = json_object(piece.get("function")).get("arguments")
        if fragment and isinstance(fragment, str):
            call.arguments.append(fragment)
            told.append(Delta(call.content_index, "toolCall", fragment, tool_name=call.name))
    return told


def _reasoning(delta: dict[str, Any]) -> str:
    for name in REASONING_FIELDS:
        value = delta.get(name)
        if isinstance(value, str) and value:
            return value
    return ""


def _call(reply: _Reply, piece: dict[str, Any]) -> _Call:
    """The call a tool call's piece belongs to: by its `index`, or (a server that sends
    none) by its id, a piece without either continuing the last call."""
    given = piece.get("id")
    piece_id = given if isinstance(given, str) else ""
    index = piece.get("index")
    if not isinstance(index, int):
        known = [i for i, c in reply.calls.items() if piece_id and c.id == piece_id]
        if known:
            index = known[0]
        elif piece_id or not reply.calls:
            index = max(reply.calls, default=-1) + 1
        else:
            index = max(reply.calls)
    call = reply.calls.get(index)
    if call is None:
        call = reply.calls[index] = _Call(content_index=reply.index_of(index))
    if piece_id and not call.id:
        call.id = piece_id
    name = json_object(piece.get("function")).get("name")
    if name and isinstance(name, str) and not call.name:
        call.name = name
    return call


def usage_of(usage: Mapping[str, Any] | None) -> Usage:
    """Our usage for the API's (its JSON object): `openai_client.usage_from`."""
    return openai_client.usage_from(usage, read="prompt", written="completion")


def make(provider: Provider, where: Endpoint, options: ClientOptions) -> OpenAIChatModel:
    """The SDK's client (`openai_client.sdk_client`) for `provider`: OpenAI, or a server
    that speaks its API."""
    return OpenAIChatModel(openai_client.sdk_client(where, options), provider.name)
