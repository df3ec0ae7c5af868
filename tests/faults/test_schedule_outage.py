"""A schedule through a Temporal outage: the firings it missed while the server was down
run when it is back, as far back as the catch-up window (DURAGENT_SCHEDULE_CATCHUP_WINDOW)
reaches, and no further."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

from support import eventually, run_finished
from test_temporal_restart import private_stack

from duragent.client.api import DuragentClient
from duragent.domain.schedules import ScheduleView

SCRIPT: dict[str, object] = {
    "conversations": {"*": [{"match": "^tick", "repeat": True, "reply": [{"text": "tock"}]}]}
}
OUTAGE_S = 16.0
SHORT_WINDOW_S = 10.0  # Temporal's least
CATCH_UP_BOUND_S = 90.0


async def test_missed_firings_run_after_an_outage_within_the_catch_up_window(
    tmp_path: Path,
) -> None:
    async with private_stack(tmp_path, SCRIPT) as (stack, outage):
        short = DuragentClient(
            stack.temporal,
            stack.db,
            stack.settings.model_copy(update={"schedule_catchup_window_s": SHORT_WINDOW_S}),
        )
        # A worker in this process: a spawned one spends seconds starting, which the
        # test does not need (the worker and client reconnecting is test_temporal_restart's).
        async with stack.worker():
            long_session = (await stack.client.sessions.create(name="long window")).id
            short_session = (await stack.client.sessions.create(name="short window")).id
            made = [
                await stack.client.schedules.add(long_session, "tick", every="2s"),
                await short.schedules.add(short_session, "tick", every="2s"),
            ]
            assert [m.catchup_window_s for m in made] == [3600, SHORT_WINDOW_S]
            try:
                for session in (long_session, short_session):
                    await eventually(partial(run_finished, stack, session), timeout=30)
                await outage.begin("stop")
                await asyncio.sleep(OUTAGE_S)  # the outage itself: firings are missed meanwhile
                await outage.end()
                down = datetime.fromtimestamp(outage.down_at, UTC)
                up = datetime.fromtimestamp(outage.up_at, UTC)

                async def caught_up(schedule: ScheduleView) -> datetime:
                    """The earliest time in the outage the schedule fired for, once it has."""
                    late: list[datetime] = []

                    async def seen() -> bool:
                        view = await stack.client.schedules.get(schedule.id)
                        late[:] = [f.scheduled_at for f in view.recent if f.scheduled_at > down]
                        return bool(late)

                    # Bounded loosely: a firing in flight when the server went away holds the
                    # next one back (one delivery at a time) until its delivery, retried up to
                    # 15 s apart, gets through once the server and its scheduler are back.
                    await eventually(seen, timeout=CATCH_UP_BOUND_S)
                    return min(late)

                long_first, short_first = [await caught_up(m) for m in made]
                # The long window reaches back to the outage's first missed firing (the next
                # one waits for it, the rest are dropped: one delivery at a time); the short
                # one only its own length back from when the server caught up, after `up`.
                assert long_first <= down + timedelta(seconds=2)
                assert short_first > up - timedelta(seconds=SHORT_WINDOW_S + 1)
                assert long_first < short_first
                # And they were delivered: each session has a run of the missed prompt.
                for session in (long_session, short_session):
                    await eventually(partial(run_finished, stack, session), timeout=30)
            finally:
                for schedule in made:
                    await stack.client.schedules.delete(schedule.id)
