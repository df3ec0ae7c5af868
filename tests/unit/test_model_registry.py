"""The model registry (domain/models.py): names, providers and what is known of each
model; the context window compaction keeps below (domain/compaction.py), unchanged for
every name a session could have before there were providers; the provider the messages
duragent makes are stamped with."""

from __future__ import annotations

import os

import pytest
from conftest import clear_callers_environment

from duragent.domain.compaction import context_window_of
from duragent.domain.entries import ModelChangeEntry
from duragent.domain.fallbacks import error_reply
from duragent.domain.models import (
    PROVIDERS,
    ModelInfo,
    ModelRef,
    UnknownModel,
    endpoint,
    model_info,
    parse_model,
    stored_model_ref,
)
from duragent.domain.turns import ProviderFailure

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    ("name", "provider", "model"),
    [
        ("claude-sonnet-5-5", "anthropic", "claude-sonnet-5-5"),
        ("anthropic:claude-sonnet-5-5", "anthropic", "claude-sonnet-5-5"),
        ("openai:gpt-4.1", "openai", "gpt-4.1"),
        ("openai-responses:o3", "openai-responses", "o3"),
        (
            "bedrock:anthropic.claude-sonnet-4-5-20250929-v1:0",
            "bedrock",
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
        ),
        ("vertex:claude-sonnet-4-5@20250929", "vertex", "claude-sonnet-4-5@20250929"),
        ("ollama:qwen3:8b", "ollama", "qwen3:8b"),
        ("gemini:gemini-2.5-pro", "gemini", "gemini-2.5-pro"),
        ("openrouter:anthropic/claude-sonnet-4.5", "openrouter", "anthropic/claude-sonnet-4.5"),
    ],
)
def test_a_model_is_named_provider_colon_model_and_a_bare_name_is_anthropic_s(
    name: str, provider: str, model: str
) -> None:
    ref = parse_model(name)
    assert ref == ModelRef(provider, model)
    assert ref.api == PROVIDERS[provider].api
    assert parse_model(ref.name) == ref


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("", "'' is not a model name (provider:model, e.g. openai:gpt-4.1)"),
        ("gpt 4", "'gpt 4' is not a model name"),
        ("mistral:large", "'mistral:large' names no provider duragent knows (known: anthropic, "),
        ("openai:", "'openai:' names a provider but no model"),
    ],
)
def test_a_bad_name_is_refused_saying_what_is_wrong(name: str, says: str) -> None:
    with pytest.raises(UnknownModel) as refused:
        parse_model(name)
    assert str(refused.value).startswith(says)
    # A name a session already holds is never refused: it is Anthropic's, as all were.
    assert stored_model_ref(name).provider == "anthropic"


def test_each_provider_s_preset_wire_key_and_address() -> None:
    assert {name: p.api for name, p in PROVIDERS.items()} == {
        "anthropic": "anthropic-messages",
        "bedrock": "anthropic-messages",
        "vertex": "anthropic-messages",
        "openai": "openai-chat",
        "openai-responses": "openai-responses",
        "ollama": "openai-chat",
        "vllm": "openai-chat",
        "openrouter": "openai-chat",
        "gemini": "openai-chat",
    }
    assert [name for name, p in PROVIDERS.items() if p.local] == ["ollama", "vllm"]
    ollama = endpoint(PROVIDERS["ollama"], offline_base_url="http://offline", environ={})
    assert ollama.base_url == "http://localhost:11434/v1" and not ollama.offline
    keyed = endpoint(PROVIDERS["openai"], environ={"OPENAI_API_KEY": "sk-1"})
    assert keyed.api_key == "sk-1" and keyed.base_url is None
    stand_in = endpoint(PROVIDERS["gemini"], offline_base_url="http://offline/", environ={})
    assert stand_in.offline and stand_in.base_url == "http://offline/v1"


@pytest.mark.parametrize(
    ("name", "window", "thinking"),
    [
        ("claude-sonnet-4-5-20250929", 200_000, "budget"),
        ("claude-sonnet-5-5", 200_000, "adaptive"),
        ("bedrock:us.anthropic.claude-opus-4-5-20251101-v1:0", 200_000, "budget"),
        ("vertex:claude-sonnet-5-5@20261001", 200_000, "adaptive"),
        ("openai:gpt-4.1", 1_047_576, "none"),
        ("openai-responses:o3", 200_000, "effort"),
        ("openai:gpt-5", 400_000, "effort"),
        ("gemini:gemini-2.5-pro", 1_048_576, "effort"),
        ("ollama:qwen3", 128_000, "none"),
        # Behind the Anthropic API a name that is not Claude's is one no table knows.
        ("gpt-4.1", 128_000, "none"),
        ("gemini-2.5-pro", 128_000, "none"),
    ],
)
def test_what_the_registry_knows_of_a_model(name: str, window: int, thinking: str) -> None:
    info = model_info(parse_model(name))
    assert (info.context_window, info.thinking) == (window, thinking)
    assert isinstance(info, ModelInfo) and info.max_output > 0
    assert context_window_of(name) == window


OLD_NAMES = [
    "claude-sonnet-5-5",
    "claude-sonnet-4-5-20250929",
    "claude-opus-4-1",
    "claude-3-haiku-20240307",
    "claude-next",
    "claude-after-hook",
    "claude-unpriced-1",
    "gpt-4.1",
    "gpt-4o",
    "o3",
    "gemini-2.5-pro",
    "house-model-1",
    "m",
    "",
    "claude sonnet",
    "gpt 4",
]
"""Names sessions had before there were providers (valid or not): bare, Anthropic's."""


@pytest.mark.parametrize("name", OLD_NAMES)
def test_the_context_window_of_an_old_name_is_what_it_always_was(name: str) -> None:
    """The workflow's compaction reads it: recorded histories replay only if it holds."""
    always = 200_000 if name.startswith("claude") else 128_000
    assert context_window_of(name) == always


def test_the_messages_duragent_makes_name_the_session_model_s_provider() -> None:
    failure = ProviderFailure(kind="auth", status=401, message="bad key", retryable=False)
    reply = error_reply(failure, "openai:gpt-4.1", 5)
    assert (reply.provider, reply.api, reply.model) == ("openai", "openai-chat", "gpt-4.1")
    reply = error_reply(failure, "claude-sonnet-5-5", 5)
    assert (reply.provider, reply.api, reply.model) == (
        "anthropic",
        "anthropic-messages",
        "claude-sonnet-5-5",
    )
    change = ModelChangeEntry(id="c", parent_id=None, timestamp=0, model="ollama:qwen3")
    assert change.provider == "ollama"
    # Stored entries carry theirs; an import gives pi's.
    stored = {"id": "c", "parent_id": None, "timestamp": 0, "type": "model_change"}
    assert ModelChangeEntry.model_validate({**stored, "model": "claude-x"}).provider == "anthropic"
    imported = ModelChangeEntry(id="c", parent_id=None, timestamp=0, model="m", provider="openai")
    assert imported.provider == "openai"


def test_every_provider_s_variables_are_cleared_for_the_tests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = {v for p in PROVIDERS.values() for v in (p.key_env, p.base_url_env) if v}
    assert {"OPENAI_API_KEY", "OLLAMA_BASE_URL", "GEMINI_API_KEY"} <= names
    for name in names:
        monkeypatch.setenv(name, "from-the-caller's-shell")
    clear_callers_environment()
    assert [name for name in names if name in os.environ] == []
