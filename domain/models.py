"""The models duragent can run, named `provider:model` (as pydantic-ai and pi name them):
which provider serves a model, over which wire API, where it is reached, and what the
model is (its context window, its output limit, how it thinks).

A provider is a vendor or a server that serves models: Anthropic (also through Bedrock and
Vertex), OpenAI's Chat Completions and Responses APIs, and every OpenAI-compatible
server (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter, Gemini's OpenAI endpoint). A
bare model name (`claude-sonnet-5-5`, the names sessions have always had) is Anthropic's.
Pure data: the activities make the clients (`activities.models`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Api = Literal["anthropic-messages", "openai-chat", "openai-responses"]
"""The wire APIs duragent speaks, each through its vendor's official SDK."""

ThinkingStyle = Literal["adaptive", "budget", "effort", "none"]
"""How a model is asked to think: Anthropic's adaptive thinking with an effort, a thinking
token budget (older Claude models), OpenAI's reasoning effort, or not at all."""


@dataclass(frozen=True)
class Provider:
    name: str
    api: Api
    key_env: str | None
    """The variable its API key is read from, as its own SDK and CLI read it; None: it
    needs none (a local server) or takes its cloud's credentials (Bedrock, Vertex)."""
    base_url_env: str | None
    """The variable naming where it is reached, when not at its default."""
    base_url: str | None = None
    """Where it is reached when the variable is unset (None: the SDK's own default)."""
    local: bool = False
    """A server on the user's own machines: no key needed, its usage costs nothing."""


PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider("anthropic", "anthropic-messages", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
        Provider("bedrock", "anthropic-messages", None, "ANTHROPIC_BEDROCK_BASE_URL"),
        Provider("vertex", "anthropic-messages", None, "ANTHROPIC_VERTEX_BASE_URL"),
        Provider("openai", "openai-chat", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
        Provider("openai-responses", "openai-responses", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
        Provider(
            "ollama", "openai-chat", None, "OLLAMA_BASE_URL", "http://localhost:11434/v1", True
        ),
        Provider(
            "vllm", "openai-chat", "VLLM_API_KEY", "VLLM_BASE_URL", "http://localhost:8000/v1", True
        ),
        Provider(
            "openrouter",
            "openai-chat",
            "OPENROUTER_API_KEY",
            "OPENROUTER_BASE_URL",
            "https://openrouter.ai/api/v1",
        ),
        Provider(
            "gemini",
            "openai-chat",
            "GEMINI_API_KEY",
            "GEMINI_BASE_URL",
            "https://generativelanguage.googleapis.com/v1beta/openai/",
        ),
    )
}

DEFAULT_PROVIDER = "anthropic"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}")


class UnknownModel(ValueError):
    """A model name that names no provider duragent knows, or no model at all."""


@dataclass(frozen=True)
class ModelRef:
    provider: str
    model: str
    """The model's name as its provider's API takes it."""

    @property
    def name(self) -> str:
        """`provider:model`; a bare name for Anthropic's, as sessions have always named them."""
        return self.model if self.provider == DEFAULT_PROVIDER else f"{self.provider}:{self.model}"

    @property
    def api(self) -> Api:
        return PROVIDERS[self.provider].api


def parse_model(name: str) -> ModelRef:
    """`provider:model`, or a bare model name (Anthropic's). `UnknownModel` names what is
    wrong: an empty or malformed name, or a provider duragent does not know."""
    text = name.strip()
    if not _NAME.fullmatch(text):
        raise UnknownModel(f"{name!r} is not a model name (provider:model, e.g. openai:gpt-4.1)")
    provider, sep, model = text.partition(":")
    if not sep or provider not in PROVIDERS:
        if sep and not provider.startswith(("claude", "anthropic.")):
            known = ", ".join(PROVIDERS)
            raise UnknownModel(f"{name!r} names no provider duragent knows (known: {known})")
        return ModelRef(DEFAULT_PROVIDER, text)
    if not model:
        raise UnknownModel(f"{name!r} names a provider but no model")
    return ModelRef(provider, model)


