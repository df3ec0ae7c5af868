"""Slash commands: what people do most besides talking to the agent, typed in the box.

Each answers with a note in the conversation (or a refusal naming what was wrong); none
sends anything to the agent.
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from duragent.client.chat.keys import APPROVAL_KEYS, CHIP_KEYS, COMPOSER_KEYS, QUESTION_KEYS
from duragent.domain.budgets import Budget, budget_lines
from duragent.domain.cost import rate_text
from duragent.domain.entries import (
    CompactionEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    SessionEntry,
)
from duragent.domain.messages import AssistantMessage, ToolResultMessage, text_of

if TYPE_CHECKING:
    from duragent.client.chat.app import ChatApp

TREE_LINES = 40
"""Lines `/tree` shows: the newest ones (a long session's tree is thousands of entries)."""
BUDGET_NAMES = {"turns": "max_turns", "tokens": "max_tokens", "cost": "max_cost_usd"}
BUDGET_NAMES |= {"wall": "max_wall_s"}


class SlashError(Exception):
    """A command typed wrong: the message says how to type it."""


@dataclass(frozen=True)
class Command:
    name: str
    usage: str
    what: str
    run: Callable[[ChatApp, list[str]], Awaitable[None]]


async def _help(app: ChatApp, args: list[str]) -> None:
    lines = ["commands:"]
    lines += [f"  {c.usage:<24} {c.what}" for c in COMMANDS.values()]
    lines.append("keys in the box:")
    lines += [f"  {k.shown:<8} {k.what}" for k in COMPOSER_KEYS]
    lines.append("on a queued message (↑ from an empty box, or Shift+Tab):")
    lines += [f"  {k.shown:<8} {k.what}" for k in CHIP_KEYS]
    lines.append("on what waits (^R): approvals and questions")
    lines += [f"  {k.shown:<8} {k.what}" for k in (*APPROVAL_KEYS, *QUESTION_KEYS)]
    lines.append("Leaving (^C ^C) never stops the run: it goes on with the workers.")
    app.say("\n".join(lines))


async def _model(app: ChatApp, args: list[str]) -> None:
    if not args:
        status = await app.link.status(app.session_id)
        app.say(f"model: {status.config.model} (/model NAME sets it from the next turn)")
        return
    await app.link.set_model(app.session_id, args[0])
    app.say(f"model: {args[0]}, from the next turn on")
    app.model = args[0]


async def _compact(app: ChatApp, args: list[str]) -> None:
    app.say("compacting…")
    result = await app.link.compact(app.session_id, " ".join(args) or None)
    if not result.compacted:
        app.say(f"nothing compacted: {result.reason}", "warn")
        return
    spent = f"; the summary {result.cost.text}" if result.cost is not None else ""
    app.say(f"compacted ({result.tokens_before:,} tokens before{spent})", "good")


def _gist(text: str, limit: int = 40) -> str:
    line = " ".join(text[: limit * 4].split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def entry_line(entry: SessionEntry) -> str:
    if isinstance(entry, MessageEntry):
        message = entry.message
        if isinstance(message, AssistantMessage):
            calls = ", ".join(c.name for c in message.tool_calls)
            text = text_of(message.content) or (f"calls {calls}" if calls else "")
            return f"assistant: {_gist(text)}"
        if isinstance(message, ToolResultMessage):
            return f"{message.tool_name} result{' (error)' if message.is_error else ''}"
        return f"{message.role}: {_gist(text_of(message.content))}"
    if isinstance(entry, CompactionEntry):
        return "compaction"
    if isinstance(entry, LeafEntry):
        return f"left for {entry.target_id[:8]}"
    return entry.type


async def _tree(app: ChatApp, args: list[str]) -> None:
    tree = await app.link.tree(app.session_id)
    children: dict[str | None, list[SessionEntry]] = {}
    known = {e.id for e in tree.entries}
    for entry in tree.entries:
        if isinstance(entry, LabelEntry):
            continue
        parent = entry.parent_id if entry.parent_id in known else None
        children.setdefault(parent, []).append(entry)
    lines: list[str] = []
    stack = [(root, 0) for root in reversed(children.get(None, []))]
    while stack:  # depth-first without recursion: a long line of turns is one deep path
        entry, depth = stack.pop()
        line = f"{'  ' * depth}{entry.id[:8]} {entry_line(entry)}"
        if entry.id in tree.labels:
            line += f" [{tree.labels[entry.id]}]"
        if entry.id == tree.leaf_id:
            line += "  <- leaf"
        lines.append(line)
        kids = children.get(entry.id, [])
        deeper = depth + 1 if len(kids) > 1 else depth
        stack.extend((child, deeper) for child in reversed(kids))
    shown = lines[-TREE_LINES:]
    more = (
        f"({len(lines) - len(shown)} earlier entries not shown)\n"
        if len(lines) > len(shown)
        else ""
    )
    app.say(f"{more}" + "\n".join(shown) + "\n/goto ID moves the leaf; /fork ID forks there")


async def _entry(app: ChatApp, prefix: str) -> str:
    tree = await app.link.tree(app.session_id)
    found = [e.id for e in tree.entries if e.id.startswith(prefix)]
    if not found:
        raise SlashError(f"no entry id starts with {prefix!r} (see /tree)")
    if len(found) > 1:
        raise SlashError(f"{len(found)} entries start with {prefix!r}: give more of the id")
    return found[0]


async def _goto(app: ChatApp, args: list[str]) -> None:
    if len(args) != 1:
        raise SlashError("/goto ENTRY (an id from /tree, or its start)")
    moved = await app.link.goto(app.session_id, await _entry(app, args[0]))
    app.say(f"leaf: {(moved.leaf_id or 'the root')[:8]}", "good")
    if moved.edit_text is not None:
        app.set_box(moved.edit_text)
        app.say("your message is back in the box: edit it and send it again")


async def _fork(app: ChatApp, args: list[str]) -> None:
    if len(args) > 1:
        raise SlashError("/fork [ENTRY] (default: the leaf)")
    if args:
        entry = await _entry(app, args[0])
    else:
        leaf = (await app.link.session(app.session_id)).leaf_id
        if leaf is None:
            raise SlashError("the session has no entries to fork from yet")
        entry = leaf
    record = await app.link.fork(app.session_id, entry)
    before = app.session_id
    await app.open_session(record.id)
    app.say(f"forked from session {before} at {entry[:8]}: this is session {record.id}")


async def _cost(app: ChatApp, args: list[str]) -> None:
    costs = await app.link.costs(app.session_id)
    runs = await app.link.runs(app.session_id)
    lines = [
        f"session: {costs.session.text} ({costs.session.usage.total_tokens:,} tokens, "
        f"{rate_text(costs.session.cache_hit_rate)})"
    ]
    for run in runs[:5]:
        cost = costs.of_run(run.run_id)
        lines.append(
            f"  run {run.run_id[:8]} {run.status}: {cost.text} "
            f"({cost.usage.total_tokens:,} tokens, {run.turns} turn(s))"
        )
    app.say("\n".join(lines))


async def _budget(app: ChatApp, args: list[str]) -> None:
    """/budget: show; /budget turns=3 cost=0.5 ask: set (the whole budget); /budget off."""
    if args:
        if args == ["off"]:
            await app.link.set_budget(app.session_id, Budget())
        else:
            fields: dict[str, Any] = {"on_exceed": "stop"}
            for arg in args:
                if arg in ("ask", "stop"):
                    fields["on_exceed"] = arg
                    continue
                name, _, value = arg.partition("=")
                if name not in BUDGET_NAMES or not value:
                    raise SlashError(
                        f"/budget [turns=N] [tokens=N] [cost=USD] [wall=S] [ask|stop] | off "
                        f"(got {arg!r})"
                    )
                try:
                    fields[BUDGET_NAMES[name]] = (
                        float(value) if name in ("cost", "wall") else int(value)
                    )
                except ValueError as err:
                    raise SlashError(f"{name} takes a number (got {value!r})") from err
            await app.link.set_budget(app.session_id, fields)
    app.say("\n".join(budget_lines(await app.link.budget(app.session_id))))


async def _export(app: ChatApp, args: list[str]) -> None:
    path = Path(args[0] if args else f"{app.session_id}.jsonl").expanduser()
    count = await app.link.export(app.session_id, path)
    app.say(f"exported {count} lines to {path} (duragent import {path} makes a session of it)")


async def _stop(app: ChatApp, args: list[str]) -> None:
    app.action_stop()


async def _quit(app: ChatApp, args: list[str]) -> None:
    app.leave()


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("help", "/help", "keys and commands", _help),
        Command("model", "/model [NAME]", "the model; set it from the next turn", _model),
        Command("compact", "/compact [FOCUS]", "summarise older context (idle)", _compact),
        Command("tree", "/tree", "the session's tree of entries", _tree),
        Command("goto", "/goto ENTRY", "move the leaf there (idle)", _goto),
        Command("fork", "/fork [ENTRY]", "a new session from there; opened", _fork),
        Command("cost", "/cost", "what the session and its runs cost", _cost),
        Command("budget", "/budget [LIMITS|off]", "the budget; turns=N cost=USD ask ...", _budget),
        Command("export", "/export [PATH]", "the session as a file", _export),
        Command("stop", "/stop", "stop the run (as Esc)", _stop),
        Command("quit", "/quit", "leave; the run goes on (as ^C ^C)", _quit),
    )
}


def parse(line: str) -> tuple[Command, list[str]]:
    """The command a line names and its arguments; `SlashError` for an unknown one."""
    try:
        words = shlex.split(line[1:])
    except ValueError as err:
        raise SlashError(f"cannot read {line!r}: {err}") from err
    name = words[0].lower() if words else "help"
    command = COMMANDS.get(name)
    if command is None:
        raise SlashError(f"no command /{name}: /help lists them")
    return command, words[1:]
