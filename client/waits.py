"""A wait for a person, as the client sees it: a tool call waiting on an approval
(`client.approvals`) or an `ask_user` question waiting on an answer (`client.questions`).

Both wait in the session's run. What waits is listed by a query of the open run; a
person's word (a decision, an answer) is an update of it, acknowledged once the run took
it. Once no run is open, the store's newest event about the call says why a word comes
too late. Each needs a worker answering for the run, and each wait for one is bounded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel
from temporalio.service import RPCError
from temporalio.types import MethodSyncNoParam
from temporalio.workflow import UpdateMethodMultiParam

from duragent.client.errors import DuragentError, WorkerNotAnswering
from duragent.store import events
from duragent.workflows.session_run import SessionRun

if TYPE_CHECKING:
    from duragent.client.api import DuragentClient

WAIT_TIMEOUT = timedelta(seconds=10)
"""How long a listing, a decision or an answer waits for the run's worker to take it."""

PendingT = TypeVar("PendingT")
WordT = TypeVar("WordT")
OutcomeT = TypeVar("OutcomeT")
EndedT = TypeVar("EndedT", bound=BaseModel)


async def waiting(
    client: DuragentClient,
    session_id: str,
    query: MethodSyncNoParam[SessionRun, list[PendingT]],
    what: str,
) -> list[PendingT]:
    """What the session's open run waits for, as its `query` lists it; empty when no run
    is open. `WorkerNotAnswering` (`what` cannot be listed) when no worker answers."""
    handle = await client.workflows.open_run(session_id)
    if handle is None:
        return []
    try:
        # The RPC timeout alone is not a bound: a server-side deadline error is retried.
        return await asyncio.wait_for(
            handle.query(query, rpc_timeout=WAIT_TIMEOUT),
            timeout=WAIT_TIMEOUT.total_seconds(),
        )
    except (RPCError, TimeoutError) as err:
        raise WorkerNotAnswering(session_id, f"{what} cannot be listed") from err


async def send_word(
    client: DuragentClient,
    session_id: str,
    update: UpdateMethodMultiParam[[SessionRun, WordT], OutcomeT],
    word: WordT,
    *,
    what: str,
    refused: Callable[[str], DuragentError],
    not_recorded: Callable[[str, str], DuragentError],
    too_late: Callable[[], str | None],
) -> OutcomeT:
    """Send a person's `word` on a wait to the session's open run as `update` (see
    `SessionWorkflows.update_open_run`): `refused(why)` when the run refuses it or
    `too_late()` (read from the store once no run is open) says why it comes too late;
    `not_recorded(session_id, detail)` when no worker took it in time."""
    return await client.workflows.update_open_run(
        session_id,
        update,
        word,
        what=what,
        timeout=WAIT_TIMEOUT,
        refused=refused,
        not_taken=lambda detail: not_recorded(session_id, detail),
        settled=too_late,
    )


def ended_event(
    client: DuragentClient, session_id: str, event_type: str, call_id: str, kind: type[EndedT]
) -> EndedT | None:
    """The session's newest stored `event_type` event about call `call_id` (the event that
    ends its wait), if any; blocking (the store), so async code runs it in a thread."""
    with client.db.transaction() as db:
        payload = events.latest_for_call(db, session_id, event_type, call_id)
    return None if payload is None else kind.model_validate(payload)
