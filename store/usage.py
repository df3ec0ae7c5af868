"""What a session's model calls used, per run and model, summed from the messages they
wrote: the assistant messages its runs stored, and the compaction and branch summaries
(hidden custom messages), each carrying the model that wrote it and the usage it reported.
A model is named as sessions name it, so that its provider prices it: an assistant
message's `provider:model` (bare for Anthropic's, and for messages stored without a
provider), a summary's model as the session named it.

Read from the display messages, which keep every assistant message a run committed,
branches and compacted turns included, every summary's model call (under the run that
compacted, or the compaction or navigation's own id), and nothing a fork copied in (those
belong to the session they were copied from). They are append-only and numbered in the order they
become visible, so a reader that has summed the messages up to `seq` N needs only those
after N to stay up to date (`client.usage_tally`).
"""

from __future__ import annotations

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from duragent.domain.cost import ModelUsage
from duragent.domain.messages import Usage
from duragent.domain.models import DEFAULT_PROVIDER
from duragent.store.tables import DisplayMessageRow

COUNTS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")

RunUsage = dict[str, dict[str | None, list[int]]]
"""run id -> model (as sessions name it, `provider:model`) -> [calls, *COUNTS]: plain sums,
cheap to add to row by row."""


def usage_after(db: Session, session_id: str, after: int, into: RunUsage) -> int:
    """Add the usage of the session's model calls (assistant messages and summaries)
    numbered after `after` to `into`; returns the number of the last one read (`after`
    when none was).

    One grouped query: the database reads the model and the token counts out of each
    message's JSON and sums them per run and model; no message reaches Python.
    """
    payload = DisplayMessageRow.payload
    model_id, provider = payload["model"].as_string(), payload["provider"].as_string()
    model = case(
        (provider.is_(None) | (provider == DEFAULT_PROVIDER), model_id),
        else_=provider + ":" + model_id,
    )
    sums = [func.coalesce(func.sum(payload[("usage", k)].as_integer()), 0) for k in COUNTS]
    query = (
        select(
            DisplayMessageRow.run_id, model, func.max(DisplayMessageRow.seq), func.count(), *sums
        )
        .where(
            DisplayMessageRow.session_id == session_id,
            DisplayMessageRow.seq > after,
            # An assistant message always has a usage; a custom one only when a model
            # call wrote it (a summary).
            DisplayMessageRow.role.in_(("assistant", "custom")),
            payload[("usage", "input_tokens")].as_integer().is_not(None),
            DisplayMessageRow.run_id.is_not(None),
        )
        .group_by(DisplayMessageRow.run_id, model)
    )
    last = after
    for run_id, name, seq, *counts in db.execute(query):
        last = max(last, int(seq))
        kept = into.setdefault(run_id, {}).setdefault(name, [0] * (1 + len(COUNTS)))
        for k, count in enumerate(counts):
            kept[k] += int(count)
    return last


def model_usage(sums: RunUsage) -> dict[str, list[ModelUsage]]:
    """`usage_after`'s sums as each run's usage per model."""
    return {
        run_id: [
            ModelUsage(
                model=model,
                calls=counts[0],
                usage=Usage(**dict(zip(COUNTS, counts[1:], strict=True))),
            )
            for model, counts in models.items()
        ]
        for run_id, models in sums.items()
    }