def stored_model_ref(name: str) -> ModelRef:
    """`parse_model` of a name a session already holds, which never raises: a name it
    refuses (stored before names were checked) is Anthropic's, as every name was then."""
    try:
        return parse_model(name)
    except UnknownModel:
        return ModelRef(DEFAULT_PROVIDER, name.strip())


@dataclass(frozen=True)
class ModelInfo:
    context_window: int
    """Tokens of context the model takes (compaction keeps below it)."""
    max_output: int
    """Tokens the model may write in one reply."""
    thinking: ThinkingStyle


_CLAUDE = r"(?:(?:[a-z]+(?:-[a-z]+)?\.)?anthropic\.)?claude-"
"""Claude as Anthropic and Vertex name it (`claude-sonnet-4-5@20250929` on Vertex), and as
Bedrock does (`anthropic.claude-...`, or a cross-region profile's `us.anthropic.claude-...`)."""

_KNOWN: list[tuple[str, ModelInfo]] = [
    # Anthropic: adaptive thinking on current models, a budget on the older ones.
    (_CLAUDE + r"(3|sonnet-4-[025]|opus-4-[0125]|haiku-4-5)", ModelInfo(200_000, 64_000, "budget")),
    (_CLAUDE, ModelInfo(200_000, 64_000, "adaptive")),
    # OpenAI: reasoning models take an effort; GPT-4.1 has a million tokens of context.
    (r"(o1|o3|o4)(-|$)", ModelInfo(200_000, 100_000, "effort")),
    (r"gpt-5", ModelInfo(400_000, 128_000, "effort")),
    (r"gpt-4\.1", ModelInfo(1_047_576, 32_768, "none")),
    (r"gpt-4o", ModelInfo(128_000, 16_384, "none")),
    (r"gemini-", ModelInfo(1_048_576, 65_536, "effort")),
]
_DEFAULT = ModelInfo(128_000, 8_192, "none")
"""A model this table does not know (a local model, a new one): a cautious window."""


def model_info(ref: ModelRef) -> ModelInfo:
    """What duragent knows of the model, by the first pattern its name starts with; a
    cautious default for one it does not know (a session may set its context window).

    Behind the Anthropic Messages API a model is Claude, or one this table cannot know (a
    gateway's behind `ANTHROPIC_BASE_URL`): only Claude's patterns apply there, so a bare
    name that is not Claude's (`gpt-4.1`) keeps the cautious window such a name always had
    (the workflow's compaction reads it: `domain.compaction.context_window_of`)."""
    claude_only = ref.api == "anthropic-messages"
    for pattern, info in _KNOWN:
        if claude_only and not pattern.startswith(_CLAUDE):
            continue
        if re.match(pattern, ref.model):
            return info
    return _DEFAULT


OFFLINE_KEY = "offline"
"""The key sent to the offline model (which checks none)."""


@dataclass(frozen=True)
class Endpoint:
    """Where a provider is reached, and with which key (None: the SDK's own credentials)."""

    base_url: str | None
    api_key: str | None
    offline: bool = False
    """The offline model stands in for the provider (no key, no address of its own)."""


def endpoint(
    provider: Provider,
    *,
    offline_base_url: str | None = None,
    environ: Mapping[str, str],
) -> Endpoint:
    """Where `provider` is reached: its address and key from its variables; without
    either (and not a server of the user's own), the offline model at `offline_base_url`
    when one is given (the OpenAI wires under its `/v1`)."""
    key = environ.get(provider.key_env) if provider.key_env else None
    url = environ.get(provider.base_url_env) if provider.base_url_env else None
    if not key and not url and not provider.local and offline_base_url and provider.key_env:
        base = offline_base_url.rstrip("/")
        if provider.api != "anthropic-messages":
            base += "/v1"
        return Endpoint(base, OFFLINE_KEY, offline=True)
    return Endpoint(url or provider.base_url, key or None)
