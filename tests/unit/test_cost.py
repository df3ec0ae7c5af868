"""The price table and what usage costs: the file's rules, how a model finds its price,
the arithmetic (worked out by hand below) and the cache hit rate."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from duragent.activities.prices import bundled_prices, price_table
from duragent.domain.cost import (
    ModelUsage,
    cache_hit_rate,
    cost_of,
    cost_text,
    message_turn_cost,
    rate_text,
    usage_cost,
)
from duragent.domain.messages import AssistantMessage, Usage
from duragent.domain.prices import ModelPrice, PriceFileError, parse_price_table
from duragent.settings import SettingError, Settings

pytestmark = pytest.mark.fast

TABLE = """
as_of = 2026-11-30
source = "test"
[models.claude-sonnet-4-5]
input = 3.00
output = 15.00
cache_read = 0.30
cache_write = 3.75
[models.claude-sonnet-4-5-20250929]
input = 1
output = 1
cache_read = 1
cache_write = 1
"""


def test_the_bundled_table_carries_its_date_and_prices_the_default_model() -> None:
    table = bundled_prices()
    assert table.as_of == date(2026, 12, 1)
    assert table.source.startswith("https://")
    assert table.price_of(Settings.model_fields["model"].default) is not None


def test_a_dated_id_takes_its_family_price_unless_named_itself() -> None:
    table = parse_price_table(TABLE, "t.toml")
    family = ModelPrice(input=3, output=15, cache_read=0.3, cache_write=3.75)
    assert table.price_of("claude-sonnet-4-5") == family
    assert table.price_of("claude-sonnet-4-5-20251001") == family
    assert table.price_of("claude-sonnet-4-5-20250929") == ModelPrice(
        input=1, output=1, cache_read=1, cache_write=1
    )
    # Nothing else is guessed: another version, a shorter date, a bare family, no model.
    for unknown in ("claude-sonnet-4-6", "claude-sonnet-4-5-2025", "claude-sonnet", "", None):
        assert table.price_of(unknown) is None


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("source = 'x'\n[models]\n", "as_of: Field required"),
        ("as_of = 'soon'\n", "as_of: Input should be a valid date"),
        (
            "as_of = 2026-01-01\n[models.m]\ninput = 1\noutput = 1\ncache_read = 1\n",
            "models.m.cache_write: Field required",
        ),
        (
            "as_of = 2026-01-01\n[models.m]\ninput = -1\noutput = 1\ncache_read = 1\n"
            "cache_write = 1\n",
            "models.m.input: Input should be greater than or equal to 0",
        ),
        (
            "as_of = 2026-01-01\n[models.m]\ninput = 1\noutput = 1\ncache_read = 1\n"
            "cache_write = 1\ncache_write_1h = 2\n",
            "models.m.cache_write_1h: Extra inputs are not permitted",
        ),
        ("as_of = 2026-01-01\nprice = 3\n", "price: Extra inputs are not permitted"),
        ("as_of = [\n", "not TOML"),
    ],
)
def test_a_bad_file_is_refused_naming_the_file_and_the_field(text: str, named: str) -> None:
    with pytest.raises(PriceFileError) as refused:
        parse_price_table(text, "mine.toml")
    assert str(refused.value).startswith("mine.toml: ")
    assert named in str(refused.value)


def test_the_override_file_replaces_and_adds_models(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(
        "as_of = 2027-01-05\n"
        "[models.claude-sonnet-5-5]\ninput = 1\noutput = 2\ncache_read = 0\ncache_write = 1\n"
        "[models.my-model]\ninput = 7\noutput = 8\ncache_read = 0\ncache_write = 0\n"
    )
    monkeypatch.setenv("DURAGENT_PRICES_FILE", str(path))
    settings = Settings.from_env()
    assert settings.prices_file == path
    table = price_table(settings.prices_file)
    assert table.price_of("claude-sonnet-5-5") == ModelPrice(
        input=1, output=2, cache_read=0, cache_write=1
    )
    assert table.price_of("my-model") == ModelPrice(input=7, output=8, cache_read=0, cache_write=0)
    assert table.price_of("claude-opus-4-5") == bundled_prices().price_of("claude-opus-4-5")
    assert table.overridden_by == f"{path} (prices of 2027-01-05)"
    assert table.as_of == bundled_prices().as_of


def test_a_bad_override_stops_the_settings_naming_the_variable_and_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "prices.toml"
    path.write_text("as_of = 2027-01-05\n[models.m]\ninput = 'cheap'\n")
    monkeypatch.setenv("DURAGENT_PRICES_FILE", str(path))
    with pytest.raises(SettingError) as refused:
        Settings.from_env()
    assert str(refused.value).startswith(f"DURAGENT_PRICES_FILE: {path}: models.m.input: ")
    monkeypatch.setenv("DURAGENT_PRICES_FILE", str(tmp_path / "missing.toml"))
    with pytest.raises(SettingError, match=r"missing\.toml: cannot be read"):
        Settings.from_env()


SONNET = ModelPrice(input=3.00, output=15.00, cache_read=0.30, cache_write=3.75)


def test_usage_cost_prices_each_kind_of_token_at_its_rate() -> None:
    usage = Usage(
        input_tokens=1_000, output_tokens=500, cache_read_tokens=20_000, cache_write_tokens=2_000
    )
    # 1,000 x $3 + 500 x $15 + 20,000 x $0.30 + 2,000 x $3.75, per million tokens:
    # $0.003 + $0.0075 + $0.006 + $0.0075 = $0.024
    assert usage_cost(usage, SONNET) == pytest.approx(0.024)
    assert usage_cost(Usage(), SONNET) == 0


def test_a_run_that_switched_models_is_priced_per_model_and_unknown_says_which() -> None:
    table = parse_price_table(TABLE, "t.toml").overlaid(
        parse_price_table(
            "as_of = 2026-11-30\n[models.claude-haiku-4-5]\n"
            "input = 1\noutput = 5\ncache_read = 0.1\ncache_write = 1.25\n",
            "h.toml",
        ),
        "h.toml",
    )
    sonnet = ModelUsage(
        model="claude-sonnet-4-5-20251001", usage=Usage(input_tokens=10_000), calls=1
    )
    haiku = ModelUsage(model="claude-haiku-4-5", usage=Usage(output_tokens=2_000), calls=2)
    cost = cost_of([sonnet, haiku, sonnet], table)
    # Sonnet: 20,000 input x $3 / 1M = $0.06; Haiku: 2,000 output x $5 / 1M = $0.01.
    assert cost.cost_usd == pytest.approx(0.07)
    assert [(m.model, m.calls) for m in cost.by_model] == [
        ("claude-haiku-4-5", 2),
        ("claude-sonnet-4-5-20251001", 2),
    ]
    assert [m.cost_usd for m in cost.by_model] == [pytest.approx(0.01), pytest.approx(0.06)]
    assert cost.usage == Usage(input_tokens=20_000, output_tokens=2_000)
    assert cost.text == "$0.0700"

    mystery = ModelUsage(model="gpt-9", usage=Usage(input_tokens=5), calls=1)
    unknown = cost_of([sonnet, mystery], table)
    assert unknown.cost_usd is None and unknown.unpriced_models == ["gpt-9"]
    assert unknown.text == "cost unknown (no price for model gpt-9)"
    # A call that reported no tokens costs nothing, priced or not.
    failed = ModelUsage(model="gpt-9", usage=Usage(), calls=1)
    assert cost_of([sonnet, failed], table).cost_usd == pytest.approx(0.03)


def test_cache_hit_rate_is_the_share_of_prompt_tokens_read_from_the_cache() -> None:
    # 30,000 of the 40,000 prompt tokens were cache hits; output plays no part.
    usage = Usage(
        input_tokens=5_000, cache_read_tokens=30_000, cache_write_tokens=5_000, output_tokens=9
    )
    assert cache_hit_rate(usage) == 0.75
    assert rate_text(cache_hit_rate(usage)) == "75% cache hits"
    assert cache_hit_rate(Usage(input_tokens=10)) == 0.0
    assert cache_hit_rate(Usage(output_tokens=10)) is None
    assert rate_text(None) == "no prompt tokens"


def test_cost_text() -> None:
    assert cost_text(0.0123) == "$0.0123"
    assert cost_text(0.0) == "$0.0000"
    assert cost_text(0.00001) == "<$0.0001"
    assert cost_text(1234.5) == "$1,234.50"
    assert cost_text(None, ["a", "b"]) == "cost unknown (no price for model a, b)"


CATALOG = "as_of = 2026-12-01\ncatalog = 'genai-prices'\n"
"""A table of no models of its own over genai-prices, as of the bundled table's date."""
GPT_41 = ModelPrice(input=2.00, output=8.00, cache_read=0.50, cache_write=2.00)
"""OpenAI's GPT-4.1 (no cache write: the tokens it caches are billed as input)."""
SONNET_45 = ModelPrice(input=3.00, output=15.00, cache_read=0.30, cache_write=3.75)
SONNET_45_BEDROCK = ModelPrice(input=3.30, output=16.50, cache_read=0.33, cache_write=4.125)
"""Bedrock's in-region price of Claude Sonnet 4.5 (10% over Anthropic's)."""
GEMINI_25_PRO = ModelPrice(input=1.25, output=10.00, cache_read=0.125, cache_write=1.25)
"""Gemini 2.5 Pro's first band (prompts up to 200k tokens)."""
FREE = ModelPrice(input=0, output=0, cache_read=0, cache_write=0)


