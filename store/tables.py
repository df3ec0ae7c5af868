"""The store's tables (SQLAlchemy 2 declarative). One Alembic revision per change."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.sql import false, true

JsonType = JSON().with_variant(JSONB(), "postgresql")
# SQLite only autoincrements INTEGER PRIMARY KEY; PostgreSQL wants a 64-bit identity.
SeqType = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JsonType}


def table_of(model: type[Base]) -> Table:
    """The Core table of a mapped class, for bulk statements."""
    table = model.__table__
    assert isinstance(table, Table)
    return table


class SessionRow(Base):
    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str | None] = mapped_column(String(200))
    owner: Mapped[str | None] = mapped_column(String(200), index=True)
    workspace: Mapped[str] = mapped_column(Text)
    config: Mapped[dict[str, Any]]
    leaf_id: Mapped[str | None] = mapped_column(String(64))
    parent_session_id: Mapped[str | None] = mapped_column(String(64), index=True)
    """The session this one came from: forked from (with `forked_from_entry_id`) or a
    sub-agent of (with `parent_tool_call_id`)."""
    forked_from_entry_id: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger, index=True)
    """Indexed: `duragent prune --older-than` starts from the sessions idle since its cutoff
    (`store.retention`)."""
    # The last number handed out to this session's display messages and run events
    # (`store.cursor_order`): cursors count per session, from 1.
    last_message_seq: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    last_event_seq: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # A sub-agent's session: the parent's run and the `delegate` call it answers.
    parent_run_id: Mapped[str | None] = mapped_column(String(64))
    parent_tool_call_id: Mapped[str | None] = mapped_column(String(64))
    # The host whose workspace the session works in (`domain.hosts`); None until its
    # first run records it, and always None with shared workspaces.
    host: Mapped[str | None] = mapped_column(String(63))


class EntryRow(Base):
    """A session tree node. `seq` orders entries by insertion across the store."""

    __tablename__ = "session_entries"
    __table_args__ = (Index("ix_session_entries_session_seq", "session_id", "seq"),)

    seq: Mapped[int] = mapped_column(SeqType, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(64), unique=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    parent_id: Mapped[str | None] = mapped_column(String(64), index=True)
    type: Mapped[str] = mapped_column(String(40))
    payload: Mapped[dict[str, Any]]
    timestamp: Mapped[int] = mapped_column(BigInteger)
    run_id: Mapped[str | None] = mapped_column(String(64))


class StagedMessageRow(Base):
    """An activity's output waiting for its save point (an assistant message, a tool result).

    Staged rows are not part of the session: the save point moves them into the tree in
    call order, so a half-finished turn is never visible as a broken transcript.
    """

    __tablename__ = "staged_messages"

    entry_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(64), index=True)
    run_id: Mapped[str] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]]
    created_at: Mapped[int] = mapped_column(BigInteger)


class DisplayMessageRow(Base):
    """What a UI replays: append-only, complete, never compacted. `seq` numbers a
    session's messages 1, 2, 3, ... (`store.cursor_order`)."""

    __tablename__ = "display_messages"
    __table_args__ = (
        PrimaryKeyConstraint("session_id", "seq", name="pk_display_messages"),
        UniqueConstraint("id", name="uq_display_messages_id"),
    )

    session_id: Mapped[str] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE", name="fk_display_messages_session")
    )
    seq: Mapped[int] = mapped_column(BigInteger, autoincrement=False)
    id: Mapped[str] = mapped_column(String(64))
    run_id: Mapped[str | None] = mapped_column(String(64))
    role: Mapped[str] = mapped_column(String(40))
    payload_bytes: Mapped[int] = mapped_column(Integer)
    """The payload's size as JSON: pages are bounded in bytes without loading payloads."""
    payload: Mapped[dict[str, Any]]
    created_at: Mapped[int] = mapped_column(BigInteger)


class RunStateRow(Base):
    __tablename__ = "run_states"
    __table_args__ = (Index("ix_run_states_session_started", "session_id", "started_at"),)

    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    workflow_id: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(40))
    status: Mapped[str] = mapped_column(String(20))
    phase: Mapped[str] = mapped_column(String(20))
    turns: Mapped[int] = mapped_column(Integer, default=0)
    usage: Mapped[dict[str, Any]]
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)
    ended_at: Mapped[int | None] = mapped_column(BigInteger)


class RunEventRow(Base):
    """The run-event side channel. `seq` is the cursor clients resume from: a session's
    events are numbered 1, 2, 3, ... (`store.cursor_order`)."""

    __tablename__ = "run_events"
    __table_args__ = (
        PrimaryKeyConstraint("session_id", "seq", name="pk_run_events"),
        UniqueConstraint("session_id", "key", name="uq_run_events_session_key"),
    )

    session_id: Mapped[str] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE", name="fk_run_events_session")
    )
    seq: Mapped[int] = mapped_column(BigInteger, autoincrement=False)
    run_id: Mapped[str | None] = mapped_column(String(64))
    type: Mapped[str] = mapped_column(String(60))
    payload_bytes: Mapped[int] = mapped_column(Integer)
    """The payload's size as JSON: pages are bounded in bytes without loading payloads."""
    payload: Mapped[dict[str, Any]]
    key: Mapped[str | None] = mapped_column(String(120))
    """Set for events a retried step may emit twice; the second insert is ignored."""
    created_at: Mapped[int] = mapped_column(BigInteger)


class TurnSnapshotRow(Base):
    """Content-addressed turn snapshots; model activities load theirs by id."""

    __tablename__ = "turn_snapshots"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    payload: Mapped[dict[str, Any]]
    created_at: Mapped[int] = mapped_column(BigInteger)


