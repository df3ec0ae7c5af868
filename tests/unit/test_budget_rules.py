"""Budgets (domain.budgets): which limit is reached, worked out by hand; what a raise may
be; what a sub-agent inherits; the messages a person and the model read."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from duragent.domain.budgets import (
    Budget,
    Spent,
    limit_text,
    raise_refusal,
    reached,
    remaining,
    stop_text,
    stops,
    tighter,
)
from duragent.domain.changes import ConfigChange
from duragent.domain.config import SessionConfig

pytestmark = pytest.mark.fast

SPENT = Spent(turns=3, tokens=1_200, cost_usd=0.0123, wall_s=42.5)


def test_a_limit_is_reached_at_it_and_beyond() -> None:
    assert reached(Budget(max_turns=4), SPENT, "run") == []  # a fourth turn may happen
    [turns] = reached(Budget(max_turns=3), SPENT, "run")
    assert (turns.limit, turns.allowed, turns.spent) == ("turns", 3, 3)
    [tokens] = reached(Budget(max_tokens=1_000, max_turns=10), SPENT, "session")
    assert (tokens.scope, tokens.limit, tokens.spent) == ("session", "tokens", 1_200)
    [cost] = reached(Budget(max_cost_usd=0.01), SPENT, "run")
    assert cost.limit == "cost" and cost.spent == pytest.approx(0.0123)
    assert reached(Budget(max_cost_usd=0.02), SPENT, "run") == []
    [wall] = reached(Budget(max_wall_s=42.5), SPENT, "run")
    assert wall.limit == "wall"
    every = reached(
        Budget(max_turns=1, max_tokens=1, max_cost_usd=0.001, max_wall_s=1), SPENT, "run"
    )
    assert [r.limit for r in every] == ["turns", "tokens", "cost", "wall"]
    assert reached(None, SPENT, "run") == [] and reached(Budget(), SPENT, "run") == []


def test_stop_unless_every_budget_reached_asks() -> None:
    asks = reached(Budget(max_turns=1, on_exceed="ask"), SPENT, "run")
    stopping = reached(Budget(max_tokens=1), SPENT, "session")
    assert not stops(asks)
    assert stops(stopping) and stops(asks + stopping)


def test_the_messages_name_the_limit_and_what_was_spent() -> None:
    found = reached(Budget(max_cost_usd=0.01), SPENT, "run")
    assert found[0].text == "the run's cost limit ($0.0100) is reached: $0.0123 spent"
    text = stop_text(reached(Budget(max_tokens=1_000), SPENT, "session"))
    assert text.startswith(
        "Budget reached: the session's token limit (1,000 tokens) is reached: 1,200 tokens spent."
    )
    assert "stopped here, before its next model call" in text
    assert limit_text("turns", 1) == "1 turn" and limit_text("cost", 2.5) == "$2.50"
    assert limit_text("wall", 42.25) == "42.2 s"
    assert Budget(max_turns=3, max_wall_s=60, on_exceed="ask").describe() == (
        "3 turns, 60.0 s; when reached: ask to raise"
    )
    assert Budget().describe() == "no limits"


def test_bad_limits_are_refused_naming_the_field() -> None:
    for bad in ({"max_turns": 0}, {"max_cost_usd": -1}, {"max_wall_s": float("inf")}):
        with pytest.raises(ValidationError, match=next(iter(bad))):
            Budget.model_validate(bad)
    with pytest.raises(ValidationError, match="on_exceed"):
        Budget.model_validate({"on_exceed": "pause"})


def test_a_raise_must_raise() -> None:
    old = Budget(max_tokens=1_000, max_turns=5, on_exceed="ask")
    assert raise_refusal(old, Budget(max_tokens=5_000, max_turns=5), SPENT, "run") is None
    assert raise_refusal(old, Budget(max_turns=5), SPENT, "run") is None  # tokens unlimited
    lowered = raise_refusal(old, Budget(max_tokens=5_000, max_turns=4), SPENT, "run")
    assert lowered == (
        "a raise must not lower a limit: the run's turn limit would go from 5 turns to 4 turns"
    )
    still = raise_refusal(old, Budget(max_tokens=1_100, max_turns=5), SPENT, "session")
    assert still == (
        "a raise must raise the limits reached: the session's token limit of 1,100 tokens "
        "is still reached (1,200 tokens spent)"
    )
    added = raise_refusal(None, Budget(max_cost_usd=1), SPENT, "run")
    assert added is not None and "from none to $1.00" in added


def test_a_sub_agent_gets_what_is_left() -> None:
    left = remaining(Budget(max_tokens=2_000, max_cost_usd=0.05, max_turns=9), SPENT)
    assert left is not None and left.max_cost_usd == pytest.approx(0.0377)
    assert left.model_copy(update={"max_cost_usd": None}) == Budget(max_tokens=800)
    # Used up: the least that is still a budget, so the child's first check stops it.
    used = remaining(Budget(max_tokens=1_000, max_wall_s=10), SPENT)
    assert used == Budget(max_tokens=1, max_wall_s=0.1)
    both = tighter(Budget(max_tokens=800, max_cost_usd=0.5), Budget(max_tokens=900, max_wall_s=5))
    assert both == Budget(max_tokens=800, max_cost_usd=0.5, max_wall_s=5)
    assert tighter(None, Budget(max_turns=2)) == Budget(max_turns=2)


def test_spending_adds_up() -> None:
    total = SPENT.plus(Spent(turns=1, tokens=8, cost_usd=0.0077, wall_s=0.5, unpriced_models=["x"]))
    assert total.cost_usd == pytest.approx(0.02)
    assert total.model_copy(update={"cost_usd": 0.0}) == Spent(
        turns=4, tokens=1_208, wall_s=43.0, unpriced_models=["x"]
    )
    assert "no price for x: not counted in cost" in total.describe()


def test_a_session_budget_is_session_wide_config_and_stays_a_model() -> None:
    change = ConfigChange(budget=Budget(max_turns=2))
    assert change.session_wide()
    config = change.apply(SessionConfig(model="m"))
    assert config.budget == Budget(max_turns=2)
    kept = SessionConfig(model="other").with_session_wide_of(config)
    assert kept.budget == Budget(max_turns=2) and kept.model == "other"
