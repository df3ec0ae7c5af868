"""The chat's widgets: the header, the conversation and its blocks (messages, tool calls
with their output's tail, notes, the cards of what waits for a person, sub-agents as
nested collapsible conversations), the queued messages' chips, the message box and the
footer of keys.

Colours are the theme's (`$success`, `$warning`, `$text-muted`, ...), so a light theme
reads as well as a dark one. Model and tool output is shown as plain text: nothing in it
is markup.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, Collapsible, Input, Static, TextArea

from duragent.client.chat.feed import SessionFeed
from duragent.client.chat.link import Link
from duragent.client.chat.transcript import (
    ApprovalCard,
    Block,
    BudgetCard,
    Note,
    QuestionCard,
    Said,
    SubAgentCard,
    ToolCard,
    Waiting,
)
from duragent.client.errors import DuragentError
from duragent.domain.budgets import Limit, Scope

PHASE_WORDS = {
    "idle": "idle",
    "turn": "working",
    "retry": "retrying the model call",
    "compaction": "compacting",
    "branch_summary": "summarising a branch",
    "awaiting_approval": "waiting for approval",
    "awaiting_input": "waiting for your answer",
    "awaiting_host": "waiting for its machine",
    "awaiting_budget": "waiting for a budget raise",
}
"""Phases as the header says them (the page says the same)."""

TOOL_MARKS = {
    "planned": ("·", "$text-muted"),
    "running": ("⋯", "$warning"),
    "waiting": ("?", "$warning"),
    "done": ("✓", "$success"),
    "error": ("✗", "$error"),
    "interrupted": ("↪", "$warning"),
    "aborted": ("■", "$error"),
    "skipped": ("↷", "$text-muted"),
}
TONES = {"muted": "$text-muted", "good": "$success", "warn": "$warning", "bad": "$error"}


def short_id(session_id: str) -> str:
    return session_id[:8]


def tokens_of(usage: Any) -> int:
    return int(getattr(usage, "total_tokens", 0) or 0)


def header_content(feed: SessionFeed, name: str, model: str, offline: bool) -> Content:
    """`name · working · turn 2 · 1,234 tokens · $0.0012 (session $0.0100) · model`"""
    phase = PHASE_WORDS.get(feed.phase, feed.phase)
    parts: list[tuple[str, str] | str] = [(f" {name} ", "bold"), ("· ", "$text-muted")]
    parts.append((phase, "bold $warning" if feed.busy else "$success"))
    run = feed.latest_run
    if feed.turn:
        parts.append(f" · turn {feed.turn}")
    if run is not None:
        parts.append(f" · {tokens_of(run.usage):,} tokens")
    if feed.costs is not None:
        if run is not None:
            parts.append(f" · {feed.costs.of_run(run.run_id).text}")
        parts.append((f" (session {feed.costs.session.text})", "$text-muted"))
    parts.append((f" · {'offline model' if offline else model}", "$text-muted"))
    if feed.error:
        parts.append((f" · {feed.error}", "$error"))
    return Content.assemble(*parts)


class HeaderBar(Static):
    """Phase, turn, tokens and cost of the latest run, the session's cost, the model."""


# The conversation's blocks -------------------------------------------------------------


class BlockView:
    """A widget that shows one block; `show` redraws it from the block."""

    block: Block

    def show(self, block: Block) -> None:
        raise NotImplementedError


class SaidView(Static, BlockView):
    def __init__(self, block: Said) -> None:
        super().__init__(classes=f"said {block.who}")
        self.block = block
        self.show(block)

    def show(self, block: Block) -> None:
        assert isinstance(block, Said)
        who = ("you ", "bold $success") if block.who == "you" else ("assistant ", "bold $accent")
        parts: list[tuple[str, str] | str] = [who, block.text]
        if block.streaming:
            parts.append(("▍", "$accent"))
        if block.error:
            parts.append((f"\nmodel error: {block.error}", "$error"))
        # A reply of tool calls alone: its cards below say it all.
        self.display = bool(block.text or block.streaming or block.error)
        self.update(Content.assemble(*parts))


class ToolView(Static, BlockView):
    def __init__(self, block: ToolCard) -> None:
        super().__init__(classes="tool")
        self.block = block
        self.show(block)

    def show(self, block: Block) -> None:
        assert isinstance(block, ToolCard)
        mark, style = TOOL_MARKS[block.state]
        took = f" ({block.duration_ms} ms)" if block.duration_ms is not None else ""
        parts: list[tuple[str, str] | str] = [
            (f"  {mark} ", style),
            (block.name, "bold"),
            (took, "$text-muted"),
            f" {block.args}" if block.args else "",
        ]
        if block.state == "running":
            for line in block.latest():
                parts.append((f"\n    │ {line}", "$text-muted"))
        elif block.result:
            parts.append((f"\n    {block.result}", "$text-muted"))
        if block.state in ("interrupted", "aborted", "skipped"):
            parts.append((f"  [{block.state}]", style))
        self.update(Content.assemble(*parts))


