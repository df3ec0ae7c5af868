"""Routes the web page needs beside /state and the queue: the session list with run status, rename,
the run header's status, steer and follow-up, compaction, and the session tree (go to an
entry, fork from it, label it). Each is a thin call of the Python client.
"""

# No `from __future__ import annotations`: FastAPI must see the local `User` dependency
# in the route signatures as an object, not as a name to look up in this module.
import asyncio
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator

from duragent.api.ownership import LOCAL_USER, owned_session
from duragent.api.tree_view import (
    CompactionMark,
    GuidanceMark,
    TreeView,
    compaction_marks,
    guidance_marks,
    tree_view,
)
from duragent.client.api import DuragentClient
from duragent.client.errors import EntryNotInSession
from duragent.domain.config import ThinkingLevel
from duragent.domain.runs import Phase
from duragent.domain.tree_ops import CompactResult, NavigateResult
from duragent.store.records import RunRecord, SessionRecord

MAX_NAME_CHARS = 200
MAX_LABEL_CHARS = 100


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionSummary(_Body):
    session: SessionRecord
    latest_run: RunRecord | None
    status: str
    """`running` while its latest run is, else `idle`."""


class Rename(_Body):
    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)

    @field_validator("name")
    @classmethod
    def _not_blank(cls, name: str) -> str:
        if not name.strip():
            raise ValueError("a session name needs a character other than white space")
        return name.strip()


class SessionStatusView(_Body):
    """What a run header shows that `/state` does not: the latest config and whether a
    worker is answering for the open run (False: none is; the run waits for one)."""

    session: SessionRecord
    phase: Phase
    model: str
    offline_model: bool
    """This server has neither key nor address for the provider of the session's model:
    the scripted offline model answers (in the model's name), not the model."""
    thinking_level: ThinkingLevel
    worker_answering: bool | None


class QueueText(_Body):
    text: str = Field(min_length=1)
    """Bounded by the client's one size limit, like every text sent to a session."""


class Queued(_Body):
    id: str


class Compact(_Body):
    instructions: str | None = None


class Goto(_Body):
    entry_id: str = Field(min_length=1)
    summarize: bool = False
    """Summarise the branch left behind, for the model to keep."""


class Fork(_Body):
    entry_id: str = Field(min_length=1)
    name: str | None = Field(default=None, max_length=MAX_NAME_CHARS)


class Label(_Body):
    label: str | None = Field(max_length=MAX_LABEL_CHARS)
    """None (or empty) clears the label."""


def page_routes(client: DuragentClient, current_user: Callable[..., str]) -> APIRouter:
    User = Annotated[str, Depends(current_user)]
    router = APIRouter(prefix="/api")

    async def owned(session_id: str, owner: str) -> SessionRecord:
        return await owned_session(client, session_id, owner)

    async def entry_of(session_id: str, entry_id: str) -> None:
        try:
            await client.tree.require_entry(session_id, entry_id)
        except EntryNotInSession as err:
            raise HTTPException(404, str(err)) from err

    async def owned_entry(session_id: str, owner: str, entry_id: str) -> None:
        """The session is the user's and the entry one of it (404 otherwise)."""
        await owned(session_id, owner)
        await entry_of(session_id, entry_id)

    @router.get("/session-summaries")
    async def session_summaries(owner: User) -> list[SessionSummary]:
        """The user's sessions, most recently active first, with their latest run."""
        return [
            SessionSummary(
                session=session,
                latest_run=run,
                status="running" if run is not None and run.status == "running" else "idle",
            )
            for session, run in await client.sessions.summaries(
                owner=owner, unowned=owner == LOCAL_USER
            )
        ]

    @router.patch("/sessions/{session_id}")
    async def rename(session_id: str, body: Rename, owner: User) -> SessionRecord:
        """Rename the session: at once when idle, at the next save point of a run."""
        await owned(session_id, owner)
        await client.sessions.rename(session_id, body.name)
        return await client.sessions.get(session_id)

    @router.get("/sessions/{session_id}/status")
    async def status(session_id: str, owner: User) -> SessionStatusView:
        session = await owned(session_id, owner)
        found = await client.sessions.status(session_id)
        answering: bool | None = True if found.run is not None else None
        if found.run is None and found.phase != "idle":
            answering = await client.sessions.worker_answering(session_id)
        return SessionStatusView(
            session=session,
            phase=found.phase,
            model=found.config.model,
            offline_model=client.settings.offline_for(found.config.model),
            thinking_level=found.config.thinking_level,
            worker_answering=answering,
        )

    @router.post("/sessions/{session_id}/steer")
    async def steer(session_id: str, body: QueueText, owner: User) -> Queued:
        """A message for the open run, after the current turn's tool calls (409 if idle)."""
        await owned(session_id, owner)
        return Queued(id=await client.inputs.steer(session_id, body.text))

    @router.post("/sessions/{session_id}/follow-up")
    async def follow_up(session_id: str, body: QueueText, owner: User) -> Queued:
        """A message for when the open run would otherwise stop (409 if idle)."""
        await owned(session_id, owner)
        return Queued(id=await client.inputs.follow_up(session_id, body.text))

    @router.post("/sessions/{session_id}/compact")
    async def compact(session_id: str, body: Compact, owner: User) -> CompactResult:
        """Compact an idle session now (409 while busy)."""
        await owned(session_id, owner)
        return await client.tree.compact(session_id, instructions=body.instructions)

    @router.get("/sessions/{session_id}/tree")
    async def tree(session_id: str, owner: User) -> TreeView:
        session = await owned(session_id, owner)
        entries = await client.tree.entries(session_id)
        # Every entry of the session is laid out: on a thread, so other requests and
        # event streams go on meanwhile.
        return await asyncio.to_thread(tree_view, entries, session.leaf_id)

    @router.get("/sessions/{session_id}/compactions")
    async def compactions(session_id: str, owner: User) -> list[CompactionMark]:
        """Where the model's context was compacted, for markers in the display history."""
        await owned(session_id, owner)
        return compaction_marks(await client.tree.entries(session_id))

    @router.get("/sessions/{session_id}/guidance")
    async def guidance(session_id: str, owner: User) -> list[GuidanceMark]:
        """Where guidance reached the model, in words and in place in the display history."""
        await owned(session_id, owner)
        return guidance_marks(await client.tree.entries(session_id))

    @router.post("/sessions/{session_id}/goto")
    async def goto(session_id: str, body: Goto, owner: User) -> NavigateResult:
        """Move the leaf to an entry; a user message's text comes back in `edit_text`."""
        await owned_entry(session_id, owner, body.entry_id)
        return await client.tree.navigate(session_id, body.entry_id, summarize=body.summarize)

    @router.post("/sessions/{session_id}/fork", status_code=201)
    async def fork(session_id: str, body: Fork, owner: User) -> SessionRecord:
        """A new session continuing from the entry (its path copied)."""
        await owned_entry(session_id, owner, body.entry_id)
        return await client.sessions.fork(session_id, body.entry_id, name=body.name)

    @router.put("/sessions/{session_id}/labels/{entry_id}", status_code=204)
    async def label(session_id: str, entry_id: str, body: Label, owner: User) -> Response:
        await owned_entry(session_id, owner, entry_id)
        await client.tree.label(session_id, entry_id, (body.label or "").strip() or None)
        return Response(status_code=204)

    return router
