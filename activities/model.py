"""Asking the model: one request, its reply streamed back as it arrives.

The one place a turn speaks a provider's API (Anthropic's Messages API, through the
official SDK: `anthropic_format` builds the request, `anthropic_stream` reads the
stream, `provider_errors` sorts its failures). Everything around the call (the save
point, the context, run events, staging, the calls' checks) is the turn's
(`activities.model_turn`), in the provider-neutral messages of `domain.messages`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import anthropic

from duragent.activities.anthropic_format import request_params
from duragent.activities.anthropic_stream import Delta, ReplyStream, assistant_message
from duragent.activities.provider_errors import classify
from duragent.domain.config import TurnSnapshot
from duragent.domain.messages import AssistantMessage
from duragent.domain.tools import ToolSpec
from duragent.domain.transcript import LlmMessage
from duragent.domain.turns import ProviderFailure

__all__ = ["Delta", "Model", "ModelCall", "ModelFailed", "ModelRequest"]


@dataclass(frozen=True)
class ModelRequest:
    snapshot: TurnSnapshot
    """The model and how to ask it: system prompt, resources, thinking level, max tokens."""
    messages: list[LlmMessage]
    """The context, as the model reads it (every tool call paired with its result)."""
    tools: list[ToolSpec]
    """The tools the model is offered."""
    session_id: str
    """Who asks, as the provider is told (for its abuse checks)."""
    timestamp: int
    """When the reply began (ms since the epoch): its message's timestamp."""


class ModelFailed(Exception):
    """The provider failed the request: `failure` says how, and whether a retry may pass."""

    def __init__(self, failure: ProviderFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class Model:
    """Asks the model; holds nothing but the client (one per worker)."""

    def __init__(self, client: anthropic.AsyncAnthropic) -> None:
        self._client = client

    def ask(self, request: ModelRequest) -> ModelCall:
        """The request, to be streamed with `ModelCall.reply`."""
        return ModelCall(self._client, request)


class ModelCall:
    """One request to the model: `reply` streams it; `so_far` is the reply as far as it
    arrived (what a cancelled call keeps)."""

    def __init__(self, client: anthropic.AsyncAnthropic, request: ModelRequest) -> None:
        self._client = client
        self._request = request
        self._stream = ReplyStream()

    async def reply(self, on_delta: Callable[[Delta], None]) -> AssistantMessage:
        """The model's whole reply, each piece of it told to `on_delta` as it arrives.
        Raises `ModelFailed` when the provider fails it; cancelled, it lets the
        cancellation through (`so_far` then has what had arrived)."""
        request = self._request
        params = request_params(
            request.snapshot, request.messages, request.tools, session_id=request.session_id
        )
        try:
            reply = await self._stream.run(self._client, params, on_delta)
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
            raise ModelFailed(failure) from exc
        return assistant_message(reply, model=request.snapshot.model, timestamp=request.timestamp)

    def so_far(self) -> AssistantMessage:
        """The reply as far as it arrived, stopped as "aborted" and without its tool calls
        (none of them will run)."""
        return assistant_message(
            self._stream.so_far,
            model=self._request.snapshot.model,
            timestamp=self._request.timestamp,
            partial=True,
        )
