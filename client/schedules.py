"""Schedules (`client.schedules`): a prompt sent to a session on a timetable, on Temporal
Schedules, and the delivery of each firing.

A schedule is a Temporal schedule (its timetable, paused or not, its recent firings)
whose action starts the `ScheduledPrompt` workflow with a `ScheduleFiring`; its row in
the store says whose it is and which session it prompts, so listing and ownership read
at once. The cron expressions are kept in the schedule's memo too: Temporal describes
them back as calendars.

Each firing's activity calls `deliver`, which sends the prompt the way a person's is
sent (`client.runs.prompt`, `client.inputs.follow_up`), marked as scheduled
(`ScheduledMark`), with the session's busy policy applied.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleDescription,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    WorkflowExecutionStatus,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from duragent.client.bounds import bounded
from duragent.client.errors import (
    DuragentError,
    InvalidSchedule,
    ScheduleNotFound,
    SessionBusy,
    SessionNotFound,
    TooManySchedules,
)
from duragent.client.part import StoreBackedPart, SyncPart, in_thread
from duragent.client.run_control import RunHandle
from duragent.domain.messages import ScheduledMark, TextContent, UserMessage
from duragent.domain.schedules import (
    BUSY_POLICIES,
    CRON_FORMS,
    SCHEDULE_ID_PREFIX,
    BusyPolicy,
    DeliverScheduledPrompt,
    FiringOutcome,
    RecentFiring,
    ScheduleFiring,
    ScheduleView,
    check_cron,
    every_text,
    parse_every,
)
from duragent.store import schedules
from duragent.store.clock import now_ms
from duragent.store.records import ScheduleRecord, SessionRecord
from duragent.workflows.scheduled_prompt import ScheduledPrompt

MAX_SCHEDULES = 100
"""Schedules one owner may have: each fires on its own, so a bound keeps what one user
can make the workers do (and what a listing reads) bounded."""
MAX_CRON = 10
"""Cron expressions one schedule may have."""


class SyncSchedules(SyncPart):
    """Schedules' rows in the store (`client.sync.schedules`): whose each is, and which
    session it prompts."""

    def _count(self, owner: str | None) -> int:
        with self._client.db.transaction() as db:
            return schedules.count_schedules(db, owner)

    def _add_row(self, schedule_id: str, session_id: str, owner: str | None) -> None:
        with self._client.db.transaction() as db:
            schedules.add_schedule(db, schedule_id=schedule_id, session_id=session_id, owner=owner)

    def record(self, schedule_id: str) -> ScheduleRecord:
        """The schedule's row; `ScheduleNotFound` for an id no schedule has."""
        with self._client.db.transaction() as db:
            record = schedules.get_schedule(db, schedule_id)
        if record is None:
            raise ScheduleNotFound(schedule_id)
        return record

    def records(
        self, *, session_id: str | None = None, owner: str | None = None
    ) -> builtins.list[ScheduleRecord]:
        """The schedules of a session, or else of an owner (None: those of no owner)."""
        with self._client.db.transaction() as db:
            return schedules.list_schedules(
                db, session_id=session_id, owner=owner, limit=MAX_SCHEDULES
            )

    def _delete_row(self, schedule_id: str) -> None:
        with self._client.db.transaction() as db:
            schedules.delete_schedule(db, schedule_id)