class InputQueueRow(Base):
    """Input sent to a session outside a run's signals: `next_turn` messages waiting for
    the next run, and runtime guidance bound to the open one."""

    __tablename__ = "input_queue"
    __table_args__ = (Index("ix_input_queue_session_status", "session_id", "status", "position"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(20))
    run_id: Mapped[str | None] = mapped_column(String(64))
    """The run it is bound to (guidance), or the run that consumed it."""
    intent: Mapped[str | None] = mapped_column(String(20))
    """Guidance's intent (`interrupt` or `supplement`), as the client decided it."""
    text: Mapped[str] = mapped_column(Text)
    message: Mapped[dict[str, Any]]
    position: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)
    consumed_at: Mapped[int | None] = mapped_column(BigInteger)
    starts_run: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    """Input sent while a run was open (a chat box's, a webhook's, a schedule's): it starts
    the next run when that one ends, if no run took it before."""


class WorkspaceChunkRow(Base):
    """A piece of a workspace on its way from one host to another (`duragent move`): the
    source host's worker stores the packed workspace here, the target's unpacks it and
    deletes the pieces. Every host reaches the store; hosts need not reach each other."""

    __tablename__ = "workspace_chunks"
    __table_args__ = (PrimaryKeyConstraint("transfer_id", "seq", name="pk_workspace_chunks"),)

    transfer_id: Mapped[str] = mapped_column(String(64))
    seq: Mapped[int] = mapped_column(Integer, autoincrement=False)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[int] = mapped_column(BigInteger)


class CancelHintRow(Base):
    """A nudge from the worker process whose workflow task cancelled a call to the one
    running it (`activities.cancel_hints`): heartbeat now, the reply carries the cancel.
    Not the cancellation itself (Temporal's); pruned after a minute."""

    __tablename__ = "cancel_hints"

    seq: Mapped[int] = mapped_column(SeqType, primary_key=True, autoincrement=True)
    workflow_id: Mapped[str] = mapped_column(String(200))
    run_id: Mapped[str] = mapped_column(String(64))
    activity_id: Mapped[str] = mapped_column(String(200))
    origin: Mapped[str] = mapped_column(String(64))
    """The process that wrote it (it hinted its own calls directly)."""
    created_at: Mapped[int] = mapped_column(BigInteger, index=True)


class WorkerLeaseRow(Base):
    """A worker process's lease (`activities.leases`): renewed from a thread of its own;
    one that stops changing is a worker lost, whose running calls another worker fails
    through Temporal so that their next attempts start at once."""

    __tablename__ = "worker_leases"

    worker_id: Mapped[str] = mapped_column(String(120), primary_key=True)
    renewals: Mapped[int] = mapped_column(BigInteger)
    """Counted up at each renewal: a lapsed lease is taken only at the count it was seen
    at (a compare-and-delete), so a renewal meanwhile keeps it."""
    renewed_at: Mapped[int] = mapped_column(BigInteger, index=True)
    """Milliseconds on the store's clock (one clock for every machine): a lease not
    renewed for the lease time has lapsed. Indexed: each renewal's lapse check reads
    only the lapsed leases."""


class RunningCallRow(Base):
    """A model or tool call running on a worker, with the task token that lets another
    worker fail it when the worker is lost."""

    __tablename__ = "running_calls"

    call_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    """The task token's SHA-256 (hex)."""
    worker_id: Mapped[str] = mapped_column(String(120), index=True)
    task_token: Mapped[bytes] = mapped_column(LargeBinary)
    activity_id: Mapped[str] = mapped_column(String(200))
    started_at: Mapped[int] = mapped_column(BigInteger)


class TriggerRow(Base):
    """A trigger (`duragent trigger`): a webhook's body made into a prompt for a session,
    or for a new session per delivery. The secret is kept as it is: verifying a signature
    needs it (it never leaves the store but in the answer that made it)."""

    __tablename__ = "triggers"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str | None] = mapped_column(String(200), index=True)
    name: Mapped[str] = mapped_column(String(200))
    secret: Mapped[str] = mapped_column(String(200))
    session_id: Mapped[str | None] = mapped_column(String(64))
    """The session each delivery goes to; None: a new session per delivery."""
    template: Mapped[str] = mapped_column(Text)
    created_at: Mapped[int] = mapped_column(BigInteger)
    secret_set_at: Mapped[int] = mapped_column(BigInteger)


class TriggerDeliveryRow(Base):
    """A delivery a trigger took: its id and its signature, remembered for a while so a
    replay of a delivered one is refused; pruned as deliveries arrive."""

    __tablename__ = "trigger_deliveries"
    __table_args__ = (
        PrimaryKeyConstraint("trigger_id", "delivery_id", name="pk_trigger_deliveries"),
        UniqueConstraint("trigger_id", "signature", name="uq_trigger_deliveries_signature"),
    )

    trigger_id: Mapped[str] = mapped_column(ForeignKey("triggers.id", ondelete="CASCADE"))
    delivery_id: Mapped[str] = mapped_column(String(200))
    signature: Mapped[str] = mapped_column(String(80))
    received_at: Mapped[int] = mapped_column(BigInteger, index=True)
    delivered: Mapped[bool] = mapped_column(Boolean, default=False, server_default=true())
    """Its prompt reached the session (a run started, or input queued); until then a
    resend of it is taken again, not refused as a replay."""


class ScheduleRow(Base):
    """A schedule's owner and session (`client.schedules`): the index listing and
    ownership read at once. What the schedule does and when is the Temporal schedule's,
    under the same id."""

    __tablename__ = "schedules"

    id: Mapped[str] = mapped_column(String(100), primary_key=True)
    session_id: Mapped[str] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), index=True
    )
    owner: Mapped[str | None] = mapped_column(String(200), index=True)
    created_at: Mapped[int] = mapped_column(BigInteger)
