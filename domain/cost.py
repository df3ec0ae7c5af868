"""What model calls cost, from the usage they report and the price table.

A turn's cost is its assistant message's usage under the price of the model that wrote
it; a run's is the sum of its turns (a run may switch models between turns, so each turn
is priced by its own model) and of the summaries its compactions asked a model for; a
session's is the sum of its runs, and of the compactions and branch summaries made while
it was idle. A model the table has no
price for makes the cost unknown (None), and says which model that was: never a guess.

A model is named as `PriceTable.price_of` takes it: a session's name (`openai:gpt-4.1`,
a bare name being Anthropic's), or a stored message's model id with its provider.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from duragent.domain.messages import Usage
from duragent.domain.models import DEFAULT_PROVIDER
from duragent.domain.prices import ModelPrice, PriceTable

PER_MILLION = 1_000_000


def usage_cost(usage: Usage, price: ModelPrice) -> float:
    """US dollars for `usage` at `price` (each kind of token at its own rate). Reasoning
    tokens are counted in the output tokens (`Usage.reasoning_tokens` only says how many
    of them were), so they are priced once, as output."""
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_tokens * price.cache_read
        + usage.cache_write_tokens * price.cache_write
    ) / PER_MILLION


def cache_hit_rate(usage: Usage) -> float | None:
    """The share of prompt tokens the provider read from its prompt cache:
    cache_read / (input + cache_read + cache_write).

    The provider counts a prompt's tokens in three parts that add up to the whole prompt:
    read without the cache (`input`), read from it (`cache_read`, about a tenth of the
    input price) and written to it (`cache_write`, a little dearer than input). 1.0 means
    every prompt token was a cache hit; 0.0 that none was (writes count as misses). None
    when there was no prompt at all. Output tokens play no part.
    """
    prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    return usage.cache_read_tokens / prompt if prompt else None


class ModelUsage(BaseModel):
    """The usage of some model calls of one model: its name as the session names it
    (`provider:model`, bare for Anthropic's), or as an assistant message does."""

    model_config = ConfigDict(extra="forbid")

    model: str | None
    usage: Usage = Field(default_factory=Usage)
    calls: int = 0


class ModelCost(ModelUsage):
    cost_usd: float | None
    """None: the price table has no price for this model."""


class Cost(BaseModel):
    """The cost of a turn, a run or a session, with its usage and cache hit rate."""

    model_config = ConfigDict(extra="forbid")

    cost_usd: float | None
    """US dollars; None when a model used has no price (`unpriced_models` says which)."""
    usage: Usage = Field(default_factory=Usage)
    cache_hit_rate: float | None = None
    """See `cache_hit_rate`; None without prompt tokens."""
    unpriced_models: list[str] = Field(default_factory=list)
    by_model: list[ModelCost] = Field(default_factory=list)
    """Per model, by name."""

    @property
    def text(self) -> str:
        return cost_text(self.cost_usd, self.unpriced_models)


def cost_of(parts: Iterable[ModelUsage], prices: PriceTable) -> Cost:
    """The cost of model calls grouped by model: each group at its model's price."""
    by_model: dict[str | None, ModelUsage] = {}
    for part in parts:
        seen = by_model.setdefault(part.model, ModelUsage(model=part.model))
        seen.usage = seen.usage.plus(part.usage)
        seen.calls += part.calls
    ordered = sorted(by_model.values(), key=lambda part: part.model or "")
    priced = [_priced(part, prices) for part in ordered]
    total = Usage()
    for part in priced:
        total = total.plus(part.usage)
    unpriced = sorted({p.model or "(none)" for p in priced if p.cost_usd is None})
    known = sum(p.cost_usd for p in priced if p.cost_usd is not None)
    return Cost(
        cost_usd=None if unpriced else known,
        usage=total,
        cache_hit_rate=cache_hit_rate(total),
        unpriced_models=unpriced,
        by_model=priced,
    )


def _priced(part: ModelUsage, prices: PriceTable) -> ModelCost:
    return ModelCost(**dict(part), cost_usd=_cost(part.usage, prices.price_of(part.model)))


def _cost(usage: Usage, price: ModelPrice | None) -> float | None:
    # A call that reported no tokens (it failed before any) costs nothing whatever its model.
    if price is None:
        return 0.0 if usage.total_tokens == 0 else None
    return usage_cost(usage, price)


def cost_text(cost_usd: float | None, unpriced_models: Iterable[str] = ()) -> str:
    """`$0.0123` (four decimals below a dollar, cents from one dollar up; `<$0.0001` for
    less), or `cost unknown (no price for model X)`."""
    if cost_usd is None:
        names = ", ".join(unpriced_models) or "?"
        return f"cost unknown (no price for model {names})"
    if cost_usd >= 1:
        return f"${cost_usd:,.2f}"
    if 0 < cost_usd < 0.00005:
        return "<$0.0001"  # not $0.0000: something was spent
    return f"${cost_usd:.4f}"


def rate_text(rate: float | None) -> str:
    """A cache hit rate as people read it: `87% cache hits`, or `no prompt tokens`."""
    return "no prompt tokens" if rate is None else f"{rate:.0%} cache hits"


class TurnCost(BaseModel):
    """What one model call cost (an assistant message), small enough to ride along with
    every message a page shows."""

    model_config = ConfigDict(extra="forbid")

    cost_usd: float | None
    """None: no price for `model`."""
    model: str | None
    cache_hit_rate: float | None = None

    @property
    def text(self) -> str:
        return cost_text(self.cost_usd, [self.model or "(none)"])


def model_name(provider: str | None, model: str | None) -> str | None:
    """A stored message's model (the id its provider's API returned) as sessions name it,
    the name costs are priced and grouped by: `provider:model`, bare for Anthropic's (and
    for a message stored without its provider, as every message was Anthropic's then)."""
    if model is None or provider is None or provider == DEFAULT_PROVIDER:
        return model
    return f"{provider}:{model}"


def turn_cost(
    model: str | None, usage: Usage, prices: PriceTable, provider: str | None = None
) -> TurnCost:
    """The cost of one model call: its usage at the price of the model it names (with the
    provider that served it, when the name is an assistant message's model id)."""
    cost = _cost(usage, prices.price_of(model, provider))
    return TurnCost(cost_usd=cost, model=model, cache_hit_rate=cache_hit_rate(usage))


def message_turn_cost(message: dict[str, object], prices: PriceTable) -> TurnCost | None:
    """`turn_cost` of a stored message (as JSON) that a model call wrote: an assistant's
    (its model id priced at its provider's), or a compaction or branch summary (a custom
    message with a usage, naming the model as the session does); None otherwise."""
    role = message.get("role")
    if role != "assistant" and not (role == "custom" and message.get("usage") is not None):
        return None
    model, provider = message.get("model"), message.get("provider")
    usage = Usage.model_validate(message.get("usage") or {})
    return turn_cost(
        model if isinstance(model, str) else None,
        usage,
        prices,
        provider if isinstance(provider, str) else None,
    )


class SessionCosts(BaseModel):
    """A session's cost, and each of its runs' (by run id)."""

    model_config = ConfigDict(extra="forbid")

    session: Cost
    runs: dict[str, Cost] = Field(default_factory=dict)

    def of_run(self, run_id: str) -> Cost:
        """A run's cost; a run with no stored turn yet has cost nothing."""
        return self.runs.get(run_id) or Cost(cost_usd=0.0)


def session_costs(by_run: dict[str, list[ModelUsage]], prices: PriceTable) -> SessionCosts:
    """Each run priced per model, and the session as all of them together."""
    return SessionCosts(
        session=cost_of((part for parts in by_run.values() for part in parts), prices),
        runs={run_id: cost_of(parts, prices) for run_id, parts in by_run.items()},
    )
