"""`SessionRun` as the next release would ship it: the same workflow name, the same
commands for every history recorded so far, and one change behind `workflow.patched`.

The change is a memo the run writes at the start of each execution (`build: next`), as
visible in Temporal as a new step would be, and as harmless to the run: it stands for any
change to workflow logic made the way the project makes them (docs/DEPLOYING.md).
"""

from __future__ import annotations

from temporalio import workflow

from duragent.domain.runs import RunInput, RunResult
from duragent.workflows.session_run import SessionRun

PATCH = "upgrade-test-next-build"
MEMO = {"build": "next"}


@workflow.defn(name="SessionRun")
class NextSessionRun(SessionRun):
    @workflow.run
    async def run(self, run: RunInput) -> RunResult:
        # An execution begun by the old build replays with False (its history has no
        # marker here) and keeps the old behaviour to its end; a new one takes the branch.
        if workflow.patched(PATCH):
            workflow.upsert_memo(MEMO)
        return await super().run(run)
