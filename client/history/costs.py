"""What a timeline's model calls cost: each completed call (a turn's, or a compaction's
or branch summary's) at the price of its model, and each run's end with the run's total
(over every execution of a continue-as-new chain, its summaries included), added to the
items' summaries and details (`cost_usd`, `cache_hit_rate`).

Kept apart from the reader, which stays a pure reading of the history: prices are not in
the history, and today's price table is applied to what the history recorded.
"""

from __future__ import annotations

from typing import Any

from duragent.client.history.timeline import RunTimeline, TimelineItem
from duragent.client.history.values import token_counts
from duragent.domain.cost import ModelUsage, cost_of, rate_text, turn_cost
from duragent.domain.messages import Usage
from duragent.domain.prices import PriceTable


def price_timelines(timelines: list[RunTimeline], prices: PriceTable) -> None:
    """Add what each model call and each run cost to `timelines`' items (in place)."""
    spent: dict[str | None, list[ModelUsage]] = {}
    for timeline in timelines:
        for item in timeline.items:
            priced = item.kind in ("model_call", "summary_call")
            if priced and isinstance(item.details.get("usage"), dict):
                model = item.details.get("model")
                usage = _usage(item.details["usage"])
                cost = turn_cost(model if isinstance(model, str) else None, usage, prices)
                _note(item, cost.cost_usd, cost.text, cost.cache_hit_rate)
                spent.setdefault(timeline.run_id, []).append(
                    ModelUsage(model=cost.model, usage=usage, calls=1)
                )
    for timeline in timelines:
        for item in timeline.items:
            if item.kind == "run_ended" and "turns" in item.details:
                total = cost_of(spent.get(timeline.run_id, []), prices)
                _note(item, total.cost_usd, f"{total.text} in all", total.cache_hit_rate)


def _usage(recorded: dict[str, Any]) -> Usage:
    """Usage as a history recorded it (fields another version did not have count 0)."""
    return Usage(
        **{k: int(recorded[k]) for k in Usage.model_fields if isinstance(recorded.get(k), int)}
    )


def _note(item: TimelineItem, cost_usd: float | None, text: str, rate: float | None) -> None:
    item.details.update(cost_usd=cost_usd, cache_hit_rate=rate)
    counts = token_counts(item.details.get("usage") or {})
    addition = f"{counts} ({rate_text(rate)}), {text}"
    if counts in item.summary:
        item.summary = item.summary.replace(counts, addition, 1)
    else:
        item.summary += f", {text}"
