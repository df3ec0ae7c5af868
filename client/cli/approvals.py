"""Approval of tool calls: a session's policy, the calls that wait, the decisions."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.text import Text

from duragent.client.api import DuragentClient
from duragent.client.bounds import one_line
from duragent.client.cli import command
from duragent.client.cli.command import SessionArg, fail, require_session, store_client
from duragent.client.cli.views import announce, say
from duragent.client.cli.waits import list_waiting, send_word
from duragent.client.services import local_services
from duragent.domain.approvals import (
    ACTIONS,
    ApprovalOutcome,
    ApprovalPolicy,
    ApprovalRule,
    PendingApproval,
    parse_rule,
)
from duragent.settings import Settings

CallArg = Annotated[str, typer.Argument(help="A waiting tool call's id (duragent approvals).")]


def policy(
    ctx: typer.Context,
    session: SessionArg,
    rule: Annotated[
        list[str] | None,
        typer.Option(
            "--rule",
            help="ACTION:TOOL or ACTION:TOOL:COMMAND, in order (the first match decides); "
            "ACTION is allow, ask or deny; TOOL and COMMAND are globs "
            "(e.g. allow:bash:git status, allow:bash:ls *, ask:*).",
        ),
    ] = None,
    default: Annotated[
        str | None, typer.Option(help="Action for calls no rule matches (default: allow).")
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(help="Seconds a call may wait before it is denied (default: no limit)."),
    ] = None,
) -> None:
    """Show the session's approval policy, or set it (any option given: the whole policy).

    A bash command with a shell control operator (; & | ` $( < > or a newline) never
    matches an allow rule. A running run uses a new policy from its next turn.
    """
    settings: Settings = ctx.obj
    store = store_client(settings)
    require_session(store, session)
    new: ApprovalPolicy | None = None
    if rule is not None or default is not None or timeout is not None:
        if default is not None and default not in ACTIONS:
            fail(f"--default must be one of {', '.join(ACTIONS)} (got {default!r})")
        try:
            rules = tuple(parse_rule(text) for text in rule or [])
        except ValueError as error:
            fail(f"--rule: {error}")
        fields: dict[str, object] = {"rules": rules, "timeout_s": timeout}
        if default is not None:
            fields["default"] = default
        try:
            new = ApprovalPolicy.model_validate(fields)
        except ValidationError as error:
            fail(f"policy: {one_line(error)}")

    async def main() -> None:
        async with local_services(settings, announce, worker=False) as ready:
            client = await DuragentClient.connect(ready)
            if new is not None:
                await client.approvals.set_policy(session, new)
            shown = await client.approvals.policy(session)
            for line in policy_lines(shown):
                say(Text(line))

    command.run(main())


def approvals(ctx: typer.Context, session: SessionArg) -> None:
    """List the tool calls of the session's run that wait for a decision."""
    list_waiting(
        ctx.obj,
        lambda client: client.approvals.pending(session),
        none="no tool call waits for approval",
        lines=lambda item: [
            pending_line(item),
            f"  approve: duragent approve {session} {item.call_id}",
        ],
    )


def approve(
    ctx: typer.Context,
    session: SessionArg,
    call: CallArg,
    always: Annotated[
        bool,
        typer.Option(
            help="Also allow this tool (for bash: this exact command) for the rest of the session."
        ),
    ] = False,
) -> None:
    """Let a waiting tool call run. Needs a worker answering for the run."""
    send_word(ctx.obj, lambda c: c.approvals.approve(session, call, always=always), decided_line)


def deny(
    ctx: typer.Context,
    session: SessionArg,
    call: CallArg,
    reason: Annotated[
        str | None, typer.Option(help="Why: the model reads it as the call's error result.")
    ] = None,
) -> None:
    """Refuse a waiting tool call: it does not run, and the model reads why."""
    send_word(ctx.obj, lambda c: c.approvals.deny(session, call, reason), decided_line)


def decided_line(outcome: ApprovalOutcome) -> str:
    """What a decision the run took did, e.g. `approved always: call_1 (and call_2)`."""
    done = {"approve": "approved", "always": "approved always", "deny": "denied"}
    also = f" (and {', '.join(outcome.also_approved)})" if outcome.also_approved else ""
    return f"{done[outcome.decision]}: {outcome.call_id}{also}"


def policy_lines(policy: ApprovalPolicy | None) -> list[str]:
    if policy is None:
        return ["no approval policy: every tool call runs"]
    lines = [f"{i}. {rule_text(rule)}" for i, rule in enumerate(policy.rules, 1)]
    timeout = f"{policy.timeout_s:g} s" if policy.timeout_s else "none"
    return [*lines, f"default: {policy.default}; timeout: {timeout}"]


def rule_text(rule: ApprovalRule) -> str:
    """A rule as `--rule` takes it."""
    return ":".join([rule.action, rule.tool, *([rule.command] if rule.command else [])])


def pending_line(item: PendingApproval) -> str:
    arguments = (
        json.dumps(item.arguments, ensure_ascii=False) if item.arguments else item.args_preview
    )
    return f"{item.call_id}  {item.tool_name} {arguments}  (turn {item.turn}, {item.rule})"
