"""What a session's model calls used, per run and model, summed from the assistant
messages its runs stored (each carries the model that wrote it and the usage it reported).

Read from the display messages, which keep every assistant message a run committed,
branches and compacted turns included, and nothing a fork copied in (those belong to the
session they were copied from). One grouped query: the database reads the model and the
token counts out of each message's JSON, and no message is loaded into Python.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from domain.cost import ModelUsage
from domain.messages import Usage
from store.tables import DisplayMessageRow

_COUNTS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def run_model_usage(
    db: Session, session_id: str, run_ids: Sequence[str] | None = None
) -> dict[str, list[ModelUsage]]:
    """Each run's usage per model (the model its assistant messages name), for the
    session's runs (or only `run_ids`)."""
    payload = DisplayMessageRow.payload
    model = payload["model"].as_string()
    sums = [func.coalesce(func.sum(payload[("usage", k)].as_integer()), 0) for k in _COUNTS]
    query = (
        select(DisplayMessageRow.run_id, model, func.count(), *sums)
        .where(
            DisplayMessageRow.session_id == session_id,
            DisplayMessageRow.role == "assistant",
            DisplayMessageRow.run_id.is_not(None),
        )
        .group_by(DisplayMessageRow.run_id, model)
    )
    if run_ids is not None:
        query = query.where(DisplayMessageRow.run_id.in_(list(run_ids)))
    found: dict[str, list[ModelUsage]] = {}
    for run_id, name, calls, *counts in db.execute(query):
        usage = Usage(**dict(zip(_COUNTS, (int(c) for c in counts), strict=True)))
        found.setdefault(run_id, []).append(ModelUsage(model=name, usage=usage, calls=calls))
    return found
