"""Budgets: what a session's runs may spend, what they spent, and raising a waiting run's."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from duragent.client.api import DuragentClient
from duragent.client.cli import command
from duragent.client.cli.command import SessionArg, fail, require_session, store_client
from duragent.client.cli.views import announce, say
from duragent.client.services import local_services
from duragent.domain.budgets import Budget, Scope, budget_lines
from duragent.settings import Settings

# No `min=` here: a limit of 0 is refused by `check_limits`, on one line that says how to
# have no such limit (0 never means "unlimited": that would be a trap).
Turns = Annotated[int | None, typer.Option(help="Turn limit (model calls), 1 or more.")]
Tokens = Annotated[
    int | None, typer.Option(help="Token limit (all tokens the model reported), 1 or more.")
]
Cost = Annotated[float | None, typer.Option(help="Cost limit in US dollars, above 0.")]
Wall = Annotated[float | None, typer.Option(help="Wall-time limit in seconds, above 0.")]

KINDS = {"turns": "turn", "tokens": "token", "cost": "cost", "wall": "wall-time"}
SET_HOW = "for no {kind} limit, leave {option} out (the limits given are the whole budget)"
"""How `duragent budget` sets a budget without a limit of a kind."""


def budget(
    ctx: typer.Context,
    session: SessionArg,
    turns: Turns = None,
    tokens: Tokens = None,
    cost: Cost = None,
    wall: Wall = None,
    ask: Annotated[
        bool | None,
        typer.Option(
            "--ask/--stop",
            help="When a limit is reached: wait for a person to raise it, or stop the run "
            "(default: stop).",
        ),
    ] = None,
    clear: Annotated[bool, typer.Option(help="Remove the session's budget.")] = False,
) -> None:
    """Show what the session's runs may spend together and what they spent, or set it
    (any limit given: the whole budget). A running run checks it from its next save point."""
    settings: Settings = ctx.obj
    given = {"--turns": turns, "--tokens": tokens, "--cost": cost, "--wall": wall}
    check_limits(given, SET_HOW)
    require_session(store_client(settings), session)
    new: Budget | None = None
    if clear:
        new = Budget()
    elif any(v is not None for v in (turns, tokens, cost, wall, ask)):
        new = budget_of(turns, tokens, cost, wall, "ask" if ask else "stop")

    async def main() -> None:
        async with local_services(settings, announce, worker=False) as ready:
            client = await DuragentClient.connect(ready)
            if new is not None:
                await client.budgets.set(session, new)
            for line in budget_lines(await client.budgets.get(session)):
                say(Text(line))

    command.run(main())


def raise_budget(
    ctx: typer.Context,
    session: SessionArg,
    turns: Turns = None,
    tokens: Tokens = None,
    cost: Cost = None,
    wall: Wall = None,
    scope: Annotated[
        str | None,
        typer.Option(help="run or session (default: the budget the run waits on)."),
    ] = None,
) -> None:
    """Raise the open run's budget (the limits given; the others stay as they are); a run
    waiting on its budget goes on. Needs a worker answering for the run."""
    settings: Settings = ctx.obj
    if scope is not None and scope not in ("run", "session"):
        fail(f"--scope must be run or session (got {scope!r})")
    if all(v is None for v in (turns, tokens, cost, wall)):
        fail("give the limits to raise: --turns, --tokens, --cost or --wall")
    given = {"--turns": turns, "--tokens": tokens, "--cost": cost, "--wall": wall}
    check_limits(
        given, "a raise gives a higher limit (leave {option} out to keep the {kind} limit)"
    )

    async def main() -> None:
        async with local_services(settings, announce, worker=False) as ready:
            client = await DuragentClient.connect(ready)
            view = await client.budgets.get(session)
            which: Scope = "session" if scope == "session" else "run"
            if scope is None and view.waiting:
                which = view.waiting[0].scope
            old = view.run_budget if which == "run" else view.session_budget
            given: dict[str, float | None] = {"max_turns": turns, "max_tokens": tokens}
            given |= {"max_cost_usd": cost, "max_wall_s": wall}
            fields: dict[str, Any] = (old or Budget()).model_dump()
            fields |= {name: value for name, value in given.items() if value is not None}
            raised = await client.budgets.raise_limits(session, fields, scope=which)
            for line in budget_lines(raised):
                say(Text(line))

    command.run(main())


def check_limits(given: dict[str, float | None], how: str) -> None:
    """Refuse a limit of 0 or less by its option's name (the API refuses such limits too),
    then `how`, formatted with the option and the limit's kind (`cost`), says what to do
    instead."""
    for option, value in given.items():
        if value is None or value > 0:
            continue
        rule = "1 or more" if isinstance(value, int) else "above 0"
        shown = value if isinstance(value, int) else f"{value:g}"
        kind = KINDS[option.removeprefix("--").removeprefix("max-")]
        fail(f"{option} must be {rule} (got {shown}); {how.format(option=option, kind=kind)}")


def budget_of(
    turns: int | None, tokens: int | None, cost: float | None, wall: float | None, on: str
) -> Budget:
    """The budget of the limits given (each checked by `check_limits` first)."""
    try:
        return Budget.model_validate(
            {
                "max_turns": turns,
                "max_tokens": tokens,
                "max_cost_usd": cost,
                "max_wall_s": wall,
                "on_exceed": on,
            }
        )
    except ValueError as error:
        fail(f"budget: {error}")
