"""The store writes that open and close a run, and phase events in between.

All are idempotent: entry ids come from the workflow and events carry dedup keys, so a
retried step (or a replayed workflow task) writes nothing twice.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.save_point import chain, displayed, keyed, message_events, save_point
from domain.config import SnapshotRef
from domain.context import derive_path_state, take_snapshot
from domain.entries import MessageEntry
from domain.events import AgentEnd, AgentStart, TurnStart
from domain.messages import AssistantMessage, text_of
from domain.turns import (
    FINISH_RUN,
    RECORD_EVENTS,
    START_RUN,
    FinishRunInput,
    FinishRunResult,
    RecordEventsInput,
    StartRunInput,
    StartRunResult,
)
from store import display, entries, events, runs, sessions, snapshots
from store.db import Database
from store.errors import SessionNotFound


class Bookkeeping:
    """Local activities: short store transactions recorded as markers in history."""

    def __init__(self, db: Database) -> None:
        self._db = db

    @activity.defn(name=START_RUN)
    def start_run(self, data: StartRunInput) -> StartRunResult:
        """Record the run, append the prompt after the session's leaf, take the first snapshot."""
        with self._db.transaction() as db:
            try:
                session = sessions.require_session(db, data.session_id)
            except SessionNotFound as err:
                raise ApplicationError(
                    str(err), type="SessionNotFound", non_retryable=True
                ) from err
            runs.insert_run(
                db,
                run_id=data.run_id,
                session_id=data.session_id,
                workflow_id=data.workflow_id,
                kind=data.kind,
            )
            done = entries.existing_ids(db, data.prompt_entry_ids)
            if done:  # a retry: the prompt is in, and the leaf moved past it already
                leaf_id = data.prompt_entry_ids[-1]
            else:
                prompt = chain(
                    session.leaf_id,
                    [
                        MessageEntry(id=entry_id, parent_id=None, timestamp=m.timestamp, message=m)
                        for entry_id, m in zip(data.prompt_entry_ids, data.prompt, strict=True)
                    ],
                )
                entries.insert_entries(db, data.session_id, prompt, run_id=data.run_id)
                leaf_id = prompt[-1].id
                sessions.set_leaf(db, data.session_id, leaf_id)
                display.append_display(db, data.session_id, data.run_id, displayed(prompt))
                events.append_events(
                    db,
                    data.session_id,
                    data.run_id,
                    keyed(
                        f"{data.run_id}/start",
                        [
                            AgentStart(run_id=data.run_id),
                            TurnStart(turn=1),
                            *message_events(prompt),
                        ],
                    ),
                )
            state = derive_path_state(entries.load_path(db, leaf_id), session.config)
            snapshot = take_snapshot(state, session.config)
            snapshots.put_snapshot(db, snapshot)
        return StartRunResult(leaf_id=leaf_id, snapshot=SnapshotRef.of(snapshot))

    @activity.defn(name=FINISH_RUN)
    def finish_run(self, data: FinishRunInput) -> FinishRunResult:
        """Commit the last turn, flush what is still pending, record the outcome, agent_end."""
        with self._db.transaction() as db:
            leaf_id = data.parent_id
            if data.commit is not None:
                leaf_id = save_point(
                    db,
                    session_id=data.session_id,
                    run_id=data.run_id,
                    parent_id=data.parent_id,
                    snapshot=None,
                    data=data.commit,
                ).leaf_id
            done = entries.existing_ids(db, [e.id for e in data.entries])
            flushed = chain(leaf_id, list(data.entries))
            fresh = [e for e in flushed if e.id not in done]
            entries.insert_entries(db, data.session_id, fresh, run_id=data.run_id)
            if flushed:
                leaf_id = flushed[-1].id
                sessions.set_leaf(db, data.session_id, leaf_id)
            display.append_display(db, data.session_id, data.run_id, displayed(fresh))
            runs.update_run(
                db,
                data.run_id,
                status=data.status,
                phase="idle",
                turns=data.turns,
                usage=data.usage,
                error=data.error,
                ended=True,
            )
            end = AgentEnd(
                run_id=data.run_id,
                status=data.status,
                turns=data.turns,
                usage=data.usage,
                error=data.error,
            )
            events.append_events(
                db, data.session_id, data.run_id, keyed(f"{data.run_id}/end", [end])
            )
            final_text = ""
            if data.last_assistant_entry_id:
                last = entries.get_entry(db, data.last_assistant_entry_id)
                if isinstance(last, MessageEntry) and isinstance(last.message, AssistantMessage):
                    final_text = text_of(last.message.content)
        return FinishRunResult(leaf_id=leaf_id, final_text=final_text)

    @activity.defn(name=RECORD_EVENTS)
    def record_events(self, data: RecordEventsInput) -> None:
        with self._db.transaction() as db:
            events.append_events(db, data.session_id, data.run_id, keyed(data.key, data.events))
            if data.phase is not None:
                runs.update_run(db, data.run_id, phase=data.phase)
