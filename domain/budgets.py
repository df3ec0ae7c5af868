"""Budgets (docs/SPEC.md, budgets): limits on what a run, or a whole session, may spend.

A budget limits turns, tokens, cost (US dollars) and wall time, each optional. A run may
have one of its own (set when it starts) and a session one for all its runs together (a
session-wide config setting). The loop checks both at its save points, before each model
call: when a limit is reached the run either stops there (`on_exceed="stop"`), with a note
in the transcript saying which limit and what was spent, or waits for a person to raise
the budget (`"ask"`), as a tool call waits for approval.

What counts:
- turns: model calls of the run's loop (a session: of all its runs); a compaction's
  summary is no turn;
- tokens: every token the model calls reported (input, output, cache reads and writes),
  compaction summaries' and sub-agents' included;
- cost: each turn and summary priced by the worker's price table (`domain.cost`),
  sub-agents' included; a turn whose model has no price counts nothing and is named in
  `unpriced_models` (the client refuses a cost limit for a model it cannot price);
- wall time: from the run's start (waiting for a raise included); a session's is the sum
  of its runs'.

A limit is reached once what is spent is at it or beyond: a budget of 3 turns lets three
model calls happen, and the check before the fourth stops the run. The model call that
crosses a token or cost limit finishes (a reply is never cut off), so a run may end a
little beyond one; the check then stops it before it spends more.

Pure: the workflow (workflows/budgets.py) keeps the counts and asks these functions.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

BudgetAction = Literal["stop", "ask"]
Limit = Literal["turns", "tokens", "cost", "wall"]
Scope = Literal["run", "session"]
LIMITS: tuple[Limit, ...] = get_args(Limit)
BUDGET_NOTE = "budget"
"""The custom type of the note a budget stop leaves in the transcript."""


class Budget(BaseModel):
    """Limits, each optional (None: no limit of that kind), and what reaching one does."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_turns: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    max_wall_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    on_exceed: BudgetAction = "stop"
    """`stop`: the run ends at the save point; `ask`: it waits for a person to raise it."""

    @property
    def limited(self) -> bool:
        """Whether any limit is set (a budget without one limits nothing)."""
        return any(self.limit(which) is not None for which in LIMITS)

    def limit(self, which: Limit) -> float | None:
        return {
            "turns": self.max_turns,
            "tokens": self.max_tokens,
            "cost": self.max_cost_usd,
            "wall": self.max_wall_s,
        }[which]

    def describe(self) -> str:
        """`3 turns, 10,000 tokens, $0.50, 60 s; stop` or `no limits`."""
        parts = [
            limit_text(which, value) for which in LIMITS if (value := self.limit(which)) is not None
        ]
        if not parts:
            return "no limits"
        then = "stop" if self.on_exceed == "stop" else "ask to raise"
        return f"{', '.join(parts)}; when reached: {then}"


class Spent(BaseModel):
    """What a run (or a session) has spent, in the units budgets limit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    turns: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0
    unpriced_models: list[str] = Field(default_factory=list)
    """Models of turns the price table has no price for: they counted nothing to cost."""

    def of(self, which: Limit) -> float:
        return {
            "turns": self.turns,
            "tokens": self.tokens,
            "cost": self.cost_usd,
            "wall": self.wall_s,
        }[which]

    def plus(self, other: Spent) -> Spent:
        return Spent(
            turns=self.turns + other.turns,
            tokens=self.tokens + other.tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            wall_s=self.wall_s + other.wall_s,
            unpriced_models=sorted({*self.unpriced_models, *other.unpriced_models}),
        )

    def describe(self) -> str:
        text = ", ".join(limit_text(which, self.of(which)) for which in LIMITS)
        if self.unpriced_models:
            text += f" (no price for {', '.join(self.unpriced_models)}: not counted in cost)"
        return text


class Reached(BaseModel):
    """One limit reached: which budget, which limit, what it allows and what was spent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scope: Scope
    limit: Limit
    allowed: float
    spent: float
    on_exceed: BudgetAction

    @property
    def text(self) -> str:
        """`the run's cost limit ($0.0100) is reached: $0.0123 spent`."""
        whose = "the run's" if self.scope == "run" else "the session's"
        allowed = limit_text(self.limit, self.allowed)
        return (
            f"{whose} {LIMIT_NAMES[self.limit]} limit ({allowed}) is reached: "
            f"{limit_text(self.limit, self.spent)} spent"
        )


LIMIT_NAMES: dict[Limit, str] = {
    "turns": "turn",
    "tokens": "token",
    "cost": "cost",
    "wall": "wall-time",
}


def limit_text(which: Limit, value: float) -> str:
    """A limit's or a spend's value as people read it: `3 turns`, `1,200 tokens`,
    `$0.0123`, `42.5 s`."""
    if which == "turns":
        return f"{int(value)} turn{'s' if int(value) != 1 else ''}"
    if which == "tokens":
        return f"{int(value):,} tokens"
    if which == "cost":
        return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"
    return f"{value:.1f} s"


def reached(budget: Budget | None, spent: Spent, scope: Scope) -> list[Reached]:
    """The limits of `budget` that `spent` is at or beyond, in the order of `LIMITS`."""
    if budget is None:
        return []
    found = []
    for which in LIMITS:
        allowed = budget.limit(which)
        if allowed is not None and spent.of(which) >= allowed:
            found.append(
                Reached(
                    scope=scope,
                    limit=which,
                    allowed=allowed,
                    spent=spent.of(which),
                    on_exceed=budget.on_exceed,
                )
            )
    return found


