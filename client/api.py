"""The Python client: create sessions, prompt them, wait, follow their events.

`DuragentClient` is the one class users hold; each of its parts has a module of its own,
changing for one reason: store-only reads (`session_reads`), new sessions and forks
(`new_sessions`), the session's workflow (`session_workflows`), runs (`run_control`),
input and its queue (`inputs`), writes during a run (`session_writes`), compaction and
navigation (`session_tree`), run events (`event_stream`), approval of tool calls
(`approvals`), budgets (`budgets`), and moving a session to another host (`hosts`).
"""

from __future__ import annotations

from duragent.client.approvals import Approvals
from duragent.client.bounds import bounded
from duragent.client.budgets import Budgets
from duragent.client.event_stream import EventStream
from duragent.client.hosts import Hosts
from duragent.client.inputs import Inputs
from duragent.client.new_sessions import NewSessions
from duragent.client.run_control import RunHandle
from duragent.client.session_tree import SessionTree
from duragent.client.session_workflows import SessionStatus

__all__ = ["DuragentClient", "RunHandle", "SessionStatus", "bounded"]


class DuragentClient(Inputs, Approvals, Budgets, SessionTree, NewSessions, EventStream, Hosts):
    """A client of sessions: `DuragentClient(temporal, db, settings)`, or
    `await DuragentClient.connect(settings)`."""
