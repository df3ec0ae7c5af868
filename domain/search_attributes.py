"""The search attributes a session's workflows carry, so that Temporal lists a session's
runs (and finds one by its run id) whichever started it: a client, a parent run starting a
sub-agent, a run starting the next one for input that waited."""

from __future__ import annotations

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

SESSION_ID_ATTR = SearchAttributeKey.for_keyword("DuragentSessionId")
RUN_ID_ATTR = SearchAttributeKey.for_keyword("DuragentRunId")
KIND_ATTR = SearchAttributeKey.for_keyword("DuragentKind")


def session_attributes(
    session_id: str, kind: str, run_id: str | None = None
) -> TypedSearchAttributes:
    """A session workflow's attributes: its session, its kind (`run`, `compaction`, ...)
    and, for a run, the run's id."""
    pairs = [SearchAttributePair(SESSION_ID_ATTR, session_id), SearchAttributePair(KIND_ATTR, kind)]
    if run_id is not None:
        pairs.append(SearchAttributePair(RUN_ID_ATTR, run_id))
    return TypedSearchAttributes(pairs)
