"""Approval of tool calls (docs/SPEC.md, tool approval): a session's policy and its verdicts.

A policy is an ordered list of rules and a default action. Each rule names tools by a
glob on the tool's name and, optionally, bash commands by a glob on the whole command;
the first rule that matches a call decides it, and a call no rule matches gets the
default. `allow` runs the call, `deny` answers it with an error naming the rule, `ask`
makes it wait in the workflow until a person approves or denies it.

Command patterns are `fnmatch` globs matched against the whole command (leading and
trailing blanks ignored): `*` matches any run of characters, spaces and slashes included,
so `ls *` matches `ls -la src` (but not a bare `ls`: the space is part of the pattern);
`?` matches one character; `[abc]` one of a set. There is no shell parsing, so an allow
pattern could be fooled by a command that chains another one (`ls *` would match
`ls x; rm -rf /`). Hence a command that contains any shell control operator
(`;`, `&`, `|`, a backtick, `$(`, `<`, `>`, a newline) never matches an `allow` rule: it
falls to the next rule or the default, whatever is quoted. `ask` and `deny` rules match it
as written.
"""

from __future__ import annotations

import glob
import re
from fnmatch import fnmatchcase
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Action = Literal["allow", "ask", "deny"]
ACTIONS: tuple[Action, ...] = ("allow", "ask", "deny")
Verdict = Literal["allow", "ask"]
"""What the loop needs on a call: run it, or wait for a decision (a deny is a refusal)."""
DecisionKind = Literal["approve", "deny", "always"]
DECISIONS: tuple[DecisionKind, ...] = ("approve", "deny", "always")

COMMAND_TOOL = "bash"
"""The tool whose `command` argument rules with a command pattern match."""
MAX_RULES = 200
MAX_PATTERN_CHARS = 1000
MAX_REASON_CHARS = 2000
_CONTROL = re.compile(r"[;&|`<>\n\r]|\$\(")


