"""`duragent chat`: the full-screen app (Textual).

The screen, top to bottom: the header (phase, turn, tokens, cost), the conversation (with
the running tools' output, and the cards of what waits for a person), the queued
messages' chips, the message box (always open) and the footer of keys. It behaves as the
page does (seed 001's interaction): Enter sends, an idle session starts a run and a busy
one queues the text as a chip (edit, guide, delete); keys send guidance, steering and
follow-ups; Esc (or Ctrl+C once) stops the run; Ctrl+C twice leaves, and the run goes on
with the workers. Everything shown is read from the store, so a chat that comes back, or
a second one, shows the same.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from temporalio.service import RPCError
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.timer import Timer
from textual.widget import Widget

from duragent.client.chat.keys import (
    APPROVAL_KEYS,
    BUDGET_KEYS,
    CHIP_KEYS,
    COMPOSER_KEYS,
    DOUBLE_PRESS_S,
    QUESTION_KEYS,
    footer,
)
from duragent.client.chat.link import Link
from duragent.client.chat.slash import SlashError, parse
from duragent.client.chat.transcript import POINT_WORDS
from duragent.client.chat.views import (
    ApprovalView,
    BudgetView,
    Chip,
    ChipBar,
    ConversationView,
    HeaderBar,
    KeyBar,
    MessageBox,
    QuestionView,
    header_content,
    short_id,
)
from duragent.client.errors import DuragentError
from duragent.store.records import QueueItem

CSS = """
Screen { layout: vertical; }
#header { height: 1; background: $panel; }
ConversationView.conversation { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
ConversationView.nested { height: auto; max-height: 16; padding: 0; }
.said { margin-top: 1; }
.tool, .note { margin: 0; }
WaitingView { height: auto; margin: 1 0 0 0; }
WaitingView.waiting { border-left: thick $warning; padding-left: 1; }
.card-actions { height: auto; }
.card-actions Button { margin-right: 1; }
WaitingView Input { margin: 0; }
Collapsible.subagent { margin: 0 0 0 2; padding: 0; border-top: none; }
#chips { height: auto; max-height: 5; }
Chip { height: 1; }
Chip:focus { background: $accent 40%; }
ChipNote { height: 1; }
#box { height: 4; border-top: solid $primary; }
#keys { height: auto; max-height: 2; color: $text-muted; background: $panel; }
"""


TERMINAL_CHECK_S = 1.0
"""How often the chat checks that its terminal is still there."""


def terminal_gone() -> bool:
    """Whether the terminal on standard output was closed (its device is gone)."""
    out = sys.__stdout__
    try:
        return out is None or not os.path.exists(os.ttyname(out.fileno()))
    except (OSError, ValueError):
        return True


@dataclass(frozen=True)
class Left:
    """How the chat ended: the session it was in, and whether a run was open then."""

    session_id: str
    run_open: bool


class ChatApp(App[Left]):
    """A session's chat; `run_async()` returns `Left` when the person leaves."""

    CSS = CSS
    TITLE = "duragent chat"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "interrupt", "stop / leave", priority=True, show=False),
        Binding("ctrl+q", "leave", "leave", priority=True, show=False),
        Binding("ctrl+g", "send('guide')", "guide", priority=True, show=False),
        Binding("ctrl+t", "send('steer')", "steer", priority=True, show=False),
        Binding("ctrl+f", "send('follow_up')", "follow-up", priority=True, show=False),
        Binding("ctrl+r", "answer_waiting", "answer", priority=True, show=False),
        Binding("escape", "escape", "stop", show=False),
    ]

    def __init__(self, link: Link, session_id: str, *, light: bool = False) -> None:
        super().__init__()
        self.link = link
        self.session_id = session_id
        self.model = ""
        self.session_name = f"session {short_id(session_id)}"
        self.theme = "textual-light" if light else "textual-dark"
        self._ctrl_c_at = 0.0
        self._ctrl_c_stop: Timer | None = None
        self._edited: set[str] = set()
        self._deleted: set[str] = set()

    # The screen ------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield ConversationView(self.link, self.session_id)
        yield ChipBar()
        yield MessageBox()
        yield KeyBar(id="keys")

    @property
    def conversation(self) -> ConversationView:
        return self.query_one("ConversationView.conversation", ConversationView)

    @property
    def box(self) -> MessageBox:
        return self.query_one(MessageBox)

    @property
    def chips(self) -> ChipBar:
        return self.query_one(ChipBar)

    def on_mount(self) -> None:
        self.box.focus()
        self.watch(self.screen, "focused", self._focus_changed)
        self.run_worker(self._load_name(), exit_on_error=False)
        if not self.is_headless:
            self.set_interval(TERMINAL_CHECK_S, self._leave_if_terminal_gone)

    def _leave_if_terminal_gone(self) -> None:
        # A closed window or a dropped SSH connection deletes the pseudo-terminal: reads
        # then fail at once, and the app would spin with nobody to draw for.
        if terminal_gone():
            self.leave()

    async def _load_name(self) -> None:
        try:
            record = await self.link.session(self.session_id)
        except DuragentError:
            return
        self.session_name = record.name or self.session_name
        self.model = self.model or record.config.model
        self._show_header()

    def _focus_changed(self, focused: Widget | None) -> None:
        keys = footer(COMPOSER_KEYS)
        for node in focused.ancestors_with_self if focused is not None else []:
            if isinstance(node, Chip):
                keys = footer(CHIP_KEYS)
            elif isinstance(node, ApprovalView):
                keys = footer(APPROVAL_KEYS)
            elif isinstance(node, QuestionView):
                keys = footer(QUESTION_KEYS)
            elif isinstance(node, BudgetView):
                keys = footer(BUDGET_KEYS)
            else:
                continue
            break
        else:
            if focused is not None and not isinstance(focused, MessageBox):
                keys = "tab next · shift+tab back · esc back to the box"
        self.query_one(KeyBar).update(keys)

    def _show_header(self) -> None:
        feed = self.conversation.feed
        content = header_content(feed, self.session_name, self.model, self.link.offline_model)
        header = self.query_one(HeaderBar)
        if content != header.content:  # drawn again only when it changed (an SSH link)
            header.update(content)

    @on(ConversationView.Changed)
    def feed_changed(self, event: ConversationView.Changed) -> None:
        if event.view is not self.conversation:
            return
        feed = event.view.feed
        if feed.model and not self.model:
            self.model = feed.model
        self._show_header()
        for run_id in feed.runs_seen:
            self.chips.unsay(f"run-{run_id}")
        items = [(item.id, item.kind, item.text) for item in feed.queue]
        for item_id in self.chips.sync(items):
            self._left_queue(item_id)
        if self.focused is None:
            self.box.focus()

    def _left_queue(self, item_id: str) -> None:
        """Say what became of a queued message that left the queue (here or elsewhere)."""
        if item_id not in self._edited:  # said when it was taken back
            self.run_worker(self._what_became(item_id), exit_on_error=False)

    async def _what_became(self, item_id: str) -> None:
        feed = self.conversation.feed
        item = await self._attempt(self.link.item(self.session_id, item_id))
        if item is None:
            return
        if item.status == "cancelled":
            run = feed.latest_run
            if item_id in self._deleted:
                self.chips.say("deleted")
            elif run is not None and run.status == "aborted":
                self.chips.say("cancelled by Stop")
            else:
                self.chips.say("withdrawn by another client")
        elif item.kind == "guidance":
            where = POINT_WORDS.get(feed.points.get(item_id, ""), "at a safe point")
            self.chips.say(f"guidance reached the agent {where}")
        elif item.status == "consumed":
            self.chips.say("sent with the next run")

    # Sending -------------------------------------------------------------------------

    @on(MessageBox.Submitted)
    def submitted(self, event: MessageBox.Submitted) -> None:
        self.action_send("send")

    def action_send(self, mode: Literal["send", "guide", "steer", "follow_up"]) -> None:
        text = self.box.text
        if not text.strip():
            return
        self.box.clear()  # cleared at once, so typing on never waits; put back if refused
        if mode == "send" and text.startswith("/"):
            self.run_worker(self._slash(text.strip()), exit_on_error=False)
            return
        self.run_worker(self._send(mode, text), exit_on_error=False)

    async def _send(self, mode: str, text: str) -> None:
        feed = self.conversation.feed
        sent = await self._attempt(self._deliver(mode, text), keep=text)
        if sent is None:
            return
        if isinstance(sent, QueueItem):
            feed.transcript.guidance_texts[sent.id] = sent.text
        await self._attempt(feed.refresh())

    async def _deliver(self, mode: str, text: str) -> Any:
        sid = self.session_id
        if mode == "guide":
            return await self.link.guide(sid, text)
        if mode == "steer":
            await self.link.steer(sid, text)
            self.notify("steering: it reaches the model after the current tool calls")
            return True
        if mode == "follow_up":
            await self.link.follow_up(sid, text)
            self.notify("follow-up: it is delivered when the agent would otherwise stop")
            return True
        sent = await self.link.send(sid, text)
        if not isinstance(sent, QueueItem):  # a run started
            feed = self.conversation.feed
            if sent.run_id not in feed.runs_seen:
                self.chips.say("sent: the run is starting…", key=f"run-{sent.run_id}")
        return sent

    async def _attempt(self, work: Awaitable[Any], *, keep: str | None = None) -> Any:
        """Run what the person asked; a refusal is told, and text sent is kept."""
        try:
            return await work
        except (DuragentError, RPCError) as error:
            self.notify(str(error), severity="error", timeout=8)
            if keep is not None and not self.box.text:
                self.set_box(keep)
            return None

    async def _slash(self, line: str) -> None:
        try:
            command, args = parse(line)
        except SlashError as error:
            self.say(str(error), "bad")
            return
        try:
            await command.run(self, args)
        except SlashError as error:
            self.say(str(error), "bad")
        except (DuragentError, RPCError, OSError) as error:
            self.say(f"/{command.name}: {error}", "bad")

    def say(self, text: str, tone: Literal["muted", "good", "warn", "bad"] = "muted") -> None:
        """A note of the chat's own in the conversation (a command's answer)."""
        self.conversation.feed.transcript.note(text, tone)
        self.conversation.sync()

    def set_box(self, text: str) -> None:
        self.box.text = text
        self.box.focus()
        self.box.move_cursor(self.box.document.end)

    # Queued messages ------------------------------------------------------------------

    @on(MessageBox.ToChips)
    def to_chips(self) -> None:
        chips = self.chips.chips()
        if chips:
            chips[-1].focus()

    @on(Chip.Act)
    def chip_act(self, event: Chip.Act) -> None:
        self.run_worker(self._chip(event.item_id, event.action), exit_on_error=False)

    async def _chip(self, item_id: str, action: str) -> None:
        feed = self.conversation.feed
        sid = self.session_id
        if action == "edit":
            text = await self._attempt(self.link.edit_item(sid, item_id))
            if text is not None:
                self._edited.add(item_id)
                self.set_box(f"{self.box.text}\n{text}" if self.box.text else text)
                self.chips.say("moved back into the message box")
        elif action == "guide":
            item = await self._attempt(self.link.guide_item(sid, item_id))
            if item is not None:
                feed.transcript.guidance_texts[item.id] = item.text
        else:
            self._deleted.add(item_id)
            await self._attempt(self.link.delete_item(sid, item_id))
        await self._attempt(feed.refresh())
        if self.focused is None or not self.focused.is_attached:
            self.box.focus()

    # Stopping and leaving ---------------------------------------------------------------

    def action_escape(self) -> None:
        if isinstance(self.focused, MessageBox):
            self.action_stop()
        else:
            self.box.focus()

    def action_stop(self) -> None:
        if not self.conversation.feed.busy:
            self.notify("no run to stop: the session is idle")
            return
        self.run_worker(self._stop(), exit_on_error=False)

    async def _stop(self) -> None:
        self.notify("stopping the run: its tools are killed, its queued input cancelled")
        await self._attempt(self.link.stop(self.session_id))
        await self._attempt(self.conversation.feed.refresh())

    def action_interrupt(self) -> None:
        """Ctrl+C: twice within `DOUBLE_PRESS_S` leaves (the run goes on); once stops the
        run when that time has passed with no second press."""
        now = time.monotonic()
        if now - self._ctrl_c_at < DOUBLE_PRESS_S:
            if self._ctrl_c_stop is not None:
                self._ctrl_c_stop.stop()
                self._ctrl_c_stop = None
            self.leave()
            return
        self._ctrl_c_at = now
        if self.conversation.feed.busy:
            self.notify("stopping the run… ^C again to leave instead: the run goes on")
            self._ctrl_c_stop = self.set_timer(DOUBLE_PRESS_S, self._stop_after_ctrl_c)
        else:
            self.notify("^C again to leave (the session stays: duragent chat SESSION)")

    def _stop_after_ctrl_c(self) -> None:
        self._ctrl_c_stop = None
        self.action_stop()

    def action_leave(self) -> None:
        self.leave()

    def leave(self) -> None:
        """Leave the chat; a run in progress goes on with the workers."""
        self.exit(Left(self.session_id, self.conversation.feed.busy))

    def action_answer_waiting(self) -> None:
        waiting = self.conversation.waiting_views()
        if not waiting:
            self.notify("nothing waits for you")
            return
        control = waiting[0].first_control()
        if control is not None:
            control.focus()
            control.scroll_visible()

    # Another session ---------------------------------------------------------------------

    async def open_session(self, session_id: str) -> None:
        """Show another session here (a fork)."""
        old = self.conversation
        self.session_id = session_id
        self.session_name = f"session {short_id(session_id)}"
        await self.mount(ConversationView(self.link, session_id), before=old)
        await old.remove()
        self.chips.sync([])
        self.run_worker(self._load_name(), exit_on_error=False)
