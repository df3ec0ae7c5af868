"""A worker's model clients: one per provider, made when a model of it is first asked.

Where each provider is reached and with which key comes from its usual variables
(`domain.models.PROVIDERS`: `OPENAI_API_KEY`, `OLLAMA_BASE_URL`, ...), read when the
client is made: keys go to the SDK's client and never into a workflow, an event or a log.
A provider that needs a key and has neither key nor address nor the offline model is
never called: its calls fail at once, naming the variable to set (`NoKey`).
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass

from duragent.activities.models.seam import (
    FailedReply,
    ModelClient,
    ModelFailed,
    ModelRequest,
    SummaryRequest,
)
from duragent.domain.extras import install_hint
from duragent.domain.messages import Usage
from duragent.domain.models import (
    PROVIDERS,
    Api,
    Endpoint,
    Provider,
    UnknownModel,
    endpoint,
    parse_model,
)
from duragent.domain.turns import ProviderFailure


@dataclass(frozen=True)
class ClientOptions:
    """What every client of a worker shares."""

    read_timeout_s: float = 600.0
    """A stream silent this long counts as cut off (`Settings.model_read_timeout_s`)."""


class ModelClients:
    """The clients a worker asks models through, one per provider, made on first use
    (so a worker needs only the SDKs of the providers its sessions name)."""

    def __init__(
        self,
        *,
        offline_base_url: str | None = None,
        options: ClientOptions | None = None,
        environ: Mapping[str, str] | None = None,
        given: Mapping[str, ModelClient] | None = None,
    ) -> None:
        self._offline_base_url = offline_base_url
        self._options = options or ClientOptions()
        self._environ = environ
        self._clients: dict[str, ModelClient] = dict(given or {})
        self._own: set[str] = set()

    def for_model(self, model: str) -> ModelClient:
        """The client for `model` (`provider:model`, or a bare Claude model name).
        Raises `UnknownModel` for a name no provider serves, `MissingProviderPackage`
        when the provider's SDK is not installed."""
        provider = PROVIDERS[parse_model(model).provider]
        client = self._clients.get(provider.name)
        if client is None:
            env = os.environ if self._environ is None else self._environ
            where = endpoint(provider, offline_base_url=self._offline_base_url, environ=env)
            lacking = None if where.offline else missing_key(provider, env)
            if lacking is not None:  # the SDK would send a made-up key: ask nobody
                client = NoKey(provider, lacking)
            else:
                client = make_client(provider, where, self._options)
            self._clients[provider.name] = client
            self._own.add(provider.name)
        return client

    def warm(self, model: str) -> None:
        """Make `model`'s client now (its SDK imported, its connection pool built): a
        worker does it before it polls, so that its first call (often a lost worker's
        call, moved on to it) does not wait about a second for the import. A model it
        cannot make a client for is left for its first call to report."""
        with contextlib.suppress(UnknownModel):  # MissingProviderPackage too
            self.for_model(model)

    async def aclose(self) -> None:
        """Close the clients it made (not those it was given)."""
        for name in sorted(self._own):
            await self._clients.pop(name).aclose()
        self._own.clear()


def missing_key(provider: Provider, environ: Mapping[str, str]) -> str | None:
    """The variable `provider`'s calls lack: its key, when it needs one and has neither key
    nor address of its own (a server of the user's, which may want none); else None."""
    if provider.key_env is None or provider.local or environ.get(provider.key_env):
        return None
    if provider.base_url_env and environ.get(provider.base_url_env):
        return None
    return provider.key_env


def missing_key_notice(
    model: str, environ: Mapping[str, str], offline_base_url: str | None
) -> str | None:
    """What a worker says as it starts when its default model cannot be called: one line
    naming the variable to set and the ways round it; None when the model can be called."""
    ref = parse_model(model)
    provider = PROVIDERS[ref.provider]
    lacking = None if offline_base_url else missing_key(provider, environ)
    if lacking is None:
        return None
    return (
        f"No {lacking}: calls to {ref.provider}:{ref.model} will fail; set it (or "
        f"{provider.base_url_env} for a server of your own), or DURAGENT_OFFLINE_MODEL_URL "
        "for the offline model (duragent run and duragent worker start one)"
    )


class NoKey:
    """The client of a provider whose key is missing: every call fails at once, not
    retried (no attempt could succeed), naming the variable to set."""

    def __init__(self, provider: Provider, variable: str) -> None:
        self.api: Api = provider.api
        self._failure = ProviderFailure(
            kind="auth",
            status=None,
            message=(
                f"No {variable}: the {provider.name} provider needs it; set it where the "
                f"worker runs (or {provider.base_url_env} for a server of your own, or "
                "DURAGENT_OFFLINE_MODEL_URL for the offline model)"
            ),
            retryable=False,
        )

    def ask(self, request: ModelRequest) -> FailedReply:
        return FailedReply(request, self._failure)

    async def complete(self, request: SummaryRequest) -> tuple[str, Usage]:
        raise ModelFailed(self._failure)

    async def aclose(self) -> None:
        return None


class MissingProviderPackage(UnknownModel):
    """The provider's SDK is an optional extra that is not installed."""


WIRE_MODULES: dict[Api, str] = {
    "anthropic-messages": "duragent.activities.models.anthropic_model",
    "openai-chat": "duragent.activities.models.openai_chat",
    "openai-responses": "duragent.activities.models.openai_responses",
}
"""The module speaking each wire API: its `make(provider, endpoint, options)` makes the
client (imported on first use, so each needs its SDK only when a session names it)."""

_EXTRAS: dict[Api, str] = {"openai-chat": "openai", "openai-responses": "openai"}


def make_client(provider: Provider, where: Endpoint, options: ClientOptions) -> ModelClient:
    """The client for `provider`'s wire API, through its vendor's SDK."""
    try:
        module = importlib.import_module(WIRE_MODULES[provider.api])
    except ModuleNotFoundError as exc:
        extra = _EXTRAS.get(provider.api, provider.name)
        raise MissingProviderPackage(
            f"the {provider.name} provider needs the {exc.name} package: "
            + install_hint(extra, exc.name or extra)
        ) from None
    client: ModelClient = module.make(provider, where, options)
    return client