def test_genai_prices_price_each_provider_s_models_by_name_or_by_provider_and_id() -> None:
    table = parse_price_table(CATALOG, "c.toml")
    # A session's name, or the provider and the model id an assistant message stores.
    assert table.price_of("openai:gpt-4.1") == GPT_41
    assert table.price_of("gpt-4.1-2025-04-14", "openai") == GPT_41
    assert table.price_of("openai-responses:gpt-4.1") == GPT_41
    assert table.price_of("gemini:gemini-2.5-pro") == GEMINI_25_PRO
    for name, provider in [
        ("bedrock:anthropic.claude-sonnet-4-5-20250929-v1:0", None),
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", "bedrock"),
        ("claude-sonnet-4-5-20250929", "bedrock"),  # as Bedrock's reply names it
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", None),  # a Bedrock id names Bedrock
    ]:
        assert table.price_of(name, provider) == SONNET_45_BEDROCK, name
    # Bare Claude names are Anthropic's; so is Claude on Vertex, at Google's price of it.
    assert table.price_of("claude-sonnet-4-5-20250929") == SONNET_45
    assert table.price_of("anthropic:claude-sonnet-4-5") == SONNET_45
    assert table.price_of("vertex:claude-sonnet-4-5@20250929") == SONNET_45
    # A model id recorded without its provider is priced by the vendor it names.
    assert table.price_of("gpt-4.1-2025-04-14") == GPT_41
    # Nothing is guessed: a model nobody prices, a vendor we do not serve, a local model
    # without its provider, and a table without genai-prices beneath it.
    for unknown in ("openai:gpt-9", "claude-unpriced-1", "house-model-1", "deepseek-chat", "qwen3"):
        assert table.price_of(unknown) is None, unknown
    assert parse_price_table(TABLE, "t.toml").price_of("openai:gpt-4.1") is None


