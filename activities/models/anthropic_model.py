"""Anthropic's Messages API behind the seam: Claude from Anthropic, Bedrock or Vertex.

Each through the official SDK's own client (`AsyncAnthropic`, `AsyncAnthropicBedrock`,
`AsyncAnthropicVertex`), which take their credentials as their SDKs do (an API key;
AWS's or Google Cloud's own). `anthropic_format` builds the request, `anthropic_stream`
reads the stream, `anthropic_errors` sorts its failures.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from typing import Any

import anthropic
from anthropic.types import TextBlock

from duragent.activities.models.anthropic_errors import classify
from duragent.activities.models.anthropic_format import request_params
from duragent.activities.models.anthropic_stream import ReplyStream
from duragent.activities.models.clients import ClientOptions, MissingProviderPackage
from duragent.activities.models.seam import (
    Delta,
    ModelRequest,
    SummaryRequest,
    provider_failures,
)
from duragent.domain.extras import install_hint
from duragent.domain.messages import AssistantMessage, Usage
from duragent.domain.models import OFFLINE_KEY, Api, Endpoint, Provider, UnknownModel

AnyAnthropic = anthropic.AsyncAnthropic | Any
"""`AsyncAnthropic`, or the SDK's Bedrock or Vertex client (the same `messages` API)."""


class AnthropicModel:
    """Claude over the Messages API, through `client` (one per worker and provider)."""

    api: Api = "anthropic-messages"

    def __init__(self, client: AnyAnthropic, provider: str = "anthropic") -> None:
        self._client = client
        self.provider = provider

    @property
    def sdk(self) -> AnyAnthropic:
        """The SDK's client it asks through."""
        return self._client

    def with_options(self, **options: Any) -> AnthropicModel:
        """The same, its SDK client copied with `options` (the SDK's `with_options`)."""
        return AnthropicModel(self._client.with_options(**options), self.provider)

    def ask(self, request: ModelRequest) -> AnthropicCall:
        return AnthropicCall(self._client, request, self.provider)

    async def complete(self, request: SummaryRequest) -> tuple[str, Usage]:
        with provider_failures(classify):
            reply = await self._client.messages.create(
                model=request.ref.model,
                max_tokens=request.max_tokens,
                messages=[{"role": "user", "content": request.prompt}],
                metadata={"user_id": request.session_id},
            )
        text = "".join(block.text for block in reply.content if isinstance(block, TextBlock))
        usage = Usage(
            input_tokens=reply.usage.input_tokens,
            output_tokens=reply.usage.output_tokens,
            cache_read_tokens=reply.usage.cache_read_input_tokens or 0,
            cache_write_tokens=reply.usage.cache_creation_input_tokens or 0,
        )
        return text, usage

    async def aclose(self) -> None:
        await self._client.close()


class AnthropicCall:
    def __init__(self, client: AnyAnthropic, request: ModelRequest, provider: str) -> None:
        self._client = client
        self._request = request
        self._provider = provider
        self._stream = ReplyStream()

    async def reply(self, on_delta: Callable[[Delta], None]) -> AssistantMessage:
        request = self._request
        params = request_params(
            request.snapshot, request.messages, request.tools, session_id=request.session_id
        )
        with provider_failures(classify):
            await self._stream.run(self._client, params, on_delta)
        return self._stream.message(
            model=request.ref.model, timestamp=request.timestamp, provider=self._provider
        )

    def so_far(self) -> AssistantMessage:
        return self._stream.message(
            model=self._request.ref.model,
            timestamp=self._request.timestamp,
            partial=True,
            provider=self._provider,
        )


class ProviderNotSetUp(UnknownModel):
    """The provider's client cannot be made as the environment stands: a variable it needs
    is unset (Bedrock's AWS region, Vertex's Google Cloud region)."""


_REGIONS = {
    "bedrock": "an AWS region: set AWS_REGION (or AWS_DEFAULT_REGION, or a region in the "
    "AWS profile's config)",
    "vertex": "a Google Cloud region: set CLOUD_ML_REGION (e.g. us-east5, or global)",
}
_PACKAGES = {"bedrock": "botocore", "vertex": "google.auth"}
"""What the cloud's SDK client signs its requests with (the extra of the same name)."""


def make(provider: Provider, where: Endpoint, options: ClientOptions) -> AnthropicModel:
    """The SDK's client for `provider` (Anthropic's own API, Bedrock or Vertex). Its HTTP
    goes over aiohttp (the SDK's `aiohttp` extra): with a hundred replies streaming at once
    it takes less than half the CPU per reply of the default transport, whose connection
    pool is pure Python. Retries are the workflow's, where they are visible and abortable.

    Bedrock's and Vertex's clients read their cloud's usual variables (AWS_REGION and AWS
    credentials or AWS_BEARER_TOKEN_BEDROCK; CLOUD_ML_REGION, ANTHROPIC_VERTEX_PROJECT_ID
    and Google's application default credentials). Raises `MissingProviderPackage` when
    their extra is not installed, `ProviderNotSetUp` when their region is not set."""
    timeout = anthropic.Timeout(connect=10.0, read=options.read_timeout_s, write=30.0, pool=10.0)
    http = anthropic.DefaultAioHttpClient()  # opens no connection until the first request
    client: AnyAnthropic
    if provider.name in ("bedrock", "vertex"):
        _check_package(provider.name)
        cloud = (
            anthropic.AsyncAnthropicBedrock
            if provider.name == "bedrock"
            else anthropic.AsyncAnthropicVertex
        )
        try:
            client = cloud(
                base_url=where.base_url, http_client=http, max_retries=0, timeout=timeout
            )
        except ValueError as exc:  # the SDK's words name its constructor's arguments
            if "region" not in str(exc).lower():
                raise ProviderNotSetUp(f"the {provider.name} provider: {exc}") from None
            raise ProviderNotSetUp(
                f"the {provider.name} provider needs {_REGIONS[provider.name]}"
            ) from None
    else:
        client = anthropic.AsyncAnthropic(
            api_key=where.api_key or OFFLINE_KEY,
            base_url=where.base_url,
            http_client=http,
            max_retries=0,
            timeout=timeout,
        )
    return AnthropicModel(client, provider.name)


def _check_package(provider: str) -> None:
    if provider == "bedrock" and os.environ.get("AWS_BEARER_TOKEN_BEDROCK"):
        return  # a Bedrock API key: sent as a bearer token, nothing signed
    package = _PACKAGES[provider]
    try:
        found = importlib.util.find_spec(package) is not None
    except ModuleNotFoundError:  # not even its parent package
        found = False
    if not found:
        raise MissingProviderPackage(
            f"the {provider} provider needs the {package} package: "
            + install_hint(provider, package)
        )