class NoteView(Static, BlockView):
    def __init__(self, block: Note) -> None:
        super().__init__(classes="note")
        self.block = block
        self.show(block)

    def show(self, block: Block) -> None:
        assert isinstance(block, Note)
        self.update(Content.assemble((f"  {block.text}", TONES[block.tone])))


Act = Callable[[Callable[[], Awaitable[Any]]], None]
"""Runs what a card does (a call of the link) off the screen's way, showing a refusal."""


class WaitingView(Vertical, BlockView):
    """A card that waits for a person; once decided (here or anywhere) one line says how."""

    can_focus = False
    block: Waiting

    def __init__(self, block: Waiting, link: Link, session_id: str) -> None:
        super().__init__(classes="waiting")
        self.block = block
        self.link = link
        self.session_id = session_id
        self._settled = False

    def compose(self) -> ComposeResult:
        yield Static(self.head(), classes="card-head")
        yield from self.controls()
        yield Static("", classes="card-error")

    def head(self) -> Content:
        raise NotImplementedError

    def controls(self) -> ComposeResult:
        yield from ()

    def first_control(self) -> Widget | None:
        found = [w for w in self.query("Button, Input") if w.display]
        return found[0] if found else None

    def show(self, block: Block) -> None:
        assert isinstance(block, Waiting)
        self.block = block
        if not block.waiting and not self._settled:
            self._settled = True
            self.remove_children()
            self.mount(Static(self.settled(), classes="card-head"))
            self.remove_class("waiting")
            return
        if self._settled:
            return
        for error in self.query(".card-error").results(Static):
            error.update(Content.assemble((block.error, "$error")) if block.error else "")

    def settled(self) -> Content:
        raise NotImplementedError

    def act(self, work: Callable[[], Awaitable[Any]]) -> None:
        async def attempt() -> None:
            try:
                await work()
            except DuragentError as error:
                self.block.error = str(error)
                self.show(self.block)

        self.run_worker(attempt(), exit_on_error=False)


class ApprovalView(WaitingView):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "approve", "approve", show=False),
        Binding("a", "always", "always", show=False),
        Binding("n", "deny", "deny", show=False),
    ]

    def head(self) -> Content:
        block = self.block
        assert isinstance(block, ApprovalCard)
        return Content.assemble(
            ("  ? ", "bold $warning"),
            (block.tool, "bold"),
            (" waits for your approval", "bold $warning"),
            (f" (asked by {block.rule})" if block.rule else "", "$text-muted"),
            f"\n    {block.args}",
        )

    def controls(self) -> ComposeResult:
        with Horizontal(classes="card-actions"):
            yield Button("y approve", id="approve", compact=True, variant="success")
            yield Button("a always", id="always", compact=True)
            yield Button("n deny", id="deny", compact=True, variant="error")
        reason = Input(placeholder="why not (the model reads it); enter denies", id="reason")
        reason.display = False
        yield reason

    def settled(self) -> Content:
        block = self.block
        assert isinstance(block, ApprovalCard)
        return Content.assemble(
            ("  ", ""), (block.tool, "bold"), (f" {block.outcome}", "$text-muted")
        )

    @on(Button.Pressed)
    def pressed(self, event: Button.Pressed) -> None:
        event.stop()
        {"approve": self.action_approve, "always": self.action_always, "deny": self.action_deny}[
            event.button.id or "approve"
        ]()

    def action_approve(self) -> None:
        self.act(lambda: self.link.approve(self.session_id, self.block.call_id))

    def action_always(self) -> None:
        self.act(lambda: self.link.approve(self.session_id, self.block.call_id, always=True))

    def action_deny(self) -> None:
        reason = self.query_one("#reason", Input)
        if not reason.display:
            reason.display = True
            reason.focus()
            return
        self._deny(reason.value)

    @on(Input.Submitted, "#reason")
    def reason_given(self, event: Input.Submitted) -> None:
        event.stop()
        self._deny(event.value)

    def _deny(self, text: str) -> None:
        reason = text.strip() or None
        self.act(lambda: self.link.deny(self.session_id, self.block.call_id, reason))


