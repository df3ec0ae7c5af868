"""The store writes that open and close a run, idle-session changes, phase events.

All are idempotent: entry ids come from the workflow (or the caller) and events carry
dedup keys, so a retried step (or a replayed workflow task) writes nothing twice.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from sqlalchemy.orm import Session
from temporalio import activity
from temporalio.exceptions import ApplicationError

from duragent.activities.extensions import Extensions
from duragent.activities.save_point import find_commit, message_events, save_point, uncounted_usage
from duragent.activities.snapshots import SnapshotTaker
from duragent.domain.config import TurnSnapshot
from duragent.domain.context import derive_path_state
from duragent.domain.entries import CompactionEntry, MessageEntry, SessionEntry
from duragent.domain.events import AgentEnd, AgentStart, QueueConsumed, TurnStart
from duragent.domain.messages import AgentMessage, AssistantMessage, Usage, text_of, user_text
from duragent.domain.resources import expand_template, skill_invocation
from duragent.domain.runs import session_workflow_id
from duragent.domain.turns import (
    APPLY_CHANGES,
    FINISH_RUN,
    NOTHING_QUEUED,
    QUEUE_INPUT,
    RECORD_EVENTS,
    START_RUN,
    TAKE_GUIDANCE,
    ApplyChangesInput,
    FinishRunInput,
    FinishRunResult,
    QueueInputInput,
    RecordEventsInput,
    StartRunInput,
    StartRunResult,
    TakeGuidanceInput,
    TakeGuidanceResult,
)
from duragent.store import entries, events, input_queue, runs, sessions, snapshots
from duragent.store.append import append_below
from duragent.store.db import Database
from duragent.store.errors import SessionNotFound
from duragent.store.events import keyed


def _input_waits(db: Session, data: StartRunInput) -> bool:
    """Whether the queued run has input to take (or took it already: a retried start)."""
    return bool(
        input_queue.list_items(db, data.session_id, kind="next_turn")
        or input_queue.consumed_by(db, data.run_id, "next_turn")
    )


class Bookkeeping:
    """Local activities: short store transactions recorded as markers in history."""

    def __init__(
        self,
        db: Database,
        extensions: Extensions,
        taker: SnapshotTaker,
        host: str | None = None,
        cache: entries.EntryCache | None = None,
    ) -> None:
        self._db = db
        self._extensions = extensions
        self._taker = taker
        self._host = host
        """This worker's host; None with shared workspaces (runs record no host)."""
        self._cache = cache or entries.EntryCache()
        """The paths this worker's turns read (shared with `ModelTurns`): a run starts on
        the path its previous run ended on, and its first turn reads the path it began."""

    @activity.defn(name=START_RUN)
    def start_run(self, data: StartRunInput) -> StartRunResult:
        """Record the run; append queued next_turn messages and the prompt below the leaf;
        take the first snapshot (a skill or template resolves from it). A session with no
        host yet gets this worker's (a local activity runs where the workflow task does),
        and its workspace is made here."""
        with self._db.transaction() as db:
            if data.kind == "queued" and not _input_waits(db, data):
                # Its input was taken back (edited, deleted) since the last run ended.
                raise ApplicationError(
                    "no input waits for this run any more", type=NOTHING_QUEUED, non_retryable=True
                )
            # Recorded on its own first: a run whose prompt cannot be resolved still has
            # a run state and an agent_start to match its agent_end.
            if sessions.get_session(db, data.session_id) is None:
                # Another store's session: workers of two stores poll one task queue.
                raise ApplicationError(
                    f"{SessionNotFound(data.session_id)} in this worker's store: workers of "
                    f"different stores poll task queue {activity.info().task_queue!r} on "
                    "this Temporal; give each store a task queue of its own "
                    "(DURAGENT_TASK_QUEUE) or a namespace of its own (TEMPORAL_NAMESPACE)",
                    type="SessionNotFound",
                    non_retryable=True,
                )
            runs.insert_run(
                db,
                run_id=data.run_id,
                session_id=data.session_id,
                workflow_id=data.workflow_id,
                kind=data.kind,
            )
            start = [AgentStart(run_id=data.run_id)]
            events.append_events(
                db, data.session_id, data.run_id, keyed(f"{data.run_id}/run", start)
            )
        host = self._claim_host(data.session_id) if self._host else None
        with self._db.transaction() as db:
            session = sessions.require_session(db, data.session_id)
            path = entries.load_context_path(db, session.leaf_id, self._cache)
            state = derive_path_state(path, session.config)
            ref = self._taker.take(db, session, state)
            if entries.existing_ids(db, data.prompt_entry_ids):
                leaf_id = data.prompt_entry_ids[-1]  # a retry: the prompt is in already
            elif data.kind == "queued" and (
                taken := input_queue.consumed_by(db, data.run_id, "next_turn")
            ):
                leaf_id = taken[-1].id  # a retry: the input it took is in already
            else:
                prompt = self._prompt(data, snapshots.get_snapshot(db, ref.id))
                leaf_id = self._append_prompt(db, data, session.leaf_id, prompt)
        return StartRunResult(
            leaf_id=leaf_id,
            snapshot=ref,
            config=session.config,
            workflow_hooks=self._extensions.workflow_hooks,
            host=host,
        )

    def _claim_host(self, session_id: str) -> str:
        """The session's host, this one's if it had none: then its workspace is made here,
        where its tools will run."""
        assert self._host is not None
        with self._db.transaction() as db:
            host = sessions.claim_host(db, session_id, self._host)
            workspace = Path(sessions.require_session(db, session_id).workspace)
        if host == self._host:
            with contextlib.suppress(OSError):  # the tool call says what is wrong with it
                workspace.mkdir(parents=True, exist_ok=True)
        return host

    def _prompt(self, data: StartRunInput, snapshot: TurnSnapshot) -> list[AgentMessage]:
        """The run's user messages: as given, or a skill or template resolved from the
        snapshot the first turn runs with."""
        invocation = data.invocation
        if invocation is None:
            return list(data.prompt)
        resource = snapshot.resource(invocation.kind, invocation.name)
        if resource is None:
            known = sorted(r.name for r in snapshot.resources if r.kind == invocation.kind)
            raise ApplicationError(
                f"no {invocation.kind} named {invocation.name!r}"
                f" (available: {', '.join(known) or 'none'})",
                type="UnknownResource",
                non_retryable=True,
            )
        text = (
            skill_invocation(resource, invocation.args)
            if invocation.kind == "skill"
            else expand_template(resource.body, invocation.args)
        )
        return [user_text(text, data.timestamp)]

    def _append_prompt(
        self, db: Session, data: StartRunInput, parent: str | None, prompt: list[AgentMessage]
    ) -> str:
        """next_turn messages (they go before the user's), then the prompt; the new leaf."""
        waiting = input_queue.list_items(db, data.session_id, kind="next_turn")
        taken = [item for item in waiting if input_queue.consume(db, item.id, data.run_id)]
        appended = append_below(
            db,
            data.session_id,
            parent,
            [
                *(
                    MessageEntry(
                        id=item.id, parent_id=None, timestamp=item.created_at, message=item.message
                    )
                    for item in taken
                ),
                *(
                    MessageEntry(id=entry_id, parent_id=None, timestamp=m.timestamp, message=m)
                    for entry_id, m in zip(data.prompt_entry_ids, prompt, strict=True)
                ),
            ],
            run_id=data.run_id,
            cache=self._cache,
        )
        started = [
            TurnStart(turn=1),
            *message_events(appended.committed),
            *(QueueConsumed(queue="next_turn", entry_id=item.id, turn=1) for item in taken),
        ]
        events.append_events(
            db, data.session_id, data.run_id, keyed(f"{data.run_id}/start", started)
        )
        return appended.committed[-1].id

    @activity.defn(name=FINISH_RUN)
    def finish_run(self, data: FinishRunInput) -> FinishRunResult:
        """Save the last turn(s), flush pending writes, keep unconsumed queued messages for
        the next run, record the outcome, emit agent_end."""
        with self._db.transaction() as db:
            leaf_id = data.parent_id
            usage = data.usage
            summary = entries.get_entry(db, data.compaction_id) if data.compaction_id else None
            if isinstance(summary, CompactionEntry) and summary.parent_id == leaf_id:
                # Stored as the run was stopped: its workflow never got to count it.
                leaf_id = summary.id
                usage = usage.plus(summary.usage or Usage())
            for commit in data.commits:
                found = find_commit(db, data.session_id, commit)
                usage = usage.plus(uncounted_usage(commit, found))
                leaf_id = save_point(
                    db,
                    session_id=data.session_id,
                    run_id=data.run_id,
                    parent_id=leaf_id,
                    data=commit,
                    cache=self._cache,
                    found=found,
                )
            flushed = append_below(
                db, data.session_id, leaf_id, data.entries, run_id=data.run_id, cache=self._cache
            )
            leaf_id = flushed.leaf_id or leaf_id
            if data.session_config is not None:
                sessions.set_session_wide_config(db, data.session_id, data.session_config)
            if not data.parent_id:
                # Stopped before its start was recorded (no worker had taken it yet): it is
                # recorded now, with an agent_start to match its agent_end.
                runs.insert_run(
                    db,
                    run_id=data.run_id,
                    session_id=data.session_id,
                    workflow_id=session_workflow_id(data.session_id),
                    kind=data.kind,
                )
                start = [AgentStart(run_id=data.run_id)]
                events.append_events(
                    db, data.session_id, data.run_id, keyed(f"{data.run_id}/run", start)
                )
            # The run's row first: input sent while it was open is queued under a lock of
            # this row (`input_queue.queue_while_running`), so what is read below is all
            # this run will ever be sent.
            runs.update_run(
                db,
                data.run_id,
                status=data.status,
                phase="idle",
                turns=data.turns,
                usage=usage,
                error=data.error,
                ended=True,
            )
            # Sent to this run, never reached: the next one's.
            input_queue.queue_for_next_run(db, data.session_id, data.leftover)
            stopped = data.status == "aborted"
            untaken = input_queue.settle_taken_guidance(
                db, data.session_id, data.run_id, stopped=stopped
            )
            cancelled = input_queue.cancel_pending(db, data.session_id) if stopped else []
            cancelled = [*(untaken if stopped else []), *cancelled]
            input_queue.release_guidance(db, data.run_id)
            queued_input = input_queue.has_run_starting_input(db, data.session_id)
            end = AgentEnd(
                run_id=data.run_id,
                status=data.status,
                turns=data.turns,
                usage=usage,
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
        return FinishRunResult(
            leaf_id=leaf_id,
            final_text=final_text,
            usage=usage,
            cancelled_inputs=[i.text for i in cancelled],
            queued_input=queued_input,
        )

    @activity.defn(name=QUEUE_INPUT)
    def queue_input(self, data: QueueInputInput) -> None:
        """Keep steering and follow-ups that reached the run after its end was stored: they
        start the next run, as input sent while it was open does. Or cancel the session's
        waiting input, when a stop reached the run as it ended."""
        with self._db.transaction() as db:
            if data.cancel_waiting:
                input_queue.cancel_pending(db, data.session_id)
            input_queue.queue_for_next_run(db, data.session_id, data.items)

    @activity.defn(name=APPLY_CHANGES)
    def apply_changes(self, data: ApplyChangesInput) -> None:
        """Apply changes to an idle session: entries below its leaf, session-wide config."""
        with self._db.transaction() as db:
            session = sessions.require_session(db, data.session_id)
            config = session.config
            new: list[SessionEntry] = []
            for change in data.changes:
                new += change.all_entries()
                if change.config is not None and change.config.session_wide():
                    config = change.config.apply(config)
            append_below(db, data.session_id, session.leaf_id, new, run_id=None)
            if config != session.config:
                sessions.set_session_wide_config(db, data.session_id, config)

    @activity.defn(name=TAKE_GUIDANCE)
    def take_guidance(self, data: TakeGuidanceInput) -> TakeGuidanceResult:
        with self._db.transaction() as db:
            return TakeGuidanceResult(
                taken=input_queue.take_guidance(db, data.run_id, data.item_ids)
            )

    @activity.defn(name=RECORD_EVENTS)
    def record_events(self, data: RecordEventsInput) -> None:
        with self._db.transaction() as db:
            events.append_events(db, data.session_id, data.run_id, keyed(data.key, data.events))
            if data.phase is not None:
                runs.update_run(db, data.run_id, phase=data.phase)
