"""No silent real-API calls: a provider that needs a key and has neither key nor address
nor the offline model is never asked; its calls fail at once, not retried, naming the
variable to set, and a worker says so in one line as it starts."""

from __future__ import annotations

import pytest

from duragent.activities.models.clients import ModelClients, missing_key_notice
from duragent.activities.models.seam import ModelFailed, ModelRequest, SummaryRequest
from duragent.domain.config import TurnSnapshot
from duragent.domain.messages import user_text

pytestmark = pytest.mark.fast


def request(model: str) -> ModelRequest:
    snapshot = TurnSnapshot.model_validate(
        {
            "model": model,
            "thinking_level": "off",
            "system_prompt": "You help.",
            "active_tools": None,
            "max_tokens": 1024,
        }
    )
    return ModelRequest(snapshot, [user_text("hello", 1)], [], "s1", 1_000)


@pytest.mark.parametrize(
    ("model", "variable"),
    [("claude-sonnet-4-5", "ANTHROPIC_API_KEY"), ("openai:gpt-4.1", "OPENAI_API_KEY")],
)
async def test_a_call_without_a_key_fails_at_once_naming_the_variable(
    model: str, variable: str
) -> None:
    # No key, no address, no offline model: the SDK would send a made-up key to the
    # provider's real address (or, with no network, retry for minutes).
    clients = ModelClients(environ={})
    with pytest.raises(ModelFailed) as failed:
        await clients.for_model(model).ask(request(model)).reply(lambda delta: None)
    failure = failed.value.failure
    assert failure.kind == "auth" and not failure.retryable and failure.status is None
    assert failure.message.startswith(f"No {variable}: ")
    assert "DURAGENT_OFFLINE_MODEL_URL" in failure.message
    with pytest.raises(ModelFailed, match=f"No {variable}"):
        await clients.for_model(model).complete(SummaryRequest(model, "sum up", 100, "s1"))
    await clients.aclose()


def test_a_key_an_address_or_the_offline_model_lets_calls_go() -> None:
    for environ, offline in (
        ({"ANTHROPIC_API_KEY": "sk-test"}, None),
        ({"ANTHROPIC_BASE_URL": "http://127.0.0.1:9/gateway"}, None),
        ({}, "http://127.0.0.1:9"),
    ):
        clients = ModelClients(environ=environ, offline_base_url=offline)
        assert type(clients.for_model("claude-sonnet-4-5")).__name__ == "AnthropicModel"
    # A local server needs no key; Bedrock takes its cloud's credentials.
    assert type(ModelClients(environ={}).for_model("ollama:llama3")).__name__ != "NoKey"


def test_a_worker_says_once_what_to_set_when_its_model_cannot_be_called() -> None:
    notice = missing_key_notice("claude-sonnet-4-5", {}, None)
    assert notice == (
        "No ANTHROPIC_API_KEY: calls to anthropic:claude-sonnet-4-5 will fail; set it (or "
        "ANTHROPIC_BASE_URL for a server of your own), or DURAGENT_OFFLINE_MODEL_URL for the "
        "offline model (duragent run and duragent worker start one)"
    )
    assert "\n" not in notice
    assert missing_key_notice("openai:gpt-4.1", {}, None) is not None
    assert missing_key_notice("claude-sonnet-4-5", {"ANTHROPIC_API_KEY": "k"}, None) is None
    assert missing_key_notice("claude-sonnet-4-5", {}, "http://127.0.0.1:9") is None
    assert missing_key_notice("ollama:llama3", {}, None) is None
    assert missing_key_notice("bedrock:anthropic.claude-sonnet-4-5", {}, None) is None