class Schedules(StoreBackedPart[SyncSchedules]):
    """Add, list, pause, resume, trigger and delete schedules; deliver their firings."""

    record = in_thread(SyncSchedules.record)
    records = in_thread(SyncSchedules.records)

    async def add(
        self,
        session_id: str,
        prompt: str,
        *,
        cron: Sequence[str] = (),
        every: timedelta | str | None = None,
        timezone: str | None = None,
        busy: BusyPolicy = "queue",
        new_session: bool = False,
        owner: str | None = None,
        paused: bool = False,
        note: str = "",
    ) -> ScheduleView:
        """A schedule that sends `prompt` to the session on a timetable: `cron`
        expressions or `every` (a `timedelta` or `parse_every`'s text: `1h`, `30m`,
        `90s`), read in `timezone` (IANA name; default UTC). When the session is busy at
        the time, `busy` says what happens (`domain.schedules.BusyPolicy`); with
        `new_session` every firing runs in a new session made from this one instead.
        `InvalidSchedule` names what was wrong; nothing is made then."""
        session = await self._client.sessions.get(session_id)
        firing, spec = self._checked(
            session, prompt, cron, every, timezone, busy, new_session, owner
        )
        if note:
            bounded("schedule note", note)
        count = await asyncio.to_thread(self._store._count, owner)
        if count >= MAX_SCHEDULES:
            raise TooManySchedules(MAX_SCHEDULES)
        schedule_id = firing.schedule_id
        schedule = Schedule(
            action=ScheduleActionStartWorkflow(
                ScheduledPrompt.run,
                firing,
                id=schedule_id,
                task_queue=self._client.settings.task_queue,
                static_summary=f"scheduled prompt for session {session_id}",
            ),
            spec=spec,
            policy=SchedulePolicy(
                # A firing while the one before is still being delivered (no worker up)
                # waits for it; more than one waiting are dropped.
                overlap=ScheduleOverlapPolicy.BUFFER_ONE,
                catchup_window=timedelta(seconds=self._client.settings.schedule_catchup_window_s),
            ),
            state=ScheduleState(paused=paused, note=note or None),
        )
        memo = {"session_id": session_id, "cron": list(cron)}
        try:
            await self._client.temporal.create_schedule(schedule_id, schedule, memo=memo)
        except RPCError as err:
            if err.status == RPCStatusCode.INVALID_ARGUMENT:
                # What `check_cron` lets through and the server still refuses: its words,
                # after what is accepted.
                raise InvalidSchedule(
                    f"the timetable cannot be used ({err.message}); {CRON_FORMS}"
                ) from err
            raise
        try:
            await asyncio.to_thread(self._store._add_row, schedule_id, session_id, owner)
        except BaseException:
            with contextlib.suppress(RPCError):
                await self._handle(schedule_id).delete()
            raise
        return await self.get(schedule_id)

    def _checked(
        self,
        session: SessionRecord,
        prompt: str,
        cron: Sequence[str],
        every: timedelta | str | None,
        timezone: str | None,
        busy: str,
        new_session: bool,
        owner: str | None,
    ) -> tuple[ScheduleFiring, ScheduleSpec]:
        """The firing and timetable of a new schedule, or `InvalidSchedule`."""
        bounded("schedule prompt", prompt)
        if not prompt.strip():
            raise InvalidSchedule("the schedule's prompt is empty")
        if busy not in BUSY_POLICIES:
            raise InvalidSchedule(
                f"busy policy {busy!r}: expected one of {', '.join(BUSY_POLICIES)}"
            )
        if bool(cron) == (every is not None):
            raise InvalidSchedule(
                "give the schedule either cron expressions or --every, one of them"
            )
        if len(cron) > MAX_CRON:
            raise InvalidSchedule(f"at most {MAX_CRON} cron expressions")
        for expression in cron:
            bounded("cron expression", expression)
            if not expression.strip():
                raise InvalidSchedule("a cron expression is empty")
            try:
                check_cron(expression)
            except ValueError as err:
                raise InvalidSchedule(str(err)) from err
        interval: timedelta | None = None
        if isinstance(every, str):
            try:
                interval = parse_every(every)
            except ValueError as err:
                raise InvalidSchedule(str(err)) from err
        elif every is not None:
            if not timedelta(seconds=1) <= every <= timedelta(days=366):
                raise InvalidSchedule("every: must be between 1s and 366d")
            interval = every
        if timezone is not None:
            bounded("time zone", timezone)
            try:
                ZoneInfo(timezone)
            except (ZoneInfoNotFoundError, ValueError) as err:
                raise InvalidSchedule(
                    f"time zone {timezone!r} is not an IANA name (e.g. Europe/Paris)"
                ) from err
        firing = ScheduleFiring(
            schedule_id=SCHEDULE_ID_PREFIX + uuid.uuid4().hex,
            session_id=session.id,
            prompt=prompt,
            busy=busy,
            new_session=new_session,
            owner=owner,
        )
        spec = ScheduleSpec(
            cron_expressions=[c.strip() for c in cron],
            intervals=[ScheduleIntervalSpec(every=interval)] if interval else [],
            time_zone_name=timezone,
        )
        return firing, spec

    async def get(self, schedule_id: str, *, outcomes: bool = False) -> ScheduleView:
        """The schedule; with `outcomes`, what each recent firing did (one more call per
        firing)."""
        record = await self.record(schedule_id)
        try:
            described = await self._handle(schedule_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise ScheduleNotFound(schedule_id) from err
            raise
        view = await self._view(record, described)
        if outcomes:
            for firing in view.recent:
                firing.outcome = await self.outcome(firing.workflow_id)
        return view

    async def list(
        self, *, session_id: str | None = None, owner: str | None = None
    ) -> builtins.list[ScheduleView]:
        """The schedules of a session (`session_id`), or else of `owner`, oldest first.
        One whose Temporal schedule is gone (deleted outside duragent) is left out."""
        records = await self.records(session_id=session_id, owner=owner)

        async def one(record: ScheduleRecord) -> ScheduleView | None:
            with contextlib.suppress(ScheduleNotFound):
                return await self.get(record.id)
            return None

        views = await asyncio.gather(*(one(record) for record in records))
        return [view for view in views if view is not None]

    async def pause(self, schedule_id: str, note: str = "") -> ScheduleView:
        """Stop firing until resumed (a firing being delivered goes on)."""
        bounded("schedule note", note)
        await self._act(schedule_id, lambda handle: handle.pause(note=note or "paused"))
        return await self.get(schedule_id)

    async def resume(self, schedule_id: str, note: str = "") -> ScheduleView:
        """Fire again from the next time on its timetable (missed times stay missed)."""
        bounded("schedule note", note)
        await self._act(schedule_id, lambda handle: handle.unpause(note=note or "resumed"))
        return await self.get(schedule_id)

    async def trigger(self, schedule_id: str) -> ScheduleView:
        """Fire now, once, paused or not (the busy policy applies as at any firing)."""
        await self._act(schedule_id, lambda handle: handle.trigger())
        return await self.get(schedule_id)

    async def delete(self, schedule_id: str) -> None:
        """Delete the schedule: it fires no more (a firing being delivered goes on)."""
        await self.record(schedule_id)
        with contextlib.suppress(ScheduleNotFound):
            await self._act(schedule_id, lambda handle: handle.delete())
        await asyncio.to_thread(self._store._delete_row, schedule_id)

    async def _act(self, schedule_id: str, action: Any) -> None:
        await self.record(schedule_id)
        try:
            await action(self._handle(schedule_id))
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise ScheduleNotFound(schedule_id) from err
            raise

    def _handle(self, schedule_id: str) -> ScheduleHandle:
        return self._client.temporal.get_schedule_handle(schedule_id)

    async def _view(self, record: ScheduleRecord, described: ScheduleDescription) -> ScheduleView:
        schedule = described.schedule
        action = schedule.action
        assert isinstance(action, ScheduleActionStartWorkflow)
        converter = self._client.temporal.data_converter.payload_converter
        firing: ScheduleFiring = converter.from_payload(action.args[0], ScheduleFiring)
        memo = await described.memo()
        intervals = schedule.spec.intervals
        return ScheduleView(
            id=record.id,
            session_id=record.session_id,
            owner=record.owner,
            prompt=firing.prompt,
            busy=firing.busy,
            new_session=firing.new_session,
            cron=[str(c) for c in memo.get("cron") or []],
            every=every_text(intervals[0].every) if intervals else None,
            timezone=schedule.spec.time_zone_name or None,
            paused=schedule.state.paused,
            note=schedule.state.note or "",
            catchup_window_s=(schedule.policy.catchup_window or timedelta()).total_seconds(),
            next_runs=list(described.info.next_action_times[:5]),
            recent=[
                RecentFiring(
                    scheduled_at=result.scheduled_at,
                    started_at=result.started_at,
                    workflow_id=getattr(result.action, "workflow_id", ""),
                )
                for result in described.info.recent_actions
            ],
            created_at=record.created_at,
        )

    async def outcome(self, workflow_id: str) -> FiringOutcome | None:
        """What a firing did (its workflow's result); None while it is being delivered,
        or when it failed (its delivery ran out of time) or is gone from Temporal."""
        handle = self._client.temporal.get_workflow_handle(workflow_id)
        try:
            described = await handle.describe()
            if described.status != WorkflowExecutionStatus.COMPLETED:
                return None
            return FiringOutcome.model_validate(await handle.result())
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise

    # A firing, on the worker (`activities.schedules`).

    async def deliver(self, data: DeliverScheduledPrompt) -> FiringOutcome:
        """Send a firing's prompt as a person's prompt is sent, marked as scheduled: an
        idle session starts a run; a busy one gets the busy policy. Delivering the same
        firing again (a retried activity) delivers it once: its run's id and its
        follow-up's id come from the firing's id."""
        try:
            return await self._deliver(data)
        except (SessionNotFound, InvalidSchedule) as err:
            raise ApplicationError(str(err), type=type(err).__name__, non_retryable=True) from err
        except DuragentError as err:  # busy with what is not a run, a store hiccup: again
            raise ApplicationError(str(err), type=type(err).__name__) from err

    async def _deliver(self, data: DeliverScheduledPrompt) -> FiringOutcome:
        firing = data.firing
        session_id = firing.session_id
        message = UserMessage(
            content=[TextContent(text=firing.prompt)],
            timestamp=now_ms(),
            scheduled=ScheduledMark(schedule_id=firing.schedule_id, scheduled_at=data.scheduled_at),
        )
        # Ids of the firing's run and of its follow-up (which becomes an entry's id): the
        # same for every attempt, and short as the store's ids are.
        run_id = uuid.uuid5(uuid.NAMESPACE_URL, data.firing_id).hex
        follow_up_id = uuid.uuid5(uuid.NAMESPACE_URL, data.firing_id + "/follow-up").hex
        started = await self._client.runs.get(run_id)
        if started is not None:
            return FiringOutcome(outcome="started", session_id=started.session_id, run_id=run_id)
        if firing.new_session:
            return await self._in_new_session(data, message, run_id)
        queued = FiringOutcome(
            outcome="queued",
            session_id=session_id,
            detail="it starts the next run when the open one ends",
        )
        if firing.busy == "queue":
            # Started, or queued to start the next run when the open one ends: sent as a
            # person's chat input is, once for all attempts (`client.inputs.deliver_once`).
            sent = await self._client.inputs.deliver_once(
                session_id, message, item_id=follow_up_id, run_id=run_id
            )
            if isinstance(sent, RunHandle):
                return FiringOutcome(outcome="started", session_id=session_id, run_id=run_id)
            return queued
        try:
            await self._client.runs.prompt(session_id, message, run_id=run_id)
            return FiringOutcome(outcome="started", session_id=session_id, run_id=run_id)
        except SessionBusy as busy:
            if busy.run_id == run_id:  # this firing's own run (an earlier attempt's)
                return FiringOutcome(outcome="started", session_id=session_id, run_id=run_id)
            if firing.busy == "skip":
                return FiringOutcome(outcome="skipped", session_id=session_id, detail=str(busy))
            return await self._in_new_session(data, message, run_id)

    async def _in_new_session(
        self, data: DeliverScheduledPrompt, message: UserMessage, run_id: str
    ) -> FiringOutcome:
        """Run the prompt in a new session made from the firing's session: its whole
        config, its workspace and host, the schedule's owner."""
        template = await self._client.sessions.get(data.firing.session_id)
        # The firing's session, the same for every attempt: a retry finds the one made.
        session_id = uuid.uuid5(uuid.NAMESPACE_URL, data.firing_id + "/session").hex
        try:
            session = await self._client.sessions.get(session_id)
        except SessionNotFound:
            when = datetime.fromtimestamp(data.scheduled_at / 1000, UTC)
            base = template.name or f"session {template.id[:8]}"
            session = await self._client.sessions.create(
                workspace=template.workspace,
                name=f"{base[:150]} (scheduled {when:%Y-%m-%d %H:%M} UTC)",
                owner=data.firing.owner,
                host=template.host,
                config=template.config,
                session_id=session_id,
            )
        try:
            await self._client.runs.prompt(session.id, message, run_id=run_id)
        except SessionBusy as busy:
            if busy.run_id != run_id:  # not this firing's own run, an attempt before
                raise
        return FiringOutcome(
            outcome="started",
            session_id=session.id,
            run_id=run_id,
            detail=f"in a new session made from {template.id}",
        )