def stops(found: list[Reached]) -> bool:
    """Whether the run stops (rather than waits): any reached budget says stop."""
    return any(item.on_exceed == "stop" for item in found)


def stop_text(found: list[Reached]) -> str:
    """What the transcript and the run state say of a budget stop; the model reads it as
    the note after the last turn, so a later run knows why the work broke off."""
    what = "; ".join(item.text for item in found)
    return (
        f"Budget reached: {what}. The run stopped here, before its next model call; "
        "the work above may be unfinished. Raise the budget to go on."
    )


def waiting_text(found: list[Reached]) -> str:
    what = "; ".join(item.text for item in found)
    return f"Budget reached: {what}. The run waits for the budget to be raised."


def remaining(budget: Budget | None, spent: Spent) -> Budget | None:
    """What is left of `budget` after `spent` (turns are not passed on: a sub-agent's
    turns are its own). At least a token, a hundredth of a cent and a tenth of a second
    are left, so the result is a valid budget that its holder's first check stops."""
    if budget is None:
        return None

    def left(which: Limit, floor: float) -> float | None:
        allowed = budget.limit(which)
        return None if allowed is None else max(floor, allowed - spent.of(which))

    tokens = left("tokens", 1)
    return Budget(
        max_tokens=None if tokens is None else int(tokens),
        max_cost_usd=left("cost", 0.0001),
        max_wall_s=left("wall", 0.1),
        on_exceed="stop",
    )


def tighter(a: Budget | None, b: Budget | None) -> Budget | None:
    """Each limit the smaller of the two (None: no limit in either)."""
    if a is None or b is None:
        return a or b

    def least(x: float | None, y: float | None) -> float | None:
        return y if x is None else x if y is None else min(x, y)

    tokens = least(a.max_tokens, b.max_tokens)
    turns = least(a.max_turns, b.max_turns)
    return Budget(
        max_turns=None if turns is None else int(turns),
        max_tokens=None if tokens is None else int(tokens),
        max_cost_usd=least(a.max_cost_usd, b.max_cost_usd),
        max_wall_s=least(a.max_wall_s, b.max_wall_s),
        on_exceed="stop" if "stop" in (a.on_exceed, b.on_exceed) else "ask",
    )


class BudgetRaise(BaseModel):
    """A person's raise of a waiting (or any open) run's budget: the `raise_budget` update.

    `budget` replaces the scope's budget whole (limits not given are removed)."""

    model_config = ConfigDict(extra="forbid")

    budget: Budget
    scope: Scope | None = None
    """Which budget: None means the one the run waits on (else the run's own)."""
    by: str | None = Field(default=None, max_length=200)


def raise_refusal(old: Budget | None, new: Budget, spent: Spent, scope: Scope) -> str | None:
    """Why `new` is not a raise of `old` given `spent` (None: it is one). A raise lowers
    no limit (removing one raises it), and leaves no limit reached."""
    whose = "run's" if scope == "run" else "session's"
    for which in LIMITS:
        before, after = (old.limit(which) if old else None), new.limit(which)
        if after is not None and (before is None or after < before):
            was = "none" if before is None else limit_text(which, before)
            return (
                f"a raise must not lower a limit: the {whose} {LIMIT_NAMES[which]} limit "
                f"would go from {was} to {limit_text(which, after)}"
            )
    still = reached(new, spent, scope)
    if still:
        item = still[0]
        return (
            f"a raise must raise the limits reached: the {whose} {LIMIT_NAMES[item.limit]} "
            f"limit of {limit_text(item.limit, item.allowed)} is still reached "
            f"({limit_text(item.limit, item.spent)} spent)"
        )
    return None


class BudgetView(BaseModel):
    """A run's budgets and what it and its session have spent (the `budget` query; the
    client fills it in for an idle session)."""

    model_config = ConfigDict(extra="forbid")

    run_budget: Budget | None = None
    session_budget: Budget | None = None
    run_spent: Spent | None = None
    """None when no run is open."""
    session_spent: Spent | None = None
    """The session's runs together, this one included; None while unknown."""
    waiting: list[Reached] = Field(default_factory=list)
    """The limits the run waits on (phase `awaiting_budget`)."""


class BudgetCarried(BaseModel):
    """What a run's budget keeping carries into its next execution (continue-as-new)."""

    model_config = ConfigDict(extra="forbid")

    run_budget: Budget | None = None
    """The run's budget as raised so far."""
    started_ms: int = 0
    cost_usd: float = 0.0
    unpriced_models: list[str] = Field(default_factory=list)
    session_before: Spent | None = None
    """What the session's other runs had spent, once read."""


SESSION_SPEND = "session_spend"
"""The activity that reads what a session's other runs have spent."""


class SessionSpendInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session_id: str
    run_id: str
    """The asking run: its own spending the workflow counts itself."""


def budget_lines(view: BudgetView) -> list[str]:
    """The budgets and spending as lines for people (`duragent budget`, `status`, the
    chat's `/budget`)."""
    lines = []
    if view.run_budget is not None or view.run_spent is not None:
        run = view.run_budget.describe() if view.run_budget else "no budget"
        lines.append(f"run budget: {run}")
        if view.run_spent is not None:
            lines.append(f"  run spent: {view.run_spent.describe()}")
    session = view.session_budget.describe() if view.session_budget else "none"
    lines.append(f"session budget: {session}")
    if view.session_spent is not None:
        lines.append(f"  session spent: {view.session_spent.describe()}")
    lines += [f"  waiting: {item.text}" for item in view.waiting]
    return lines
