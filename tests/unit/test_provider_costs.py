"""`duragent show` prices every provider's turns from what the store keeps: each assistant
message's line at its provider's price, and the session's cost summed per model from the
stored messages (`store.usage`, read through the client's tally), on SQLite and
PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from postgres_server import new_database
from support import BOTH_STORES

from duragent.activities.prices import bundled_prices
from duragent.client.cli.views import turn_line
from duragent.client.usage_tally import UsageTally
from duragent.domain.config import SessionConfig
from duragent.domain.cost import session_costs
from duragent.domain.messages import (
    AgentMessage,
    AssistantMessage,
    CustomMessage,
    TextContent,
    Usage,
)
from duragent.domain.prices import parse_price_table
from duragent.store import display, sessions
from duragent.store.db import Database

CATALOG = "as_of = 2026-12-01\ncatalog = 'genai-prices'\n"
"""A table of no models of its own over genai-prices, as of the bundled table's date."""


@pytest.fixture
def db(request: pytest.FixtureRequest, tmp_path: Path, database: str) -> Iterator[Database]:
    """A migrated store of the test's kind, empty."""
    if database == "postgresql":
        store = Database(new_database(request.getfixturevalue("postgres_server")))
    else:
        store = Database(f"sqlite:///{tmp_path / 'store.db'}")
    yield store
    store.dispose()


@BOTH_STORES
def test_show_prices_the_stored_turns_of_every_provider(db: Database) -> None:
    """What `duragent show` prints: each turn's line, and the session's cost summed per
    model from the stored messages (`store.usage`, read through the client's tally)."""
    usage = Usage(input_tokens=10_000, cache_read_tokens=40_000, output_tokens=2_000)

    def turn(provider: str, api: str, model: str) -> AssistantMessage:
        return AssistantMessage(provider=provider, api=api, model=model, usage=usage, timestamp=0)

    turns = [
        turn("anthropic", "anthropic-messages", "claude-sonnet-4-5-20250929"),
        turn("openai", "openai-chat", "gpt-4.1-2025-04-14"),
        turn("bedrock", "anthropic-messages", "claude-sonnet-4-5-20250929"),
        turn("ollama", "openai-chat", "qwen3"),
    ]
    summary = CustomMessage(
        custom_type="compaction_summary",
        content=[TextContent(text="so far")],
        display=False,
        timestamp=0,
        model="gemini:gemini-2.5-pro",
        usage=usage,
    )
    with db.transaction() as tx:
        sessions.create_session(
            tx, session_id="s", workspace="/w", config=SessionConfig(model="openai:gpt-4.1")
        )
        made: list[AgentMessage] = [*turns, summary]
        messages = [(f"m{i}", m) for i, m in enumerate(made)]
        display.append_display(tx, "s", "r", messages)
    with db.transaction() as tx:
        by_run = UsageTally().read(tx, "s")
    table = parse_price_table(CATALOG, "c.toml")
    costs = session_costs(by_run, table)
    # Each: 10,000 input + 40,000 cache read + 2,000 output at its model's price.
    assert {m.model: m.cost_usd for m in costs.session.by_model} == {
        "claude-sonnet-4-5-20250929": pytest.approx(0.03 + 0.012 + 0.03),
        "openai:gpt-4.1-2025-04-14": pytest.approx(0.02 + 0.02 + 0.016),
        "bedrock:claude-sonnet-4-5-20250929": pytest.approx(0.033 + 0.0132 + 0.033),
        "ollama:qwen3": 0.0,
        "gemini:gemini-2.5-pro": pytest.approx(0.0125 + 0.005 + 0.02),
    }
    assert costs.session.unpriced_models == []
    lines = [turn_line(message, table) for message in turns]
    assert lines[1].endswith("tokens · $0.0560") and lines[2].endswith("tokens · $0.0792")
    assert lines[3].endswith("tokens · $0.0000")
    # Priced as show prices it, with the bundled table.
    assert session_costs(by_run, bundled_prices()).session.cost_usd is not None
