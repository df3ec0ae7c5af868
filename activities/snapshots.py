"""Taking turn snapshots (one per turn, docs/SPEC.md): config, resources, providers."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import event
from sqlalchemy.orm import Session

from duragent.activities.extensions import Extensions
from duragent.activities.resources import load_resources
from duragent.domain.config import SnapshotRef, TurnSnapshot
from duragent.domain.context import PathState
from duragent.store import snapshots
from duragent.store.records import SessionRecord


class SnapshotTaker:
    """Makes the snapshot a turn runs with; provider callbacks run once per snapshot."""

    def __init__(self, extensions: Extensions, shared_resources: Path | None = None) -> None:
        self._extensions = extensions
        self._shared = shared_resources
        self._stored: set[str] = set()

    def take(self, db: Session, session: SessionRecord, state: PathState) -> SnapshotRef:
        config = session.config
        snapshot = TurnSnapshot(
            model=state.model,
            thinking_level=state.thinking_level,
            system_prompt=self._extensions.system_prompt(config.system_prompt, session),
            active_tools=state.active_tools,
            max_tokens=config.max_tokens,
            resources=load_resources(Path(session.workspace), self._shared),
            approval_policy=state.approval_policy,
        )
        ref = SnapshotRef.of(snapshot)
        if ref.id not in self._stored:  # content-addressed: once stored, always stored
            snapshots.put_snapshot(db, snapshot)
            # Stored once the caller's transaction commits, not before: one rolled back (the
            # database gone a moment, the activity cancelled) wrote nothing, and a worker
            # that remembered it anyway would fail every later turn that needs it.
            event.listen(db, "after_commit", lambda _: self._stored.add(ref.id), once=True)
        return ref
