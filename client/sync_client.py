"""The client's synchronous view (`client.sync`): its store reads and writes, blocking,
for code with no event loop or in a thread of its own (a script, a test's
`eventually(lambda: ...)` predicate, a synchronous command, the client's own store work).

Each part here is the one implementation of that part's store work; the async part
(`client.sessions`, ...) awaits the same method run in a thread (`client.part.in_thread`),
which is what code on an event loop calls. What only asks Temporal (prompting, status,
steering, schedules' timetables) is async alone: it has no place here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from duragent.client.approvals import SyncApprovals
from duragent.client.budgets import SyncBudgets
from duragent.client.display import SyncDisplay
from duragent.client.event_stream import SyncEvents
from duragent.client.inputs import SyncInputs
from duragent.client.questions import SyncQuestions
from duragent.client.run_control import SyncRuns
from duragent.client.schedules import SyncSchedules
from duragent.client.session_files import SyncSessionFiles
from duragent.client.session_tree import SyncTree
from duragent.client.sessions import SyncSessions
from duragent.client.triggers import SyncTriggers

if TYPE_CHECKING:
    from duragent.client.api import DuragentClient


class SyncClient:
    """`client.sync`: the store parts of a `DuragentClient`, each method blocking."""

    def __init__(self, client: DuragentClient) -> None:
        self.sessions = SyncSessions(client)
        self.runs = SyncRuns(client)
        self.inputs = SyncInputs(client)
        self.tree = SyncTree(client)
        self.events = SyncEvents(client)
        self.display = SyncDisplay(client)
        self.approvals = SyncApprovals(client)
        self.questions = SyncQuestions(client)
        self.budgets = SyncBudgets(client)
        self.session_files = SyncSessionFiles(client)
        self.triggers = SyncTriggers(client)
        self.schedules = SyncSchedules(client)