class ApprovalRule(BaseModel):
    """`tool` is a glob on the tool name; `command`, if given, a glob on a bash command
    (the rule then applies to bash calls only)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str = Field(min_length=1, max_length=MAX_PATTERN_CHARS)
    command: str | None = Field(default=None, min_length=1, max_length=MAX_PATTERN_CHARS)
    action: Action

    @field_validator("tool", "command")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("a pattern must not be blank")
        return value

    def describe(self) -> str:
        """How a person would write the rule, e.g. `bash "git *" -> allow`."""
        command = f" {self.command!r}" if self.command is not None else ""
        return f"{self.tool}{command} -> {self.action}"

    def matches(self, tool: str, command: str | None) -> bool:
        if not fnmatchcase(tool, self.tool):
            return False
        if self.command is None:
            return True
        if command is None:  # a command pattern says nothing of other tools
            return False
        if self.action == "allow" and has_control_operator(command):
            return False
        return fnmatchcase(command.strip(), self.command.strip())


class ApprovalPolicy(BaseModel):
    """Rules in order (the first match decides), the default for calls none matches, and
    how long a call may wait for a decision (None: as long as it takes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: tuple[ApprovalRule, ...] = Field(default=(), max_length=MAX_RULES)
    default: Action = "allow"
    timeout_s: float | None = Field(default=None, gt=0)

    def action_for(self, tool: str, arguments: dict[str, Any]) -> tuple[Action, str]:
        """The action for a call, and what decided it (a rule, or the default)."""
        command = command_of(tool, arguments)
        for rule in self.rules:
            if rule.matches(tool, command):
                return rule.action, f"rule {rule.describe()}"
        return self.default, f"the default ({self.default})"

    def with_allowed(self, tool: str, command: str | None) -> ApprovalPolicy:
        """The policy with an allow rule for exactly this call put first ("always")."""
        exact = None if command is None else glob.escape(command.strip())
        rule = ApprovalRule(tool=glob.escape(tool), command=exact, action="allow")
        rules = (rule, *(r for r in self.rules if r != rule))[:MAX_RULES]
        return self.model_copy(update={"rules": rules})


def command_of(tool: str, arguments: dict[str, Any]) -> str | None:
    """The bash command of a call; None for other tools (or a call without one)."""
    command = arguments.get("command") if tool == COMMAND_TOOL else None
    return command if isinstance(command, str) else None


def has_control_operator(command: str) -> bool:
    """Whether a command chains, pipes, substitutes or redirects (see the module doc)."""
    return _CONTROL.search(command) is not None


def denied_text(reason: str) -> str:
    """The error result the model reads for a call the policy denies."""
    return f"The approval policy denies this call ({reason}), so it was not run."


def refusal_by_person(reason: str | None) -> str:
    """The error result the model reads for a call a person denied."""
    text = "The user denied this tool call, so it was not run."
    return f"{text} Reason: {reason}" if reason else text


def already_decided_text(call_id: str, decision: str, by: str | None) -> str:
    """Why a decision on a call decided before is refused: the run's gate says it while
    the run is open, the client from the stored record once the run is over."""
    who = f" by {by}" if by else ""
    return f"tool call {call_id!r} was already decided ({decision}{who}); nothing changed"


def timed_out_text(timeout_s: float) -> str:
    return (
        f"Not run: no one approved this call within {timeout_s:g} s "
        "(the approval policy's timeout), so it was denied."
    )


def parse_rule(text: str) -> ApprovalRule:
    """A rule as the command line writes it: `ACTION:TOOL` or `ACTION:TOOL:COMMAND`
    (`allow:bash:git status`, `ask:*`); `ValueError` naming what is wrong."""
    action, sep, rest = text.partition(":")
    if not sep:
        raise ValueError(f"rule {text!r} must be ACTION:TOOL or ACTION:TOOL:COMMAND")
    if action not in ACTIONS:
        raise ValueError(
            f"rule {text!r}: the action must be one of {', '.join(ACTIONS)} (got {action!r})"
        )
    tool, sep, command = rest.partition(":")
    if not tool.strip():
        raise ValueError(f"rule {text!r}: the tool pattern is empty")
    if sep and not command.strip():
        raise ValueError(f"rule {text!r}: the command pattern is empty")
    return ApprovalRule(tool=tool.strip(), command=command if sep else None, action=action)


class ApprovalAsk(BaseModel):
    """On a tool call the policy asks about: what asked, and what "always" would allow."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rule: str
    """The rule that asked (or the default), as `ApprovalRule.describe` writes it."""
    command: str | None = None
    """The bash command, for the exact allow rule an "always" decision adds."""
    timeout_s: float | None = None
    """The policy's approval timeout (None: wait as long as it takes)."""


def verdict(
    policy: ApprovalPolicy | None, tool: str, arguments: dict[str, Any]
) -> tuple[ApprovalAsk | None, str | None]:
    """What the policy says of a call: (ask, refusal). Both None: the call may run."""
    if policy is None:
        return None, None
    action, decided_by = policy.action_for(tool, arguments)
    if action == "deny":
        return None, denied_text(decided_by)
    if action == "ask":
        command = command_of(tool, arguments)
        return ApprovalAsk(rule=decided_by, command=command, timeout_s=policy.timeout_s), None
    return None, None


class ApprovalDecision(BaseModel):
    """A person's decision on one waiting call (the `decide_approval` update)."""

    model_config = ConfigDict(extra="forbid")

    call_id: str = Field(min_length=1, max_length=200)
    decision: DecisionKind
    reason: str | None = Field(default=None, max_length=MAX_REASON_CHARS)
    by: str | None = Field(default=None, max_length=200)
    """Who decided (an API user), for the record."""


class PendingApproval(BaseModel):
    """A call waiting for a decision, as clients list it."""

    model_config = ConfigDict(extra="forbid")

    call_id: str
    tool_name: str
    args_preview: str
    turn: int
    assistant_entry_id: str
    """The staged assistant message that holds the call's full arguments."""
    requested_at: int
    """Milliseconds since the epoch."""
    rule: str
    """What asked for approval (a rule, or the default)."""
    timeout_s: float | None = None
    arguments: dict[str, Any] | None = None
    """The full arguments, when a client read them from the store (not in the workflow)."""


class ApprovalOutcome(BaseModel):
    """What the update answers when a decision is taken."""

    model_config = ConfigDict(extra="forbid")

    call_id: str
    decision: DecisionKind
    also_approved: list[str] = Field(default_factory=list)
    """Other waiting calls an "always" decision let through."""
