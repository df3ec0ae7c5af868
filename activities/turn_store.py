"""A turn's reads and writes in the store, around its model call.

Before the call (`prepare`), in one transaction: the save point of the previous turn
(`activities.save_point`, when the input carries its commit), this turn's snapshot, its
context read by reference (the leaf's path: no workflow payload carries the
conversation), and the reply's start event; or the reply an earlier attempt of this turn
finished and staged, which is kept (the model is not asked twice). During and after it:
the run events its deltas become and the reply staged for the next save point (`sink`),
remembered for this worker's tool calls (`finished`).
"""

from __future__ import annotations

import time
from typing import NamedTuple

from duragent.activities.event_sink import EventSink
from duragent.activities.save_point import find_commit, save_point
from duragent.activities.snapshots import SnapshotTaker
from duragent.activities.store_retry import with_store_retries
from duragent.domain.config import TurnSnapshot
from duragent.domain.context import context_messages, derive_path_state
from duragent.domain.events import MessageStart
from duragent.domain.messages import AgentMessage, AssistantMessage
from duragent.domain.models import stored_model_ref
from duragent.domain.turns import TurnInput
from duragent.store import entries, events, sessions, snapshots, staging
from duragent.store.db import Database


class Prepared(NamedTuple):
    """A turn ready for its model call (or answered already)."""

    snapshot: TurnSnapshot
    """With the run's override for this turn, unless it was answered already."""
    context: list[AgentMessage]
    earlier: AssistantMessage | None
    """The reply an earlier attempt of this turn finished and staged, if any."""
    skeleton: AssistantMessage
    """The reply as its stored start says it began (unless answered already)."""
    servers: list[str] | None
    """The MCP servers the session uses (session-wide config, as of this save point)."""
    workspace: str
    """The session's workspace: where the turn's calls run."""


class TurnStore:
    def __init__(
        self,
        db: Database,
        snapshot_taker: SnapshotTaker,
        cache: entries.EntryCache,
        replies: staging.FinishedReplies | None = None,
        flush_s: float = 0.05,
    ) -> None:
        self._db = db
        self._flush_s = flush_s
        """How often, at most, a streamed reply's events are written (`EventSink`)."""
        self._taker = snapshot_taker
        # Both are immutable once stored: snapshots are content-addressed, entries final.
        self._snapshots: dict[str, TurnSnapshot] = {}
        self._entries = cache
        self._replies = replies or staging.FinishedReplies()
        """Finished replies, for this worker's tool calls (shared with `ToolCalls`)."""

    async def prepare(self, data: TurnInput) -> Prepared:
        """Save the previous turn, take this turn's snapshot, read the context (see the
        module); retried while the store cannot be reached."""
        return await with_store_retries(
            lambda: self._prepare(data), what="saving the turn and reading the context"
        )

    def sink(self, data: TurnInput) -> EventSink:
        """Where the turn's run events go, and its reply is staged as the sink closes."""
        return EventSink(self._db, data.session_id, data.run_id, interval=self._flush_s)

    def finished(self, entry_id: str, message: AssistantMessage) -> None:
        """A reply staged and committed: this worker's tool calls read it from here."""
        self._replies.put(entry_id, message)

    def _prepare(self, data: TurnInput) -> Prepared:
        with self._db.transaction() as db:
            leaf_id, ref = data.leaf_id, data.snapshot
            earlier: AgentMessage | None = None
            if data.commit is not None:
                # The save point's read also finds an earlier attempt's reply.
                found = find_commit(db, data.session_id, data.commit, staged_too=[data.entry_id])
                earlier = found.staged.get(data.entry_id)
                leaf_id = save_point(
                    db,
                    session_id=data.session_id,
                    run_id=data.run_id,
                    parent_id=data.leaf_id,
                    data=data.commit,
                    cache=self._entries,
                    found=found,
                )
            else:
                earlier = staging.staged_message(db, data.entry_id)
            path = entries.load_context_path(db, leaf_id, self._entries)
            session = sessions.require_session(db, data.session_id)
            if data.commit is not None:
                # Every save point where the loop goes on takes a fresh snapshot.
                ref = self._taker.take(db, session, derive_path_state(path, session.config))
            snapshot = self._snapshots.get(ref.id)
            if snapshot is None:
                snapshot = self._snapshots[ref.id] = snapshots.get_snapshot(db, ref.id)
            finished = (
                earlier
                if isinstance(earlier, AssistantMessage)
                and earlier.stop_reason not in ("aborted", "error")
                else None
            )
            if finished is None and data.override is not None:
                snapshot = snapshot.model_copy(update=data.override.model_dump(exclude_none=True))
            # The reply's provider, API and model id, as its wire stamps the reply itself.
            model = stored_model_ref(snapshot.model)
            skeleton = AssistantMessage(
                api=model.api,
                provider=model.provider,
                model=model.model,
                timestamp=int(time.time() * 1000),
            )
            if finished is None:
                # The reply's start, stored with the save point (a transaction of its
                # own cost as much as the rest of this one).
                start = MessageStart(entry_id=data.entry_id, message=skeleton)
                events.append_events(db, data.session_id, data.run_id, [start])
        return Prepared(
            snapshot,
            context_messages(path),
            finished,
            skeleton,
            session.config.mcp_servers,
            session.workspace,
        )
