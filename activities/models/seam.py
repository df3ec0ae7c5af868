"""The model seam: what a turn asks of a model client, whatever provider serves it.

A client speaks one wire API (`domain.models.Api`) through its vendor's SDK: it turns a
request in the neutral messages of `domain.messages` into its API's request, streams the
reply back as neutral `Delta`s and one `AssistantMessage`, and sorts its failures into the
neutral `ProviderFailure` (raised as `ModelFailed`). Nothing of a vendor's SDK crosses
it: the turn (`activities.model_turn`), the summaries (`activities.tree_ops`) and the
worker (`client.workers`) know only what is here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from duragent.domain.config import TurnSnapshot
from duragent.domain.events import DeltaKind
from duragent.domain.messages import AssistantMessage, Usage
from duragent.domain.models import Api, ModelRef, parse_model
from duragent.domain.tools import ToolSpec
from duragent.domain.transcript import LlmMessage
from duragent.domain.turns import ProviderFailure


@dataclass(frozen=True)
class Delta:
    """A piece of the reply as it arrives: text, thinking, or a tool call's argument JSON,
    for the content block at `content_index` (the index it has in the final message)."""

    content_index: int
    kind: DeltaKind
    text: str
    tool_name: str | None = None


@dataclass(frozen=True)
class ModelRequest:
    snapshot: TurnSnapshot
    """The model (`provider:model`) and how to ask it: system prompt, resources,
    thinking level, max tokens."""
    messages: list[LlmMessage]
    """The context, as the model reads it (every tool call paired with its result)."""
    tools: list[ToolSpec]
    """The tools the model is offered."""
    session_id: str
    """Who asks, as the provider is told (for its abuse checks)."""
    timestamp: int
    """When the reply began (ms since the epoch): its message's timestamp."""

    @property
    def ref(self) -> ModelRef:
        return parse_model(self.snapshot.model)


@dataclass(frozen=True)
class SummaryRequest:
    """One prompt answered in one piece (a compaction's or a branch's summary)."""

    model: str
    """`provider:model`, as sessions name models."""
    prompt: str
    max_tokens: int
    session_id: str

    @property
    def ref(self) -> ModelRef:
        return parse_model(self.model)


class ModelFailed(Exception):
    """The provider failed the request: `failure` says how, and whether a retry may pass."""

    def __init__(self, failure: ProviderFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


@contextmanager
def provider_failures(
    classify: Callable[[BaseException], ProviderFailure | None],
) -> Iterator[None]:
    """What fails in the block raised as `ModelFailed` when `classify` (the wire's sorting
    of its SDK's exceptions) knows it as the provider's failure; anything else, a
    `ModelFailed` too, goes through as it is."""
    try:
        yield
    except ModelFailed:
        raise
    except Exception as exc:
        failure = classify(exc)
        if failure is None:
            raise
        raise ModelFailed(failure) from exc


class ReplyStream(Protocol):
    """One request to the model, streamed once."""

    async def reply(self, on_delta: Callable[[Delta], None]) -> AssistantMessage:
        """The model's whole reply, each piece of it told to `on_delta` as it arrives.
        Raises `ModelFailed` when the provider fails it; cancelled, it lets the
        cancellation through (`so_far` then has what had arrived)."""
        ...

    def so_far(self) -> AssistantMessage:
        """The reply as far as it arrived, stopped as "aborted" and without its tool calls
        (none of them will run)."""
        ...


class ModelClient(Protocol):
    """A provider's client for one wire API: one per provider per worker."""

    api: Api

    def ask(self, request: ModelRequest) -> ReplyStream:
        """The request, to be streamed with `ReplyStream.reply`."""
        ...

    async def complete(self, request: SummaryRequest) -> tuple[str, Usage]:
        """The reply's text and usage, in one piece; raises `ModelFailed`."""
        ...

    async def aclose(self) -> None:
        """Close its connections (the worker that made it stops)."""
        ...


class FailedReply:
    """A reply that fails as it starts, with `failure` (a model no client of the worker
    can ask, a provider with no key): nothing is sent anywhere."""

    def __init__(self, request: ModelRequest, failure: ProviderFailure) -> None:
        self._request = request
        self._failure = failure

    async def reply(self, on_delta: Callable[[Delta], None]) -> AssistantMessage:
        raise ModelFailed(self._failure)

    def so_far(self) -> AssistantMessage:
        return AssistantMessage(
            content=[],
            model=self._request.snapshot.model,
            stop_reason="aborted",
            timestamp=self._request.timestamp,
        )
