"""Pruning the store (`duragent prune`): whole sessions idle since a cutoff or named by id,
or only old run events; and, every time, the leftovers nothing reads again. The deleting
is the store's (`store.retention`); this part decides what may go, asking Temporal too.

Why Temporal as well as the store: a run records itself in the store (its run state, as
`running`) in its first step, before it does anything else, and keeps that state until
its outcome is stored, waiting on a person included (approvals, questions, budgets). But
a run Temporal has started that no worker has taken yet (every worker down, or busy) is
only in Temporal; so is a compaction, a tree move or a workspace move under way on an
idle session. So a session goes only when both say nothing is open, and the store checks
once more under the session's lock as it deletes (`store.retention.drop_unit`).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Concatenate, Literal, ParamSpec, TypeVar

from sqlalchemy import Connection

from duragent.client.errors import DuragentError, SessionNotFound
from duragent.client.part import ClientPart
from duragent.domain.runs import session_workflow_id
from duragent.store import retention
from duragent.store.retention import Tally
from duragent.store.statements import Tx

P = ParamSpec("P")
R = TypeVar("R")

AGE_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
PAGE = 200
"""Candidate sessions read per query."""
LEFTOVER_WORDS = {
    "staged_messages": "staged messages of ended runs",
    "cancel_hints": "cancel hints",
    "trigger_deliveries": "trigger deliveries",
}
"""Each leftover (`store.retention.LEFTOVERS`) as a report names it."""


def parse_age(text: str) -> int:
    """An age such as `30d`, `12h`, `90m`, `45s` or `2w` in milliseconds; `ValueError`
    naming the rule otherwise."""
    rule = "an age is a number and a unit: s, m, h, d or w (30d, 12h, 90m)"
    cleaned = text.strip().lower()
    if cleaned.startswith("-"):
        raise ValueError(f"cannot be negative (got {text!r}): {rule}")
    found = _AGE.fullmatch(cleaned)
    if found is None:
        raise ValueError(f"{rule} (got {text!r})")
    return int(float(found.group(1)) * AGE_UNITS_MS[found.group(2)])


class SessionKept(DuragentError):
    """A session named for pruning that must stay: a sub-agent's session (it goes with
    its parent), or one with a run or workflow open, a schedule or a trigger."""

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(f"session {session_id} cannot be pruned: {reason}")
        self.session_id = session_id


@dataclass
class Kept:
    """A session old enough to go that stayed, and why."""

    session_id: str
    reason: str


@dataclass
class PruneReport:
    """What a prune deleted, or with `dry_run` would delete."""

    mode: Literal["idle", "named", "events"]
    """Sessions idle since the cutoff, sessions named by id, or old events only."""
    dry_run: bool
    cutoff_ms: int | None
    """Sessions or events last active before this went; None: sessions named by id."""
    sessions: list[str] = field(default_factory=list)
    """The sessions pruned whole, each with its sub-agents' sessions (counted in `rows`)."""
    event_sessions: int = 0
    """`--events-only`: the sessions that lost events."""
    kept: list[Kept] = field(default_factory=list)
    rows: Counter[str] = field(default_factory=Counter)
    """The sessions' rows, per table."""
    leftovers: Counter[str] = field(default_factory=Counter)
    transactions: int = 0

    def add(self, tally: Tally, *, leftovers: bool = False) -> None:
        (self.leftovers if leftovers else self.rows).update(tally.rows)
        self.transactions += tally.transactions


