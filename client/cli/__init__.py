"""The `duragent` command line.

`app` holds the global options; the commands live in modules by what they do, and are
registered here in the order `duragent --help` lists them.
"""

from __future__ import annotations

from collections.abc import Callable

from duragent.client import lifecycle
from duragent.client.cli import (
    agents,
    approvals,
    budgets,
    chat,
    config,
    hosts,
    inputs,
    questions,
    retention,
    runs,
    schedules,
    servers,
    session_files,
    sessions,
    setup,
    tools,
    tree,
    triggers,
)
from duragent.client.cli.app import app

COMMANDS = (
    runs.run,
    chat.chat,
    runs.skill,
    runs.template,
    agents.agents,
    inputs.steer,
    inputs.follow_up,
    inputs.next_turn,
    inputs.send,
    inputs.guide,
    inputs.queue,
    config.configure,
    tools.tools,
    approvals.policy,
    approvals.approvals,
    approvals.approve,
    approvals.deny,
    questions.questions,
    questions.answer,
    budgets.budget,
    budgets.raise_budget,
    sessions.status,
    runs.abort,
    servers.worker,
    servers.dev_server,
    servers.offline_model,
    servers.serve,
    setup.setup_temporal,
    sessions.sessions,
    sessions.show,
    sessions.history,
    tree.tree,
    tree.fork,
    tree.label,
    tree.compact,
    tree.goto,
    session_files.export,
    session_files.import_session,
    hosts.move,
    retention.prune,
)
"""Each is named after its function, underscores as dashes (`follow_up`: `follow-up`),
unless `NAMES` names it (`import` is no name a Python function can have)."""
NAMES: dict[Callable[..., None], str] = {session_files.import_session: "import"}

for _command in COMMANDS:
    app.command(NAMES.get(_command))(_command)
app.add_typer(triggers.app, name="trigger")
app.add_typer(schedules.schedule_app, name="schedule")


def main() -> None:
    lifecycle.exit_after(app)


__all__ = ["app", "main"]