class QuestionView(WaitingView):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(str(n), f"pick({n})", show=False) for n in range(1, 10)
    ]

    def head(self) -> Content:
        block = self.block
        assert isinstance(block, QuestionCard)
        return Content.assemble(("  ? the agent asks: ", "bold $warning"), block.question)

    def controls(self) -> ComposeResult:
        block = self.block
        assert isinstance(block, QuestionCard)
        if block.choices:
            with Horizontal(classes="card-actions"):
                for number, choice in enumerate(block.choices, 1):
                    yield Button(f"{number} {choice}", name=choice, compact=True)
        if block.allow_other or not block.choices:
            hint = "or your own answer; enter sends" if block.choices else "your answer; enter"
            yield Input(placeholder=hint, id="answer")

    def settled(self) -> Content:
        block = self.block
        assert isinstance(block, QuestionCard)
        return Content.assemble(
            ("  asked: ", "$text-muted"), block.question, (f"  {block.outcome}", "$text-muted")
        )

    @on(Button.Pressed)
    def pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self._answer(event.button.name or "")

    def action_pick(self, number: int) -> None:
        block = self.block
        assert isinstance(block, QuestionCard)
        if 0 < number <= len(block.choices):
            self._answer(block.choices[number - 1])

    @on(Input.Submitted, "#answer")
    def typed(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value.strip():
            self._answer(event.value)

    def _answer(self, text: str) -> None:
        self.act(lambda: self.link.answer(self.session_id, self.block.call_id, text))


class BudgetView(WaitingView):
    def head(self) -> Content:
        block = self.block
        assert isinstance(block, BudgetCard)
        return Content.assemble(("  ? ", "bold $warning"), (block.message, "bold $warning"))

    def controls(self) -> ComposeResult:
        block = self.block
        assert isinstance(block, BudgetCard)
        yield Input(placeholder=f"new {block.limit} limit; enter raises", id="limit")

    def settled(self) -> Content:
        block = self.block
        assert isinstance(block, BudgetCard)
        return Content.assemble((f"  {block.message}: {block.outcome}", "$text-muted"))

    @on(Input.Submitted, "#limit")
    def typed(self, event: Input.Submitted) -> None:
        event.stop()
        block = self.block
        assert isinstance(block, BudgetCard)
        try:
            value = float(event.value.strip().lstrip("$"))
        except ValueError:
            block.error = f"a number, above what was allowed (got {event.value!r})"
            self.show(block)
            return
        limit: Limit = block.limit  # type: ignore[assignment]  # a Limit from the event
        scope: Scope = "session" if block.scope == "session" else "run"
        self.act(lambda: self.link.raise_limit(self.session_id, scope, limit, value))


class SubAgentView(Collapsible, BlockView):
    """A sub-agent: its own session's conversation, followed as the parent's is, nested
    and collapsible (Enter or a click on its title)."""

    def __init__(self, block: SubAgentCard, link: Link, depth: int) -> None:
        title = (
            f"sub-agent {block.name or short_id(block.session_id)} · {short_id(block.session_id)}"
        )
        super().__init__(
            ConversationView(link, block.session_id, nested=True, depth=depth + 1),
            title=title,
            collapsed=depth >= 2,
            classes="subagent",
        )
        self.block = block

    def show(self, block: Block) -> None:
        self.block = block


class ConversationView(VerticalScroll):
    """One session's conversation, following its events (`SessionFeed`)."""

    class Changed(Message):
        def __init__(self, view: ConversationView) -> None:
            super().__init__()
            self.view = view

    def __init__(self, link: Link, session_id: str, *, nested: bool = False, depth: int = 0):
        super().__init__(classes="nested" if nested else "conversation")
        self.link = link
        self.session_id = session_id
        self.depth = depth
        self.feed = SessionFeed(link, session_id, self._changed)
        self._views: dict[str, tuple[Widget, int]] = {}
        self.can_focus = not nested

    def on_mount(self) -> None:
        self.anchor()
        self.run_worker(self._follow(), exit_on_error=False, group="feed")

    async def _follow(self) -> None:
        try:
            await self.feed.open()
        except DuragentError as error:
            self.feed.error = str(error)
            self._changed()
        await self.feed.follow()

    def _changed(self) -> None:
        self.sync()
        self.post_message(self.Changed(self))

    def make(self, block: Block) -> Widget:
        if isinstance(block, Said):
            return SaidView(block)
        if isinstance(block, ToolCard):
            return ToolView(block)
        if isinstance(block, ApprovalCard):
            return ApprovalView(block, self.link, self.session_id)
        if isinstance(block, QuestionCard):
            return QuestionView(block, self.link, self.session_id)
        if isinstance(block, BudgetCard):
            return BudgetView(block, self.link, self.session_id)
        if isinstance(block, SubAgentCard):
            return SubAgentView(block, self.link, self.depth)
        assert isinstance(block, Note)
        return NoteView(block)

    def sync(self) -> None:
        """Mount the new blocks in their place, redraw the changed ones."""
        previous: Widget | None = None
        for block in self.feed.transcript.blocks:
            known = self._views.get(block.id)
            if known is None:
                view = self.make(block)
                if previous is not None:
                    self.mount(view, after=previous)
                else:
                    self.mount(view, before=0) if self.children else self.mount(view)
                self._views[block.id] = (view, block.version)
                previous = view
                continue
            view, version = known
            if version != block.version:
                assert isinstance(view, BlockView)
                view.show(block)
                self._views[block.id] = (view, block.version)
            previous = view

    def waiting_views(self) -> list[WaitingView]:
        """The cards that wait for a person, nested ones included, oldest first."""
        return [v for v in self.query(WaitingView) if v.block.waiting]


# Queued messages --------------------------------------------------------------------


class Chip(Static):
    """A queued message: e edit, g guide, d delete (keys when it has the focus)."""

    can_focus = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("e", "act('edit')", "edit", show=False),
        Binding("g", "act('guide')", "guide", show=False),
        Binding("d,delete", "act('delete')", "delete", show=False),
    ]

    class Act(Message):
        def __init__(self, item_id: str, action: str) -> None:
            super().__init__()
            self.item_id = item_id
            self.action = action

    def __init__(self, item_id: str, kind: str, text: str) -> None:
        super().__init__(classes="chip")
        self.item_id = item_id
        self.kind = kind
        self.text = text
        self.refresh_text()

    def refresh_text(self) -> None:
        what = "guidance, waiting for a safe point" if self.kind == "guidance" else "queued"
        line = " ".join(self.text.split())
        self.update(Content.assemble((f" {what} ", "bold $warning"), line))

    def action_act(self, action: str) -> None:
        if action == "guide" and self.kind == "guidance":
            return
        self.post_message(self.Act(self.item_id, action))

    def on_click(self, event: events.Click) -> None:
        self.focus()