class Retention(ClientPart):
    """`duragent prune`'s decisions: what may go, then the store's deletes, in threads."""

    async def prune_idle(
        self, older_than_ms: int, *, dry_run: bool = False, batch: int = retention.BATCH_ROWS
    ) -> PruneReport:
        """Delete every session whose last activity (its unit's: its sub-agents' sessions
        go with it) is older than `older_than_ms`, unless something keeps it (`Kept`);
        then the leftovers."""
        now = _now_ms()
        cutoff = now - min(older_than_ms, now)
        report = PruneReport(mode="idle", dry_run=dry_run, cutoff_ms=cutoff)
        after: tuple[int, str] | None = None
        while page := await self._store(retention.stale_roots, cutoff, after, PAGE):
            after = page[-1]
            for _, root in page:
                unit, reason, active = await self._store(self._judge, root, cutoff)
                if active:
                    continue  # not idle that long: nothing to say about it
                reason = reason or await self._open_workflow(unit)
                if reason is not None:
                    report.kept.append(Kept(root, reason))
                    continue
                await self._drop(report, unit, cutoff, batch)
        await self._leftovers(report, now, batch)
        return report

    async def prune_sessions(
        self,
        session_ids: Sequence[str],
        *,
        dry_run: bool = False,
        batch: int = retention.BATCH_ROWS,
    ) -> PruneReport:
        """Delete the named sessions whatever their age, each with its sub-agents'
        sessions; then the leftovers. Every one is checked first: an unknown id
        (`SessionNotFound`) or one that must stay (`SessionKept`) deletes nothing."""
        report = PruneReport(mode="named", dry_run=dry_run, cutoff_ms=None)
        units: list[list[str]] = []
        for session_id in dict.fromkeys(session_ids):
            unit, reason = await self._store(self._named, session_id)
            reason = reason or await self._open_workflow(unit)
            if reason is not None:
                raise SessionKept(session_id, reason)
            units.append(unit)
        for unit in units:
            await self._drop(report, unit, None, batch)
        await self._leftovers(report, _now_ms(), batch)
        return report

    async def prune_events(
        self, older_than_ms: int, *, dry_run: bool = False, batch: int = retention.BATCH_ROWS
    ) -> PruneReport:
        """Delete run events older than `older_than_ms` from every session, but those of
        runs open or ended since; the sessions stay whole otherwise. Then the leftovers.
        The store alone decides: a run that is only in Temporal has no events yet."""
        now = _now_ms()
        cutoff = now - min(older_than_ms, now)
        report = PruneReport(mode="events", dry_run=dry_run, cutoff_ms=cutoff)
        after: str | None = None
        while page := await self._store(retention.sessions_created_before, cutoff, after, PAGE):
            after = page[-1]
            for session_id in page:
                tally = await asyncio.to_thread(
                    retention.drop_old_events,
                    self._client.db,
                    session_id,
                    cutoff,
                    dry_run=dry_run,
                    batch=batch,
                )
                report.event_sessions += bool(tally.rows["run_events"])
                report.add(tally)
        await self._leftovers(report, now, batch)
        return report

    # ------------------------------------------------------------------------ the parts

    def _judge(self, db: Tx, root: str, cutoff: int) -> tuple[list[str], str | None, bool]:
        """The unit `root` heads, why it must stay (or None), and whether it was active
        since `cutoff` (a sub-agent's session, a run, an event newer than its own row)."""
        unit = retention.unit_of(db, root)
        active = retention.last_activity(db, unit) >= cutoff
        return unit, None if active else retention.held(db, unit), active

    def _named(self, db: Tx, session_id: str) -> tuple[list[str], str | None]:
        """The unit a named session heads and why it must stay, or `SessionNotFound`."""
        if not retention.is_stored(db, session_id):
            raise SessionNotFound(session_id)
        parent = retention.sub_agent_of(db, session_id)
        if parent is not None:
            return [session_id], (
                f"it is the session of a sub-agent of session {parent[0]} (its call "
                f"{parent[1]}): prune {parent[0]}, and its sub-agents' sessions go with it"
            )
        unit = retention.unit_of(db, session_id)
        return unit, retention.held(db, unit)

    async def _open_workflow(self, unit: Sequence[str]) -> str | None:
        """Why a session of the unit must stay by what Temporal says, or None."""
        for session_id in unit:
            kind = await self._client.workflows.open_type(session_id)
            if kind is not None:
                whose = "" if session_id == unit[0] else f" of its sub-agent session {session_id}"
                return (
                    f"workflow {session_workflow_id(session_id)}{whose} ({kind}) is open in "
                    "Temporal, maybe a run no worker has started yet: let it end, or "
                    "`duragent abort` it"
                )
        return None

    async def _drop(
        self, report: PruneReport, unit: list[str], cutoff: int | None, batch: int
    ) -> None:
        if report.dry_run:
            rows = await self._store(retention.unit_rows, unit)
            report.add(Tally(rows=rows))
            report.sessions.append(unit[0])
            return
        tally, reason = await asyncio.to_thread(
            retention.drop_unit, self._client.db, unit, cutoff, batch
        )
        report.add(tally)
        if reason is None:
            report.sessions.append(unit[0])
        else:
            report.kept.append(Kept(unit[0], reason))

    async def _leftovers(self, report: PruneReport, now: int, batch: int) -> None:
        tally = await asyncio.to_thread(
            retention.drop_leftovers, self._client.db, now, dry_run=report.dry_run, batch=batch
        )
        report.add(tally, leftovers=True)

    async def _store(
        self, work: Callable[Concatenate[Connection, P], R], *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """`work(db, *args)` in one store transaction, in a thread."""

        def run() -> R:
            with self._client.db.statements() as db:
                return work(db, *args, **kwargs)

        return await asyncio.to_thread(run)


def _now_ms() -> int:
    return int(time.time() * 1000)
