"""The Python client: create sessions, prompt them, wait, follow their events.

`DuragentClient` is the one class users hold: the core (the Temporal client, the store,
the settings, the prices, the plugins) with one part per job, each in a module of its
own:

    client.sessions   create, fork, get, list, status          (`client.sessions`)
    client.runs       prompt, skill, template; wait, abort      (`client.run_control`)
    client.inputs     steer, follow up, next turn, guidance     (`client.inputs`)
    client.config     model, tools, system prompt, ...          (`client.session_config`)
    client.tree       entries, path, labels; compact, navigate  (`client.session_tree`)
    client.events     run events after a cursor, followed       (`client.event_stream`)
    client.display    a chat view's messages and pages          (`client.display`)
    client.approvals  approval policy, waiting calls, decisions (`client.approvals`)
    client.questions  `ask_user` questions that wait, answers  (`client.questions`)
    client.budgets    budgets, spending, raises                 (`client.budgets`)
    client.hosts      moving a session to another host          (`client.hosts`)
    client.session_files  export a session as a file, import one  (`client.session_files`)
    client.triggers   webhooks made into prompts, their secrets (`client.triggers`)
    client.schedules  prompts on a timetable: add, list, pause, resume, trigger, delete
                                                                (`client.schedules`)

Every method of a part that does I/O (the store or Temporal) is `async def`, and the
store is read and written in a worker thread, never on the event loop. `client.sync`
(`client.sync_client`) holds the store reads and writes, blocking, for code with no
event loop or in a thread: `client.sync.sessions.get(id)`, `client.sync.tree.path(id)`.

Two parts serve the others: `client.workflows` starts and asks a session's workflow
(`client.session_workflows`), and `client.writes` carries config changes and entries to
it (`client.session_writes`). A part reaches another through the client it was given.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, Self

from temporalio.client import Client

from duragent.activities.mcp.config import load_config
from duragent.activities.mcp.names import KnownToolNames
from duragent.activities.prices import price_table
from duragent.activities.tools import default_tool_names
from duragent.client.approvals import Approvals
from duragent.client.bounds import bounded
from duragent.client.budgets import Budgets
from duragent.client.connection import connect_temporal, open_store
from duragent.client.display import Display
from duragent.client.errors import TemporalUnreachable
from duragent.client.event_stream import EventStream
from duragent.client.hosts import Hosts
from duragent.client.inputs import Inputs
from duragent.client.plugins import Plugin, Plugins, load_plugins
from duragent.client.questions import Questions
from duragent.client.run_control import RunHandle, Runs
from duragent.client.schedules import Schedules
from duragent.client.session_config import SessionConfigs
from duragent.client.session_files import SessionFiles
from duragent.client.session_tree import SessionTree
from duragent.client.session_workflows import SessionWorkflows
from duragent.client.session_writes import SessionWrites
from duragent.client.sessions import Sessions, SessionStatus
from duragent.client.sync_client import SyncClient
from duragent.client.triggers import Triggers
from duragent.client.usage_tally import UsageTally
from duragent.domain.prices import PriceTable
from duragent.settings import Settings
from duragent.store.db import Database

if TYPE_CHECKING:
    from duragent.client.agent import Agent

__all__ = ["DuragentClient", "RunHandle", "SessionStatus", "bounded"]


class DuragentClient:
    """A client of sessions: `DuragentClient(temporal, db, settings)`, or
    `await DuragentClient.connect(settings)`; its parts do the work (see the module)."""

    def __init__(
        self,
        temporal: Client,
        db: Database,
        settings: Settings,
        *,
        tool_names: Sequence[str] | None = None,
        plugins: Sequence[Plugin | Agent[Any, Any]] = (),
    ) -> None:
        self.temporal = temporal
        self.db = db
        self.settings = settings
        self._tool_names = list(tool_names) if tool_names is not None else None
        self._extra_plugins = list(plugins)
        self.prices: PriceTable = price_table(settings.prices_file)
        """What the client prices usage with (`client.prices`)."""
        self.usage_tally = UsageTally()
        """Sessions' usage per run and model, read incrementally (`client.usage_tally`)."""
        self.sync = SyncClient(self)
        """The store reads and writes, blocking (`client.sync_client`): for code with no
        event loop or in a thread. On an event loop, await the parts' methods instead."""
        # The parts: each reaches the others through this client.
        sync = self.sync
        self.sessions = Sessions(self, sync.sessions)
        self.runs = Runs(self, sync.runs)
        self.inputs = Inputs(self, sync.inputs)
        self.config = SessionConfigs(self)
        self.tree = SessionTree(self, sync.tree)
        self.events = EventStream(self, sync.events)
        self.display = Display(self, sync.display)
        self.approvals = Approvals(self, sync.approvals)
        self.questions = Questions(self, sync.questions)
        self.budgets = Budgets(self, sync.budgets)
        self.hosts = Hosts(self)
        self.session_files = SessionFiles(self, sync.session_files)
        self.triggers = Triggers(self, sync.triggers)
        self.schedules = Schedules(self, sync.schedules)
        self.workflows = SessionWorkflows(self)
        self.writes = SessionWrites(self)

    @cached_property
    def plugins(self) -> Plugins:
        """The plugins the settings load (the workers' too: `client.plugins`) and those
        given, loaded on first use. Raises `PluginError` for one that cannot be loaded."""
        return load_plugins(self.settings, self._extra_plugins)

    @property
    def tool_names(self) -> list[str]:
        """The tools a session's active tools may name: the workers' built-in ones and
        the plugins' tools, unless the workers register others (`build_worker(tools=...)`):
        then pass those. The MCP servers' tools come on top (`known_tools`)."""
        if self._tool_names is None:
            self._tool_names = [*default_tool_names(), *self.plugins.tool_names()]
        return self._tool_names

    def mcp_servers(self) -> list[str]:
        """The MCP servers in the config file `settings.mcp_config` names (the workers'
        file: give clients the same) and the plugins'. Raises `McpConfigError` for a bad
        file, `PluginError` for a bad plugin."""
        file = load_config(self.settings.mcp_config) if self.settings.mcp_config else None
        return list(self.plugins.mcp_config(file).servers)

    def known_tools(self) -> KnownToolNames:
        """What a session's active tools may name: `tool_names`, and `<server>__<tool>`
        for each MCP server (their tools are listed at run time, by the workers)."""
        return KnownToolNames(self.tool_names, self.mcp_servers())

    @classmethod
    async def connect(
        cls, settings: Settings, *, plugins: Sequence[Plugin | Agent[Any, Any]] = ()
    ) -> Self:
        try:
            temporal = await connect_temporal(settings)
        except RuntimeError as err:
            raise TemporalUnreachable(settings.temporal_address, str(err)) from err
        return cls(temporal, open_store(settings), settings, plugins=plugins)
