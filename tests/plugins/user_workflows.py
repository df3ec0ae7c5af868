"""A user's own Temporal workflow and activity, in a module that also uses duragent (as an
application's would: its activities start sessions). Run on one worker with duragent's
`TemporalPlugin`, which passes `duragent` through the workflow sandbox."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow

from duragent import DuragentClient, Settings


@activity.defn
async def count_sessions(where: list[str]) -> int:
    home, database_url = where
    settings = Settings.from_env(home=home, database_url=database_url)
    from duragent.client.connection import open_store

    client = DuragentClient(None, open_store(settings), settings)  # type: ignore[arg-type]
    return len(await client.sessions.list())


@workflow.defn
class CountSessions:
    @workflow.run
    async def run(self, where: list[str]) -> str:
        count = await workflow.execute_activity(
            count_sessions, where, start_to_close_timeout=timedelta(seconds=30)
        )
        return f"{count} session(s)"