def test_a_local_model_costs_nothing() -> None:
    table = bundled_prices()
    assert table.price_of("ollama:qwen3") == FREE
    assert table.price_of("qwen3:8b", "vllm") == FREE
    message = AssistantMessage(
        provider="ollama",
        api="openai-chat",
        model="qwen3",
        usage=Usage(input_tokens=9_000),
        timestamp=0,
    )
    cost = message_turn_cost(message.model_dump(mode="json"), table)
    assert cost is not None and cost.cost_usd == 0.0 and cost.text == "$0.0000"


def test_a_turn_with_cache_reads_and_reasoning_is_priced_once_per_token() -> None:
    usage = Usage(
        input_tokens=10_000, cache_read_tokens=40_000, output_tokens=2_000, reasoning_tokens=1_500
    )
    message = AssistantMessage(
        provider="openai", api="openai-chat", model="gpt-4.1-2025-04-14", usage=usage, timestamp=0
    )
    # 10,000 x $2 + 40,000 x $0.50 + 2,000 x $8 (the 1,500 reasoning tokens among the
    # output), per million tokens: $0.02 + $0.02 + $0.016 = $0.056.
    cost = message_turn_cost(message.model_dump(mode="json"), parse_price_table(CATALOG, "c"))
    assert cost is not None and cost.cost_usd == pytest.approx(0.056)


def test_the_price_files_win_over_genai_prices(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(
        "as_of = 2027-01-05\n"
        '[models."openai:gpt-4.1"]\ninput = 1\noutput = 4\ncache_read = 0.25\ncache_write = 1\n'
        '[models."gemini-2.5-pro"]\ninput = 1\noutput = 9\ncache_read = 0.1\ncache_write = 1\n'
        '[models."ollama:qwen3"]\ninput = 0.01\noutput = 0.01\ncache_read = 0\ncache_write = 0\n'
    )
    table = price_table(path)
    ours = ModelPrice(input=1, output=4, cache_read=0.25, cache_write=1)
    assert table.price_of("openai:gpt-4.1") == ours
    assert table.price_of("gpt-4.1-2025-04-14", "openai") == ours  # the dated id's family
    assert table.price_of("openai-responses:gpt-4.1") == GPT_41  # another provider's: not ours
    # A bare name prices the model on any provider; a local model may be given a price.
    assert table.price_of("gemini:gemini-2.5-pro") == ModelPrice(
        input=1, output=9, cache_read=0.1, cache_write=1
    )
    assert table.price_of("ollama:qwen3") == ModelPrice(
        input=0.01, output=0.01, cache_read=0, cache_write=0
    )
    # The bundled file's own models (those genai-prices lacks) win the same way.
    bundled = parse_price_table(
        CATALOG
        + "[models.house-model-1]\ninput = 7\noutput = 8\ncache_read = 0\ncache_write = 0\n"
        + "[models.claude-sonnet-4-5]\ninput = 1\noutput = 1\ncache_read = 1\ncache_write = 1\n",
        "b.toml",
    )
    assert bundled.price_of("house-model-1") == ModelPrice(
        input=7, output=8, cache_read=0, cache_write=0
    )
    assert bundled.price_of("claude-sonnet-4-5-20250929") == ModelPrice(
        input=1, output=1, cache_read=1, cache_write=1
    )
    assert bundled.price_of("claude-opus-4-5") is not None  # genai-prices' still
