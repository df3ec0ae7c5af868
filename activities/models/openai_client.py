"""What the clients of OpenAI's two APIs (`openai_chat`: Chat Completions, `openai_responses`:
Responses) share: the SDK's client they ask through, a request posted as the API's JSON
and streamed back as parsed JSON, and the readers of that JSON (its usage among them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import openai

from duragent.activities.models.clients import ClientOptions
from duragent.domain.messages import Usage
from duragent.domain.models import Endpoint


class OpenAIModel:
    """A model over one of OpenAI's APIs, through `client` (one per worker and provider);
    `provider` is the name its messages are stamped with (openai, ollama, vllm, ...)."""

    def __init__(self, client: openai.AsyncOpenAI, provider: str) -> None:
        self._client = client
        self.provider = provider

    @property
    def sdk(self) -> openai.AsyncOpenAI:
        """The SDK's client it asks through."""
        return self._client

    async def aclose(self) -> None:
        await self._client.close()


def sdk_client(where: Endpoint, options: ClientOptions) -> openai.AsyncOpenAI:
    """The SDK's client for the provider at `where`. Its HTTP goes over aiohttp when the
    SDK's `aiohttp` extra is installed, as Anthropic's does (`anthropic_model.make`: less
    CPU per streamed reply); over the SDK's default transport otherwise. Retries are the
    workflow's, where they are visible and abortable."""
    timeout = openai.Timeout(connect=10.0, read=options.read_timeout_s, write=30.0, pool=10.0)
    return openai.AsyncOpenAI(
        api_key=where.api_key or "none",  # a server of the user's own may want none
        base_url=where.base_url,
        max_retries=0,
        timeout=timeout,
        **_aiohttp(),
    )


def _aiohttp() -> dict[str, Any]:
    """The SDK's aiohttp transport as `AsyncOpenAI`'s `http_client`, if it can have it."""
    try:
        return {"http_client": openai.DefaultAioHttpClient()}
    except (AttributeError, RuntimeError):  # an SDK without it, or aiohttp not installed
        return {}


async def post_stream(
    client: openai.AsyncOpenAI, path: str, body: Mapping[str, Any]
) -> openai.AsyncStream[object]:
    """`body` (the API's JSON already, streaming asked for) posted to `path`, its stream
    handing each chunk or event over as parsed JSON: what the SDK's `create` does, without
    converting its typed parameters, which walks the whole transcript on every request."""
    return await client.post(
        path,
        body=body,
        cast_to=object,
        options={"security": {"bearer_auth": True}},
        stream=True,
        stream_cls=openai.AsyncStream[object],
    )


def json_object(value: object) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one (a field a server left out, or
    sent as null)."""
    return value if isinstance(value, dict) else {}


def json_objects(value: object) -> list[dict[str, Any]]:
    """The JSON objects of `value` if it is an array, else none."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def json_int(obj: Mapping[str, Any], name: str) -> int:
    """A count field of a JSON object; 0 when absent, null or not a number."""
    value = obj.get(name)
    return value if isinstance(value, int) else 0


def usage_from(usage: Mapping[str, Any] | None, *, read: str, written: str) -> Usage:
    """Our usage for the API's (its JSON object), whose counts are named `{read}_tokens`
    and `{written}_tokens` (Chat Completions: prompt, completion; Responses: input,
    output), each with its `_details`. OpenAI counts the cached prompt tokens in the read
    ones; ours (as Anthropic's) counts them apart, so input is what was read without the
    cache. The reasoning tokens are part of the written ones, as of our output ones."""
    if usage is None:
        return Usage()
    details = json_object(usage.get(f"{read}_tokens_details"))
    cache_read = json_int(details, "cached_tokens")
    cache_write = json_int(details, "cache_write_tokens")
    return Usage(
        input_tokens=max(0, json_int(usage, f"{read}_tokens") - cache_read - cache_write),
        output_tokens=json_int(usage, f"{written}_tokens"),
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=json_int(
            json_object(usage.get(f"{written}_tokens_details")), "reasoning_tokens"
        ),
    )
