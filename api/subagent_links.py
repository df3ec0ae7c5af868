"""The links between a session and its sub-agents, as the page follows them both ways:
from a `delegate` call's card to the session that answers it, and back to the parent."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from duragent.client.api import DuragentClient
from duragent.store.records import SessionRecord


class SessionLink(BaseModel):
    """A sub-agent link: the other session, and the parent's run and call it belongs to."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    name: str | None
    run_id: str | None
    """The parent session's run whose call made the sub-agent."""
    tool_call_id: str
    """The parent's `delegate` call the sub-agent answers."""


class SessionLinks(BaseModel):
    model_config = ConfigDict(extra="forbid")

    parent: SessionLink | None = None
    """The session whose call made this one (None: not a sub-agent)."""
    children: list[SessionLink] = []
    """The sub-agents this session's calls made, oldest first."""


def _link(other: SessionRecord, child: SessionRecord) -> SessionLink:
    assert child.parent_tool_call_id is not None
    return SessionLink(
        session_id=other.id,
        name=other.name,
        run_id=child.parent_run_id,
        tool_call_id=child.parent_tool_call_id,
    )


async def session_links(client: DuragentClient, session: SessionRecord) -> SessionLinks:
    """The session's parent and children. A sub-agent has its parent's owner, so whoever
    may read one may read the other."""
    parent = await client.sessions.parent(session.id)
    return SessionLinks(
        parent=_link(parent, session) if parent is not None else None,
        children=[_link(child, child) for child in await client.sessions.children(session.id)],
    )