class ChipNote(Static):
    """What became of a queued message, for a few seconds."""


class ChipBar(Vertical):
    """The queued messages above the box, and notes on those that left."""

    LEAVE_AFTER_S = 4.0

    def __init__(self) -> None:
        super().__init__(id="chips")
        self._chips: dict[str, Chip] = {}

    def sync(self, items: Sequence[tuple[str, str, str]]) -> list[str]:
        """Show these pending items (id, kind, text); returns the ids that left."""
        pending = {item_id for item_id, _, _ in items}
        gone = [item_id for item_id in self._chips if item_id not in pending]
        for item_id in gone:
            self._chips.pop(item_id).remove()
        for item_id, kind, text in items:
            chip = self._chips.get(item_id)
            if chip is None:
                chip = Chip(item_id, kind, text)
                self._chips[item_id] = chip
                self.mount(chip)
            elif chip.kind != kind:
                chip.kind = kind
                chip.refresh_text()
        return gone

    def say(self, text: str, key: str | None = None) -> None:
        """A note on a message that left the queue (or a run that is starting), gone
        after a few seconds; one with `key` replaces the earlier one of that key."""
        if key is not None:
            for old in self.query(f"#note-{key}"):
                old.remove()
        note = ChipNote(
            Content.assemble((f" {text}", "$text-muted")), id=f"note-{key}" if key else None
        )
        self.mount(note)
        if key is None or not key.startswith("run-"):
            self.set_timer(self.LEAVE_AFTER_S, note.remove)

    def unsay(self, key: str) -> None:
        for old in self.query(f"#note-{key}"):
            old.remove()

    def chips(self) -> list[Chip]:
        return list(self._chips.values())


# The message box and the footer ----------------------------------------------------------------


class MessageBox(TextArea):
    """The message box: always open. Enter sends; Ctrl+J (or Shift+Enter where the
    terminal tells it) is a new line; Up in an empty box goes to the queued messages."""

    class Submitted(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class ToChips(Message):
        pass

    def __init__(self) -> None:
        super().__init__(id="box", soft_wrap=True, show_line_numbers=False, compact=True)
        self.cursor_blink = False  # a blinking cursor redraws twice a second: over SSH too
        self.placeholder = "Message the agent (enter sends; /help lists commands)"

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.post_message(self.Submitted(self.text))
            return
        if event.key in ("ctrl+j", "shift+enter"):
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        if event.key == "up" and not self.text:
            event.stop()
            event.prevent_default()
            self.post_message(self.ToChips())
            return
        await super()._on_key(event)


class KeyBar(Static):
    """The keys of what has the focus."""
